"""Scaled dot-product attention, the way the lab teaches it: softmax(Q Kᵀ / √d_k + M) V.

Masks are boolean with True = "may attend" (PyTorch's SDPA convention), broadcast to the score shape (..., T, S).
A forbidden logit is set to −∞ before the softmax; a row with no allowed key gets all-zero weights and a zero
output, never NaN, with finite gradients (PyTorch's own "safe softmax" does the same). Accepts (B, T, D) and
(B, H, T, D) inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class AttentionResult:
    scores: Tensor  # (..., T, S) scaled by `scale`, before masking and temperature
    weights: Tensor  # (..., T, S) after masking and softmax; every allowed row sums to one
    out: Tensor  # (..., T, Dv) weights @ v


def _check_temperature(temperature: float) -> float:
    if not isinstance(temperature, (int, float)) or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(
            f"temperature must be a finite number > 0, got {temperature!r}; "
            "use a small positive value such as 0.05 for a nearly greedy distribution"
        )
    return float(temperature)


def _check_mask(mask: Tensor, shape: torch.Size, what: str) -> None:
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise ValueError(f"{what} must be a bool tensor (True = may attend), got {got}")
    # Plain integer comparisons: this runs on every attention call, and torch.broadcast_shapes was a
    # measurable share of a small model's forward pass. Trailing dims must equal the scores' or be 1.
    fits = mask.dim() <= len(shape) and all(m in (1, n) for m, n in zip(reversed(mask.shape), reversed(shape)))
    if not fits:
        raise ValueError(
            f"{what} of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(shape)} "
            "(each trailing dimension must equal the scores' or be 1)"
        )


def softmax(x: Tensor, dim: int = -1, *, temperature: float = 1.0, mask: Tensor | None = None) -> Tensor:
    """softmax(x / temperature) over `dim`, with forbidden entries (mask False) given zero weight.

    Rows where every entry is forbidden return zeros. The maximum is subtracted before `exp`
    for numerical stability; it cancels in the ratio, so the result is the textbook softmax.
    """
    temperature = _check_temperature(temperature)
    if not x.is_floating_point():
        raise ValueError(f"softmax needs a floating-point tensor, got {x.dtype}")
    logits = x / temperature
    if mask is not None:
        _check_mask(mask, logits.shape, "mask")
        logits = logits.masked_fill(~mask, float("-inf"))
    row_max = logits.amax(dim=dim, keepdim=True)
    # A row with no allowed entry has max −∞; shift it by 0 instead so exp gives exact zeros.
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max)).detach()
    exps = torch.exp(logits - row_max)
    normaliser = exps.sum(dim=dim, keepdim=True)
    # Divide by 1 where the normaliser is 0 (all forbidden): 0 / 1 = 0 with a finite gradient,
    # where torch.where(denominator > 0, exps / denominator, 0) would leak NaN into the backward pass.
    safe_normaliser = torch.where(normaliser > 0, normaliser, torch.ones_like(normaliser))
    return exps / safe_normaliser


def causal_mask(T: int, S: int | None = None, *, device: torch.device | str | None = None) -> Tensor:
    """Bool (T, S): query t may attend to key s when s <= (S - T) + t.

    Bottom-right aligned: with a cache of S - T earlier keys, query row t sits at absolute position
    S - T + t. (F.scaled_dot_product_attention(is_causal=True) is top-left aligned, wrong when T < S.)
    """
    S = T if S is None else S
    if not (isinstance(T, int) and isinstance(S, int)) or T < 1 or S < T:
        raise ValueError(f"causal_mask needs integers 1 <= T <= S, got T={T!r}, S={S!r}")
    t = torch.arange(T, device=device).unsqueeze(1)  # (T, 1)
    s = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    return s <= (S - T) + t  # (T, S)


def padding_mask(lengths: Sequence[int] | Tensor, S: int, *, side: str = "right") -> Tensor:
    """Bool (B, 1, S): key s of sequence b is real (True) or padding (False).

    `side="right"` keeps the first lengths[b] positions, `side="left"` the last ones (the layout
    used when a batch of prompts is generated together). Unsqueeze dim 1 for heads: (B, 1, 1, S).
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1 or lengths.dtype.is_floating_point:
        raise ValueError(f"lengths must be a 1-D sequence of integers, got shape {tuple(lengths.shape)}")
    if (lengths < 0).any() or (lengths > S).any():
        raise ValueError(f"every length must lie in 0..{S} (the padded length S), got {lengths.tolist()}")
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    s = torch.arange(S).unsqueeze(0)  # (1, S)
    n = lengths.unsqueeze(1)  # (B, 1)
    real = s < n if side == "right" else s >= S - n  # (B, S)
    return real.unsqueeze(1)  # (B, 1, S)


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, Tensor) or x.dim() not in (3, 4):
            got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"{name} must be (B, T, D) or (B, H, T, D), got {got}")
        if not x.is_floating_point():
            raise ValueError(f"{name} must be floating point, got {x.dtype}")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            "q, k, v must share their leading (batch, head) dimensions, got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same head width D, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v need the same number of keys S, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    if q.shape[-1] == 0 or q.shape[-2] == 0 or k.shape[-2] == 0:
        raise ValueError(f"empty dimension in q {tuple(q.shape)} or k {tuple(k.shape)}")


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    scale: float | None = None,
    temperature: float = 1.0,
) -> AttentionResult:
    """softmax(q kᵀ · scale / temperature, masked) v, with every intermediate returned.

    q (..., T, D), k (..., S, D), v (..., S, Dv); mask bool broadcastable to (..., T, S).
    scale defaults to 1/√D; pass scale=1.0 to see what happens without the division.
    """
    _check_qkv(q, k, v)
    D = q.shape[-1]
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., T, S)
    weights = softmax(scores, dim=-1, temperature=temperature, mask=mask)  # (..., T, S)
    out = weights @ v  # (..., T, Dv)
    return AttentionResult(scores=scores, weights=weights, out=out)
