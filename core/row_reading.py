"""Read one row: the release checkpoint. A row of the tensor result against the hand computation.

`read_row` runs causal attention on one sequence with the tensor code and row t of it with
core.handcheck (plain Python floats), and says whether the two agree within ROW_ATOL.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from core import handcheck
from core.attention import causal_mask, scaled_dot_product_attention
from core.lessons import random_qkv, worked_example


# float32 tensor result against the float64 hand computation.
ROW_ATOL = 1e-6


def row_inputs(*, worked: bool, seed: int = 0, T: int = 4, D: int = 3, Dv: int = 2) -> tuple[Tensor, Tensor, Tensor]:
    """q (T, D), k (S, D), v (S, Dv) of one sequence: the worked example's, or seeded random ones."""
    if worked:
        ex = worked_example()
        return ex.q[0], ex.k[0], ex.v[0]  # (T, D), (S, D), (S, Dv)
    q, k, v = random_qkv(1, 1, T, D, seed=seed, Dv=Dv)  # (1, 1, T, D), ..., (1, 1, S, Dv)
    return q[0, 0], k[0, 0], v[0, 0]  # (T, D), (S, D), (S, Dv)


def row_inputs_from_lists(q: list, k: list, v: list) -> tuple[Tensor, Tensor, Tensor]:
    """q (T, D), k (S, D), v (S, Dv) from plain lists (a model's head, passed between pages), validated."""
    try:
        q_t, k_t, v_t = (torch.tensor(x, dtype=torch.float32) for x in (q, k, v))  # (T, D), (S, D), (S, Dv)
    except (TypeError, ValueError) as err:
        raise ValueError(f"q, k, v must be rectangular lists of numbers: {err}") from None
    if q_t.dim() != 2 or k_t.dim() != 2 or v_t.dim() != 2 or q_t.shape[1] != k_t.shape[1] or k_t.shape[0] != v_t.shape[0]:
        raise ValueError(f"need q (T, D), k (S, D), v (S, Dv), got {tuple(q_t.shape)}, {tuple(k_t.shape)}, {tuple(v_t.shape)}")
    return q_t, k_t, v_t


@dataclass(frozen=True)
class RowReading:
    t: int                         # the query row
    allowed: tuple[bool, ...]      # (S,) keys row t may attend to (causal: s <= t)
    trace: handcheck.RowTrace      # the computation by hand, in Python floats (float64)
    hand_weight_sum: float         # sum of the hand weights (math.fsum)
    weights: tuple[float, ...]     # (S,) the tensor's weights of row t, exactly 0 on masked keys
    weight_sum: float              # exact sum of the allowed tensor weights
    sum_error: float               # |weight_sum - 1|
    out: tuple[float, ...]         # (Dv,) the tensor's output row
    difference: tuple[float, ...]  # (Dv,) |hand out - tensor out|
    max_difference: float
    atol: float
    passed: bool                   # max_difference <= atol, weight_sum within atol of 1, outputs finite


def read_row(q: Tensor, k: Tensor, v: Tensor, t: int, *, atol: float = ROW_ATOL) -> RowReading:
    """Causal attention row t of q (T, D), k (S, D), v (S, Dv), by tensor and by hand, compared within atol."""
    if q.dim() != 2 or k.dim() != 2 or v.dim() != 2:
        raise ValueError(f"read_row needs q (T, D), k (S, D), v (S, Dv), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    T, S = q.shape[0], k.shape[0]
    if not (isinstance(t, int) and 0 <= t < T):
        raise ValueError(f"row t must be an integer in 0..{T - 1}, got {t!r}")
    mask = causal_mask(T, S)  # (T, S)
    result = scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), mask)  # (1, T, S), (1, T, Dv)
    allowed = tuple(mask[t].tolist())
    trace = handcheck.attention_row(q[t].tolist(), k.tolist(), v.tolist(), allowed=allowed)
    weights = tuple(result.weights[0, t].tolist())
    weight_sum = math.fsum(w for w, ok in zip(weights, allowed) if ok)
    out = tuple(result.out[0, t].tolist())
    difference = tuple(abs(h - x) for h, x in zip(trace.out, out))
    max_difference = max(difference)
    passed = max_difference <= atol and abs(weight_sum - 1.0) <= atol and all(math.isfinite(x) for x in out)
    return RowReading(t, allowed, trace, math.fsum(trace.softmax.weights), weights, weight_sum, abs(weight_sum - 1.0), out, difference, max_difference, atol, passed)
