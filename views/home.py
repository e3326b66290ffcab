"""Start here: what the lab teaches and how to move through it."""

import streamlit as st

from core.lessons.example_run import EXAMPLE, run_worked_example
from ui import join


@st.cache_data(show_spinner="Running examples/attention_by_hand.py...")
def worked_example_run():
    return run_worked_example()


st.title("Attention Lab")
join.show()  # a class server's address and its QR code (only when LAB_JOIN_URL is set)
st.markdown(
    "A visual lab for **scaled dot-product self-attention** and the small decoder-only transformer "
    "built around it. Every number on these pages is computed by the lab's own code, and every "
    "chart has a data table so you can check it by hand."
)
st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V")
st.markdown(
    """
| symbol | meaning | shape |
|---|---|---|
| Q, K | queries, keys | [batch, time, head width] (with heads: [B, H, T, D]) |
| V | values | [batch, time, value width] |
| d_k | head width, the last dimension of Q and K | scalar |
| M | mask: 0 where allowed, −∞ where forbidden | broadcastable to [B, H, T, S] |

Attention is a masked, normalised lookup: each query scores every key it may see, softmax turns the
allowed scores of a row into weights that sum to one, and the output row is the weighted sum of the
value rows.

**Suggested path:** Score geometry → Masks → Read one row → Temperature. Every page keeps its
settings in the address bar, so a link reproduces exactly what you show.
"""
)

st.header("The worked example, run")
st.markdown(
    "The lesson's example computes causal attention for four tokens by hand with PyTorch. Read the code, "
    "predict the first row of `weights` (hint: row 0 may only look at key 0), then run it."
)
if st.button("Run the worked example", key="home_run_example"):
    st.session_state["home_example_shown"] = True
code_col, out_col = st.columns([3, 2])
with code_col:
    st.code(EXAMPLE.read_text(encoding="utf-8"), language=None, wrap_lines=True)  # plain: token colours fail contrast
with out_col:
    if st.session_state.get("home_example_shown"):
        run = worked_example_run()
        st.markdown("**What it prints**" if run.ok else "**It could not run**")
        st.code(run.output, language=None, wrap_lines=True)
        if run.ok:
            st.caption("Row 0 is [1, 0, 0, 0]: its only allowed key takes all the weight. Every row sums to one.")
    else:
        st.info("Press **Run the worked example** to see what it prints (the lab runs only this file).")
