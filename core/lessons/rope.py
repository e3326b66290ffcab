"""The RoPE page's experiments: every number the page shows, as frozen results.

Why the score depends only on the offset: rotations compose by adding angles and Rᵀ undoes R, so

    (R_m q)·(R_n k) = qᵀ R_mᵀ R_n k = qᵀ R_{n-m} k

Vector arithmetic is float64 (the lesson compares algorithms); the loaded model's section is float32. Shapes: T
positions, D head width, P absolute positions, R offsets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from core.agreement import allowance
from core.attention import softmax
from core.i18n import N_
from core.model.gpt import GPT
from core.model.introspect import projections
from core.model.rope import (
    apply_rope,
    apply_rope_split_half,
    check_base,
    check_position,
    check_width,
    from_split_half,
    rope_frequencies,
    split_half_permutation,
    to_split_half,
)
from core.numbers import is_int

SEED = 0  # the page's fixed q, k come from torch.Generator().manual_seed(SEED)
# The drawn vectors' names, in this order: the keys of PairRotation.lengths and .angles (English, as ids), shown
# translated by the page.
VECTORS = (N_("q before"), N_("q after"), N_("k before"), N_("k after"))
# The verdicts use core.agreement's allowance in float64. The offset check: the spread of q·k across absolute
# positions, relative to |q||k| (the largest a score can be); an angle m·θ carries a rounding error of about
# m · eps radians, so the chain behind one score is D products plus the largest position. The layout check:
# each rotated feature is x·cos + x'·sin, two terms, in both layouts.


def _check_vector(name: str, x: Tensor) -> None:
    if not isinstance(x, Tensor) or x.dim() != 1 or not x.is_floating_point():
        got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a 1-D floating-point head vector (D,), got {got}")
    check_width(x.shape[0])


def seeded_qk(D: int, seed: int = SEED) -> tuple[Tensor, Tensor]:
    """A query and a key (D,) each, float64, drawn in that order from randn with `seed`."""
    check_width(D)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(D, generator=g, dtype=torch.float64)  # (D,)
    k = torch.randn(D, generator=g, dtype=torch.float64)  # (D,)
    return q, k


def _rotate(x: Tensor, positions: Sequence[int], base: float) -> Tensor:
    """x (D,) rotated at each position: (P, D), float64, through the model's `apply_rope`."""
    pos = torch.tensor(list(positions), dtype=torch.long)  # (P,)
    rows = x.to(torch.float64).unsqueeze(0).expand(len(pos), -1)  # (P, D)
    return apply_rope(rows, pos, base)  # (P, D)


# ---- one pair, drawn --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairRotation:
    """Pair i of q at position m and of k at position n, before and after RoPE."""

    pair: int
    dims: tuple[int, int]  # (2i, 2i+1): the features this pair holds
    m: int  # query position
    n: int  # key position
    theta: float  # base^(-2i/D), radians per position
    angle_q: float  # m·θ: how far q's pair turns
    angle_k: float  # n·θ
    q_before: tuple[float, float]
    q_after: tuple[float, float]
    k_before: tuple[float, float]
    k_after: tuple[float, float]
    pair_score_before: float  # q_pair · k_pair
    pair_score_after: float  # (R_m q)_pair · (R_n k)_pair
    score_before: float  # q · k over all D features, no rotation
    score_after: float  # (R_m q) · (R_n k) over all D features: what RoPE attention uses (unscaled)

    @property
    def offset(self) -> int:
        return self.m - self.n

    @property
    def lengths(self) -> dict[str, float]:
        """Length of each drawn vector: a rotation keeps it."""
        return {
            name: math.hypot(*xy)
            for name, xy in zip(VECTORS, (self.q_before, self.q_after, self.k_before, self.k_after))
        }

    @property
    def angles(self) -> dict[str, float]:
        """Direction of each drawn vector, atan2(y, x) in radians, in (-π, π]."""
        return {
            name: math.atan2(xy[1], xy[0])
            for name, xy in zip(VECTORS, (self.q_before, self.q_after, self.k_before, self.k_after))
        }


def rotate_pair(q: Tensor, k: Tensor, m: int, n: int, pair: int, base: float = 10000.0) -> PairRotation:
    """Rotate q (D,) at position m and k (D,) at n with `apply_rope`, and read off pair `pair`."""
    _check_vector("q", q)
    _check_vector("k", k)
    if q.shape != k.shape:
        raise ValueError(f"q and k must have the same width, got {tuple(q.shape)} and {tuple(k.shape)}")
    check_position("m", m)
    check_position("n", n)
    check_base(base)
    D = q.shape[0]
    if not is_int(pair) or not 0 <= pair < D // 2:
        raise ValueError(f"pair must be an integer in 0..{D // 2 - 1} (D = {D} has {D // 2} pairs), got {pair!r}")
    q64, k64 = q.to(torch.float64), k.to(torch.float64)  # (D,) each
    q_rot = _rotate(q64, [m], base)[0]  # (D,)
    k_rot = _rotate(k64, [n], base)[0]  # (D,)
    a, b = 2 * pair, 2 * pair + 1
    theta = rope_frequencies(D, base)[pair].item()
    return PairRotation(
        pair=pair,
        dims=(a, b),
        m=m,
        n=n,
        theta=theta,
        angle_q=m * theta,
        angle_k=n * theta,
        q_before=(q64[a].item(), q64[b].item()),
        q_after=(q_rot[a].item(), q_rot[b].item()),
        k_before=(k64[a].item(), k64[b].item()),
        k_after=(k_rot[a].item(), k_rot[b].item()),
        pair_score_before=(q64[a : b + 1] @ k64[a : b + 1]).item(),
        pair_score_after=(q_rot[a : b + 1] @ k_rot[a : b + 1]).item(),
        score_before=(q64 @ k64).item(),
        score_after=(q_rot @ k_rot).item(),
    )


