"""Start here: the lesson's worked example computed on the first screen, and how to move through the lab."""

import streamlit as st

from core import i18n
from core.i18n import _
from core.lessons.example_run import run_worked_example
from ui import cached, charts, join, layout
from ui.companion import chart

EXAMPLE_SCRIPT = "examples/attention_by_hand.py"


@st.cache_data(show_spinner=False)
def worked_example_run():
    return run_worked_example()


st.title("Attention Lab")  # the lab's name, the same in every language
st.caption(
    _(
        "A visual lab for **scaled dot-product self-attention** and the small transformer built around it. Every "
        "number is computed by the lab's own code, and every chart has a data table so you can check it by hand."
    )
)

# The four tokens of examples/attention_by_hand.py (same seed, same draws): (T, S) weights, forbidden = None.
weights, weights_table = cached.worked_example_weights(i18n.language())
labels = [str(i) for i in range(len(weights))]
picture_col, side_col = st.columns([3, 2])
with picture_col, layout.picture():
    rows = "; ".join(
        _("row {row} {weights}").format(
            row=t, weights=", ".join(i18n._(charts.MASKED_TEXT) if w is None else i18n.number(w, 4) for w in row)
        )
        for t, row in enumerate(weights)
    )
    chart(
        charts.heatmap(
            weights,
            title=_("The worked example: weights = softmax(q kᵀ / √3 + M), four tokens, causal mask"),
            x_labels=labels,
            y_labels=labels,
            zmin=0,
            zmax=1,
            value_format=".4f",
        ),
        weights_table,
        _(
            "Worked example weights: {rows}. Row 0 may look at key 0 only, so it gives it all the weight; every row "
            "sums to one."
        ).format(rows=rows),
        key="home_weights",
    )
with side_col:
    join.show(narrow=True)  # a class server's address and its QR code (only when LAB_JOIN_URL is set)
    # Inline, not st.latex: a display formula wider than this column scrolls sideways (a region a keyboard cannot
    # reach, axe-core), while an inline one breaks after its "=".
    st.markdown(r"$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V$")
    st.markdown(
        _(
            "**What the room will learn from this picture:** each query (a row) scores every key it may see, "
            "the causal mask M hides the keys to its right (grey), and softmax turns the allowed scores of a "
            "row into weights that sum to one. The output row is the weighted sum of the value rows."
        )
    )

symbols_tab, code_tab, path_tab = layout.more([_("The symbols"), _("The worked example, run"), _("Suggested path")])
with symbols_tab:
    st.markdown(
        _(
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
"""
        )
    )
with code_tab:
    st.markdown(
        _(
            "The picture above is this script's result. Read the code, predict the first row of `weights` "
            "(hint: row 0 may only look at key 0), then run it."
        )
    )
    if st.button(_("Run the worked example"), key="home_run_example"):
        st.session_state["home_example_shown"] = True
    code_col, out_col = st.columns([3, 2])
    with code_col:
        st.code(cached.example_source(), language=None, wrap_lines=True)  # plain: colours fail contrast
    with out_col:
        if st.session_state.get("home_example_shown"):
            with st.spinner(_("Running {script}...").format(script=EXAMPLE_SCRIPT)):
                run = worked_example_run()
            st.markdown(_("**What it prints**") if run.ok else _("**It could not run**"))
            st.code(run.output, language=None, wrap_lines=True)
            if run.ok:
                st.caption(
                    _("Row 0 is [1, 0, 0, 0]: its only allowed key takes all the weight. Every row sums to one.")
                )
        else:
            st.info(_("Press **Run the worked example** to see what it prints (the lab runs only this file)."))
with path_tab:
    st.markdown(
        _(
            "**Suggested path:** Score geometry → Masks → Read one row → Temperature. Every page keeps its "
            "settings in the address bar, so a link reproduces exactly what you show."
        )
    )
