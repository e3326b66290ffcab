"""Two attention maps of the same layer and head side by side: two texts on one model, or one text on two models.

For the inspector's "compare side by side": position t of A faces position t of B, and when both have T positions
their difference B - A where both may attend. Plain Python floats computed in float64; nothing here draws. Shapes:
T positions, L layers, H heads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from core import i18n
from core.attention import causal_mask
from core.i18n import _
from core.model.gpt import ModelConfig
from core.numbers import integer

Matrix = Sequence[Sequence[float]]
BoolMatrix = Sequence[Sequence[bool]]


def lacks(config: ModelConfig, layer: int, head: int) -> str | None:
    """Why a model with `config` has no head `head` in layer `layer` ('it has 2 layers (0 to 1), so no layer 3'),
    or None when it has it."""
    L, H = config.n_layer, config.n_head
    missing = []
    if not 0 <= layer < L:
        missing.append(f"{L} layers (0 to {L - 1}), so no layer {layer}")
    if not 0 <= head < H:
        missing.append(f"{H} heads per layer (0 to {H - 1}), so no head {head}")
    return None if not missing else "it has " + " and ".join(missing)


def attention_mask(config: ModelConfig, T: int) -> list[list[bool]]:
    """(T, T) True = may attend, as the model's forward pass masks: causal, or every key for a causal=False model."""
    integer("T", T, 1)
    mask = causal_mask(T) if config.causal else torch.ones(T, T, dtype=torch.bool)  # (T, T)
    return mask.tolist()


def small_edit(text: str, vocabulary: Sequence[str]) -> str:
    """`text` with one character changed and its length kept: the last character that is in `vocabulary` and
    not whitespace becomes the next such character of `vocabulary` (cyclically). A text with no such character,
    or a vocabulary with fewer than two, comes back unchanged. Same length, so the two sides line up cell by cell."""
    usable = [c for c in vocabulary if not c.isspace()]
    if len(usable) < 2:
        return text
    for i in range(len(text) - 1, -1, -1):
        if text[i] in usable:
            j = usable.index(text[i])
            return text[:i] + usable[(j + 1) % len(usable)] + text[i + 1 :]
    return text


@dataclass(frozen=True)
class Alignment:
    """How the two sides' positions face each other: position t of A opposite position t of B."""

    T_a: int
    T_b: int
    labels: tuple[str, ...]  # (max(T_a, T_b),) 't piece' where both sides hold the same piece, else 't a→b'
    changed: tuple[int, ...]  # positions t < min(T_a, T_b) whose pieces differ
    same_length: bool  # T_a == T_b: the cells pair one to one and a difference can be drawn

    @property
    def T(self) -> int:
        """The longer side's T: both heatmaps span this many positions on each axis, so cells line up."""
        return max(self.T_a, self.T_b)

    @property
    def extent(self) -> tuple[float, float]:
        """The category-axis range covering positions 0 .. T-1 (cell centres sit on integers)."""
        return (-0.5, self.T - 0.5)


def align(pieces_a: Sequence[str], pieces_b: Sequence[str]) -> Alignment:
    """Pair the positions of two token sequences (their display pieces) by index."""
    if not pieces_a or not pieces_b:
        raise ValueError(f"both sides need at least one token, got T_A={len(pieces_a)}, T_B={len(pieces_b)}")
    n = min(len(pieces_a), len(pieces_b))
    labels = []
    for t in range(max(len(pieces_a), len(pieces_b))):
        a = pieces_a[t] if t < len(pieces_a) else "–"
        b = pieces_b[t] if t < len(pieces_b) else "–"
        labels.append(f"{t} {a}" if a == b else f"{t} {a}→{b}")
    changed = tuple(t for t in range(n) if pieces_a[t] != pieces_b[t])
    return Alignment(len(pieces_a), len(pieces_b), tuple(labels), changed, len(pieces_a) == len(pieces_b))


@dataclass(frozen=True)
class Change:
    """One cell of the difference: query t, key s, the weight on each side and B - A."""

    query: int
    key: int
    a: float
    b: float

    @property
    def delta(self) -> float:
        return self.b - self.a


@dataclass(frozen=True)
class Difference:
    """weights(B) - weights(A) of one head, cell by cell."""

    delta: tuple[tuple[float | None, ...], ...]  # (T, T) B - A; None where either side's mask forbids the cell
    cells: tuple[Change, ...]  # every cell both sides may attend, row-major
    largest: Change  # the cell with the largest |B - A| (the first in row-major order among equals)
    tied: tuple[Change, ...]  # other cells whose |B - A| lies within `margin` of the largest: not ordered apart

    @property
    def max_abs(self) -> float:
        return abs(self.largest.delta)