def arc_points(start: float, sweep: float, radius: float, steps: int = 48) -> tuple[tuple[float, float], ...]:
    """Points of a circular arc from angle `start` over `sweep` radians (counter-clockwise when > 0), for
    drawing a rotation angle. A sweep of several turns is drawn as its remainder mod 2π (same end point)."""
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (start, sweep, radius)) or radius <= 0:
        raise ValueError(f"arc needs finite start, sweep and a radius > 0, got {start!r}, {sweep!r}, {radius!r}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    shown = math.fmod(sweep, 2 * math.pi)
    return tuple(
        (radius * math.cos(start + shown * j / steps), radius * math.sin(start + shown * j / steps))
        for j in range(steps + 1)
    )


# ---- the score depends only on the offset -----------------------------------------------------------


@dataclass(frozen=True)
class OffsetScores:
    """scores[p][r] = (R_m q)·(R_n k) with m - n = offsets[r] and the earlier token at positions[p]."""

    offsets: tuple[int, ...]  # (R,) m - n
    positions: tuple[int, ...]  # (P,) absolute position of the earlier token: min(m, n)
    scores: tuple[tuple[float, ...], ...]  # (P, R) unscaled q·k after rotation
    spreads: tuple[float, ...]  # (R,) max - min over the P positions, for each offset
    norm_product: float  # |q| |k|, the largest |q·k| can be
    tolerance: float  # core.agreement allowance: float64, D + max position terms, scale |q||k|

    @property
    def max_spread(self) -> float:
        return max(self.spreads)

    @property
    def passed(self) -> bool:
        return self.max_spread <= self.tolerance


def offset_scores(
    q: Tensor, k: Tensor, offsets: Sequence[int], positions: Sequence[int], base: float = 10000.0
) -> OffsetScores:
    """q·k after rotating q at m and k at n, for every offset r = m - n and every absolute position a of the
    earlier token: r >= 0 puts the key at n = a and the query at m = a + r (the causal case, query after key),
    r < 0 puts the query at m = a and the key at n = a - r."""
    _check_vector("q", q)
    _check_vector("k", k)
    if q.shape != k.shape:
        raise ValueError(f"q and k must have the same width, got {tuple(q.shape)} and {tuple(k.shape)}")
    check_base(base)
    offsets, positions = list(offsets), list(positions)
    if not offsets or any(not is_int(r) for r in offsets):
        raise ValueError(f"offsets must be a non-empty sequence of integers m - n, got {offsets[:5]!r}")
    if not positions:
        raise ValueError("positions must hold at least one absolute position")
    for a in positions:
        check_position("every absolute position", a)
    m = [a + max(r, 0) for a in positions for r in offsets]  # (P*R,) query positions
    n = [a + max(-r, 0) for a in positions for r in offsets]  # (P*R,) key positions
    q_rot = _rotate(q, m, base)  # (P*R, D)
    k_rot = _rotate(k, n, base)  # (P*R, D)
    scores = (q_rot * k_rot).sum(-1).view(len(positions), len(offsets))  # (P, R)
    spreads = scores.amax(0) - scores.amin(0)  # (R,)
    norm_product = (q.to(torch.float64).norm() * k.to(torch.float64).norm()).item()
    return OffsetScores(
        offsets=tuple(offsets),
        positions=tuple(positions),
        scores=tuple(tuple(row) for row in scores.tolist()),
        spreads=tuple(spreads.tolist()),
        norm_product=norm_product,
        tolerance=allowance(torch.float64, q.shape[-1] + max(m + n), norm_product),
    )


# ---- how fast each pair turns ----------------------------------------------------------------------


@dataclass(frozen=True)
class PairFrequencies:
    D: int
    base: float
    dims: tuple[tuple[int, int], ...]  # (D/2,) the features (2i, 2i+1) of pair i
    thetas: tuple[float, ...]  # (D/2,) base^(-2i/D), radians per position
    wavelengths: tuple[float, ...]  # (D/2,) 2π / θ_i: positions per full turn

    @property
    def pairs(self) -> tuple[int, ...]:
        return tuple(range(self.D // 2))


def pair_frequencies(D: int, base: float = 10000.0) -> PairFrequencies:
    """θ_i = base^(-2i/D) from the model's `rope_frequencies`, and each pair's wavelength 2π/θ_i in tokens."""
    thetas = rope_frequencies(D, base)  # (D/2,)
    return PairFrequencies(
        D=D,
        base=float(base),
        dims=tuple((2 * i, 2 * i + 1) for i in range(D // 2)),
        thetas=tuple(thetas.tolist()),
        wavelengths=tuple((2 * math.pi / thetas).tolist()),
    )


# ---- adjacent pairs against split half -------------------------------------------------------------


@dataclass(frozen=True)
class LayoutEquivalence:
    """RoPE on adjacent pairs (2i, 2i+1) and on split-half pairs (i, i + D/2): one rotation, two orders."""

    D: int
    permutation: tuple[int, ...]  # (D,) split-half slot j holds adjacent feature permutation[j]
    destination: tuple[int, ...]  # (D,) adjacent feature d moves to split-half slot destination[d]
    adjacent: Tensor  # (T, D) apply_rope(x), adjacent layout
    split_half: Tensor  # (T, D) apply_rope_split_half(to_split_half(x)), split-half layout
    max_abs_diff: float  # max |from_split_half(split_half) - adjacent|
    unpermuted_max_abs_diff: float  # max |apply_rope_split_half(x) - apply_rope(x)|: no permutation, not equal
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.max_abs_diff <= self.tolerance


def layout_equivalence(x: Tensor, positions: Tensor, base: float = 10000.0) -> LayoutEquivalence:
    """Rotate x (T, D) in both layouts and compare them after moving the split-half result back."""
    if not isinstance(x, Tensor) or x.dim() != 2 or not x.is_floating_point():
        got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"x must be a floating-point matrix (T, D), got {got}")
    x = x.to(torch.float64)  # (T, D)
    D = x.shape[-1]
    perm = split_half_permutation(D)  # (D,)
    adjacent = apply_rope(x, positions, base)  # (T, D)
    split = apply_rope_split_half(to_split_half(x), positions, base)  # (T, D) split-half layout
    back = from_split_half(split)  # (T, D) adjacent layout again
    unpermuted = apply_rope_split_half(x, positions, base)  # (T, D) the wrong pairing for this layout
    return LayoutEquivalence(
        D=D,
        permutation=tuple(perm.tolist()),
        destination=tuple(torch.argsort(perm).tolist()),
        adjacent=adjacent,
        split_half=split,
        max_abs_diff=(back - adjacent).abs().max().item(),
        unpermuted_max_abs_diff=(unpermuted - adjacent).abs().max().item(),
        tolerance=allowance(torch.float64, 2, x.abs().max().item()),
    )


# ---- one head of the model with and without the rotation ------------------------------------------


@dataclass(frozen=True)
class RopeOnOff:
    """One head's scores q kᵀ/√D for a text, with RoPE (what the model computes) and without it."""

    layer: int
    head: int
    scores_on: Tensor  # (T, T) float32, rotated q and k: the model's own scores
    scores_off: Tensor  # (T, T) float32, the same q and k unrotated
    weights_on: Tensor  # (T, T) softmax of scores_on over the allowed keys
    weights_off: Tensor  # (T, T)
    mask: Tensor  # (T, T) bool, True = may attend
    max_abs_change: float  # largest |on - off| over the allowed cells
    mean_abs_change: float  # mean |on - off| over the allowed cells
    top_key_changed: int  # query rows whose highest-scored allowed key differs between on and off

    @property
    def T(self) -> int:
        return self.scores_on.shape[0]


def rope_on_off_scores(model: GPT, ids: Sequence[int] | Tensor, layer: int, head: int) -> RopeOnOff:
    """The head's q, k before and after RoPE from `projections` (the model's own modules), and
    the scores and weights from each. Turning RoPE off here only skips the rotation for this head: the
    model was trained with it, so the 'off' map is what its learned q, k say without positions."""
    proj = projections(model, ids, layer, head)
    scores_on = proj.scores  # (T, T) q kᵀ · scale, rotated
    scores_off = (proj.q_raw @ proj.k_raw.transpose(0, 1)) * proj.scale  # (T, T) unrotated
    mask = proj.mask  # (T, T)
    change = (scores_on - scores_off).abs()[mask]  # (number of allowed cells,)
    neg = torch.finfo(scores_on.dtype).min
    top_on = scores_on.masked_fill(~mask, neg).argmax(-1)  # (T,)
    top_off = scores_off.masked_fill(~mask, neg).argmax(-1)  # (T,)
    return RopeOnOff(
        layer=layer,
        head=head,
        scores_on=scores_on,
        scores_off=scores_off,
        weights_on=softmax(scores_on, mask=mask),
        weights_off=softmax(scores_off, mask=mask),
        mask=mask,
        max_abs_change=change.max().item(),
        mean_abs_change=change.mean().item(),
        top_key_changed=int((top_on != top_off).sum()),
    )
