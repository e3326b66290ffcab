"""Read one row: row t of the tensor attention result against the same row computed by hand.

The verdict compares in float64 within the agreement rule's allowance, so it is the same on every CPU; the float32
result is shown beside it, with float32's allowance, and does not decide.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from core import handcheck
from core.agreement import Agreement, allowance, row_agreement
from core.attention import causal_mask, scaled_dot_product_attention
from core.lessons.scores import random_qkv, worked_example


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
    if (
        q_t.dim() != 2
        or k_t.dim() != 2
        or v_t.dim() != 2
        or q_t.shape[1] != k_t.shape[1]
        or k_t.shape[0] != v_t.shape[0]
    ):
        raise ValueError(
            f"need q (T, D), k (S, D), v (S, Dv), got {tuple(q_t.shape)}, {tuple(k_t.shape)}, {tuple(v_t.shape)}"
        )
    return q_t, k_t, v_t


@dataclass(frozen=True)
class RowReading:
    t: int  # the query row
    allowed: tuple[bool, ...]  # (S,) keys row t may attend to (causal: s <= t)
    trace: handcheck.RowTrace  # the computation by hand, in Python floats (float64)
    hand_weight_sum: float  # sum of the hand weights (math.fsum)
    weights: tuple[float, ...]  # (S,) the tensor's weights of row t in float64, exactly 0 on masked keys
    weight_sum: float  # exact sum of the allowed tensor weights
    sum_error: float  # |weight_sum - 1|
    sum_allowed: float  # what rounding allows for a sum of S weights in float64
    out: tuple[float, ...]  # (Dv,) the tensor's output row, float64 on the same numbers
    difference: tuple[float, ...]  # (Dv,) |hand out - tensor out|
    decided: Agreement  # hand out vs tensor out, float64: the verdict
    out32: tuple[float, ...]  # (Dv,) the tensor's output row in float32 (shown)
    shown32: Agreement  # hand out vs float32 out, with float32's allowance (shown, not decided)

    @property
    def max_difference(self) -> float:
        return self.decided.max_abs_diff

    @property
    def atol(self) -> float:
        """The allowance the verdict used (derived, not chosen)."""
        return self.decided.allowed

    @property
    def passed(self) -> bool:
        """Hand and tensor agree within rounding, the weights sum to one within rounding, outputs finite."""
        return self.decided.passed and self.sum_error <= self.sum_allowed and all(math.isfinite(x) for x in self.out)


def read_row(q: Tensor, k: Tensor, v: Tensor, t: int) -> RowReading:
    """Causal attention row t of q (T, D), k (S, D), v (S, Dv), by tensor and by hand, compared in float64."""
    if q.dim() != 2 or k.dim() != 2 or v.dim() != 2:
        raise ValueError(
            f"read_row needs q (T, D), k (S, D), v (S, Dv), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    T, S = q.shape[0], k.shape[0]
    if not (isinstance(t, int) and 0 <= t < T):
        raise ValueError(f"row t must be an integer in 0..{T - 1}, got {t!r}")
    mask = causal_mask(T, S)  # (T, S)
    q64, k64, v64 = (x.double().unsqueeze(0) for x in (q, k, v))  # (1, T, D), (1, S, D), (1, S, Dv): exact casts
    result = scaled_dot_product_attention(q64, k64, v64, mask)  # (1, T, S), (1, T, Dv) in float64
    result32 = scaled_dot_product_attention(
        q.float().unsqueeze(0), k.float().unsqueeze(0), v.float().unsqueeze(0), mask
    )
    allowed = tuple(mask[t].tolist())
    trace = handcheck.attention_row(q[t].tolist(), k.tolist(), v.tolist(), allowed=allowed)
    weights = tuple(result.weights[0, t].tolist())
    weight_sum = math.fsum(w for w, ok in zip(weights, allowed) if ok)
    out = tuple(result.out[0, t].tolist())
    seen = functools.partial(  # row_agreement on what row t sees: its q row and the allowed k, v rows
        row_agreement,
        q_row=q[t].tolist(),
        k_rows=[r for r, ok in zip(k.tolist(), allowed) if ok],
        v_rows=[r for r, ok in zip(v.tolist(), allowed) if ok],
        scale=1.0 / math.sqrt(q.shape[1]),
    )
    out32 = tuple(result32.out[0, t].tolist())
    return RowReading(
        t,
        allowed,
        trace,
        math.fsum(trace.softmax.weights),
        weights,
        weight_sum,
        abs(weight_sum - 1.0),
        allowance(torch.float64, S),
        out,
        tuple(abs(h - x) for h, x in zip(trace.out, out)),
        seen(trace.out, out),
        out32,
        seen(out32, trace.out, dtype=torch.float32),
    )