def _matrix(x, name: str, T: int | None = None) -> list[list]:
    rows = x.tolist() if isinstance(x, Tensor) else [list(r) for r in x]
    n = len(rows)
    if n == 0 or any(len(r) != n for r in rows) or (T is not None and n != T):
        want = "a square (T, T) matrix" if T is None else f"a ({T}, {T}) matrix"
        raise ValueError(f"{name} must be {want}, got {n} rows of lengths {sorted({len(r) for r in rows})}")
    return rows


def difference(
    weights_a: Matrix | Tensor,
    weights_b: Matrix | Tensor,
    mask_a: BoolMatrix | Tensor,
    mask_b: BoolMatrix | Tensor,
    *,
    margin: float = 0.0,
) -> Difference:
    """B - A for two (T, T) weight matrices of the same shape, in float64, and the cell that changed most.

    A cell counts only where both masks allow it (True = may attend); elsewhere `delta` holds None. `margin` (e.g.
    `weight_allowance`): cells whose |B - A| is within it of the largest are reported as `tied`,
    since float32 rounding need not order them the same way on every computer."""
    a = _matrix(weights_a, "weights_a")
    T = len(a)
    b = _matrix(weights_b, "weights_b", T)
    ma, mb = _matrix(mask_a, "mask_a", T), _matrix(mask_b, "mask_b", T)
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
    cells = []
    delta: list[tuple[float | None, ...]] = []
    for t in range(T):
        row: list[float | None] = []
        for s in range(T):
            if bool(ma[t][s]) and bool(mb[t][s]):
                change = Change(t, s, float(a[t][s]), float(b[t][s]))
                if not (math.isfinite(change.a) and math.isfinite(change.b)):
                    raise ValueError(f"weights must be finite where both masks allow, got A={change.a}, B={change.b}")
                cells.append(change)
                row.append(change.delta)
            else:
                row.append(None)
        delta.append(tuple(row))
    if not cells:
        raise ValueError("the two masks share no cell: there is nothing to compare")
    largest = max(cells, key=lambda c: abs(c.delta))  # max keeps the first of equals: row-major order
    top = abs(largest.delta)
    tied = tuple(c for c in cells if c is not largest and abs(c.delta) >= top - margin)
    return Difference(tuple(delta), tuple(cells), largest, tied)


def describe(diff: Difference, labels: Sequence[str], margin: float = 0.0) -> str:
    """One plain-text sentence naming the largest change (query, key, the two weights and B - A), or saying that
    no cell changes by more than `margin`. `labels` (T,): 't piece' per position (Alignment.labels). Plain text:
    a page escapes it before markdown."""
    if len(labels) != len(diff.delta):
        raise ValueError(f"labels must name the T = {len(diff.delta)} positions, got {len(labels)}")
    if diff.max_abs <= margin:
        return _(
            "no cell changes by more than float32 rounding ({margin}): side B weighs every key as side A does."
        ).format(margin=i18n.formatted(margin, ".1e"))
    top = diff.largest

    def position(t: int) -> str:
        return f"{t} ('{labels[t].split(' ', 1)[1]}')"

    tied = (
        " "
        + _("{count} more cells change by as much, within float32 rounding ({margin}).").format(
            count=len(diff.tied), margin=i18n.formatted(margin, ".1e")
        )
        if diff.tied
        else ""
    )
    return (
        _(
            "the largest change is query {query}, key {key}: weight {a} on side A, {b} on side B, a change of {delta}."
        ).format(
            query=position(top.query),
            key=position(top.key),
            a=i18n.number(top.a, 3),
            b=i18n.number(top.b, 3),
            delta=i18n.formatted(top.delta, "+.3f"),
        )
        + tied
    )


def table(diff: Difference, labels: Sequence[str]) -> dict[str, list]:
    """The difference's data table as columns: every cell both sides may attend, row-major."""
    return {
        _("query"): [labels[c.query] for c in diff.cells],
        _("key"): [labels[c.key] for c in diff.cells],
        _("weight A"): [round(c.a, 6) for c in diff.cells],
        _("weight B"): [round(c.b, 6) for c in diff.cells],
        "B − A": [round(c.delta, 6) for c in diff.cells],
    }
