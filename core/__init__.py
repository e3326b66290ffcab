"""Attention Lab's library: attention you can check by hand and a decoder-only transformer built on it.

Shape legend, used in every shape comment of the project:
    B  batch                      H  heads
    T  query positions (new)      S  key positions (cache + new)
    D  head width (d_k)           C  model width (d_model)
    V  vocabulary size

Masks are bool with True = may attend, broadcastable to (B, H, T, S).
This package never imports streamlit and never prints: progress goes through callbacks.
"""
from core.attention import (
    AttentionResult,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    softmax,
)

__all__ = [
    "AttentionResult",
    "causal_mask",
    "padding_mask",
    "scaled_dot_product_attention",
    "softmax",
]
