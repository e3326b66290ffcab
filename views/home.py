"""Start here: what the lab teaches and how to move through it."""

import streamlit as st

st.title("Attention Lab")
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
