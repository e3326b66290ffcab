"""Hand-checks: the attention kernel written again with lists, `math` and loops, one number at a time.

An oracle, not a copy of the tensor code: no torch here, in the order a learner would compute it on paper. Each
function returns a frozen trace of every intermediate a page displays; tests hold these traces, the kernel and
PyTorch's own F.scaled_dot_product_attention together. Names mirror the kernel's; loops are named by the shape
legend (for t in range(T): for s in range(S)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Vector = Sequence[float]
Matrix = Sequence[Sequence[float]]
NEG_INF = float("-inf")


@dataclass(frozen=True)
class DotTrace:
    terms: tuple[float, ...]  # a[d] * b[d] for each d
    total: float  # their sum


@dataclass(frozen=True)
class SoftmaxTrace:
    logits: tuple[float, ...]  # inputs divided by the temperature
    allowed: tuple[bool, ...]  # True = may attend
    masked: tuple[float, ...]  # logits with forbidden entries set to -inf
    row_max: float  # max of the allowed logits (0.0 when none is allowed)
    exps: tuple[float, ...]  # exp(masked - row_max); exactly 0 where forbidden
    normaliser: float  # sum of exps
    weights: tuple[float, ...]  # exps / normaliser; all 0 when nothing is allowed


@dataclass(frozen=True)
class RowTrace:
    dots: tuple[DotTrace, ...]  # q_t . k_s for each key s
    scale: float  # 1/sqrt(D) unless given
    scores: tuple[float, ...]  # dots * scale
    softmax: SoftmaxTrace
    weighted_values: tuple[tuple[float, ...], ...]  # weights[s] * v_s for each key s
    out: tuple[float, ...]  # the sum of weighted_values


@dataclass(frozen=True)
class AttentionTrace:
    scores: tuple[tuple[float, ...], ...]  # (T, S)
    weights: tuple[tuple[float, ...], ...]  # (T, S)
    out: tuple[tuple[float, ...], ...]  # (T, Dv)
    rows: tuple[RowTrace, ...]  # one per query t


def dot(a: Vector, b: Vector) -> DotTrace:
    if len(a) != len(b):
        raise ValueError(f"dot needs vectors of one length, got {len(a)} and {len(b)}")
    terms = tuple(float(x) * float(y) for x, y in zip(a, b))
    return DotTrace(terms=terms, total=math.fsum(terms))


def softmax(xs: Vector, *, temperature: float = 1.0, allowed: Sequence[bool] | None = None) -> SoftmaxTrace:
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    allowed = tuple(True for _ in xs) if allowed is None else tuple(bool(a) for a in allowed)
    if len(allowed) != len(xs):
        raise ValueError(f"allowed has {len(allowed)} entries for {len(xs)} logits")
    logits = tuple(float(x) / temperature for x in xs)
    masked = tuple(x if ok else NEG_INF for x, ok in zip(logits, allowed))
    kept = [x for x in masked if x != NEG_INF]
    row_max = max(kept) if kept else 0.0
    exps = tuple(math.exp(x - row_max) if x != NEG_INF else 0.0 for x in masked)
    normaliser = math.fsum(exps)
    weights = tuple(e / normaliser if normaliser > 0 else 0.0 for e in exps)
    return SoftmaxTrace(logits, allowed, masked, row_max, exps, normaliser, weights)


def attention_row(
    q_row: Vector,
    k_rows: Matrix,
    v_rows: Matrix,
    *,
    allowed: Sequence[bool] | None = None,
    scale: float | None = None,
    temperature: float = 1.0,
) -> RowTrace:
    """One query row: its scores against every key, their softmax, the weighted sum of value rows."""
    S = len(k_rows)
    if len(v_rows) != S:
        raise ValueError(f"k has {S} rows but v has {len(v_rows)}")
    D = len(q_row)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    dots = tuple(dot(q_row, k_rows[s]) for s in range(S))
    scores = tuple(dots[s].total * scale for s in range(S))
    trace = softmax(scores, temperature=temperature, allowed=allowed)
    Dv = len(v_rows[0]) if S else 0
    weighted = tuple(tuple(trace.weights[s] * float(v_rows[s][j]) for j in range(Dv)) for s in range(S))
    out = tuple(math.fsum(weighted[s][j] for s in range(S)) for j in range(Dv))
    return RowTrace(dots, scale, scores, trace, weighted, out)


def causal_mask(T: int, S: int | None = None) -> tuple[tuple[bool, ...], ...]:
    """allowed[t][s] is True when key s is not in query t's future (bottom-right aligned)."""
    S = T if S is None else S
    if T < 1 or S < T:
        raise ValueError(f"causal_mask needs 1 <= T <= S, got T={T}, S={S}")
    offset = S - T  # query t sits at absolute position offset + t
    return tuple(tuple(s <= offset + t for s in range(S)) for t in range(T))


def padding_mask(lengths: Sequence[int], S: int, *, side: str = "right") -> tuple[tuple[bool, ...], ...]:
    """real[b][s]: whether key s of sequence b holds a token (True) or padding (False)."""
    rows = []
    for n in lengths:
        if not 0 <= n <= S:
            raise ValueError(f"every length must lie in 0..{S}, got {n}")
        if side == "right":
            rows.append(tuple(s < n for s in range(S)))
        elif side == "left":
            rows.append(tuple(s >= S - n for s in range(S)))
        else:
            raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    return tuple(rows)


def scaled_dot_product_attention(
    q: Matrix,
    k: Matrix,
    v: Matrix,
    mask: Sequence[Sequence[bool]] | None = None,
    *,
    scale: float | None = None,
    temperature: float = 1.0,
) -> AttentionTrace:
    """Attention for one (batch element, head): q (T, D), k (S, D), v (S, Dv), mask (T, S)."""
    T = len(q)
    rows = tuple(
        attention_row(q[t], k, v, allowed=None if mask is None else mask[t], scale=scale, temperature=temperature)
        for t in range(T)
    )
    return AttentionTrace(
        scores=tuple(r.scores for r in rows),
        weights=tuple(r.softmax.weights for r in rows),
        out=tuple(r.out for r in rows),
        rows=rows,
    )


def entropy_bits(probs: Vector) -> float:
    """Shannon entropy in bits, with 0 log 0 = 0."""
    return -math.fsum(p * math.log2(p) for p in probs if p > 0)
