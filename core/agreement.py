"""One rule for numerical agreement: when two computations of the same numbers agree.

Two correct computations differ only by summation order, about n * eps * sum(|term|) for a sum of n terms (Higham,
"Accuracy and Stability of Numerical Algorithms", 2nd ed., section 3.1); a real bug is off by whole units. So the
allowance is derived, never tuned to a CPU:

    allowed = SAFETY * eps(dtype) * terms * scale

Anything that decides compares in float64 (about 1e-15 relative on every CPU and kernel set, a bug ten orders above);
float32 figures are only shown beside the verdict, with their own allowance.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor

from core.numbers import is_int

M = TypeVar("M", bound=torch.nn.Module)

# allowed = SAFETY * eps(dtype) * terms * scale. terms: the longest chain of additions behind one compared number (for a
# model, model_terms(config)); scale: max |reference| (at least 1) unless the caller knows a sharper one (the absolute
# sum of a dot product's terms). Higham's gamma_n = n u / (1 - n u), u = eps / 2, bounds one such sum; SAFETY covers a
# forward pass chaining a few of them (norms, softmax, exp), each adding a small multiple of eps.
SAFETY = 16
DECIDING_DTYPE = torch.float64


def allowance(dtype: torch.dtype, terms: int, scale: float = 1.0) -> float:
    """SAFETY * eps(dtype) * terms * max(1, scale): the largest difference rounding alone explains."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating torch dtype, got {dtype!r}")
    if not is_int(terms) or terms < 1:
        raise ValueError(f"terms must be an integer >= 1 (the length of the longest sum), got {terms!r}")
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale >= 0):
        raise ValueError(f"scale must be a finite number >= 0, got {scale!r}")
    return SAFETY * torch.finfo(dtype).eps * terms * max(1.0, float(scale))


@dataclass(frozen=True)
class Agreement:
    """How far two computations of the same numbers are apart, and what rounding alone allows."""

    max_abs_diff: float  # max |a - b| over every entry (inf when either holds a non-finite entry)
    allowed: float  # allowance(dtype, terms, scale)
    dtype: str  # the dtype both were compared in ("float64" when it decides)
    terms: int
    scale: float

    @property
    def passed(self) -> bool:
        return math.isfinite(self.max_abs_diff) and self.max_abs_diff <= self.allowed

    @property
    def ratio(self) -> float:
        """The share of the allowance used: <= 1 when they agree."""
        return self.max_abs_diff / self.allowed

    @property
    def rule(self) -> str:
        """The allowance with its derivation, to print beside the figure."""
        eps = torch.finfo(getattr(torch, self.dtype)).eps
        return (
            f"<= {SAFETY} x eps({self.dtype}) {eps:.2e} x {self.terms} terms x scale {max(1.0, self.scale):.3g} "
            f"= {self.allowed:.2e}"
        )

    def describe(self) -> str:
        """One line: the figure, the allowance, the verdict."""
        return (
            f"max |difference| {self.max_abs_diff:.2e} in {self.dtype} {self.rule} "
            f"({'agree' if self.passed else 'DISAGREE'})"
        )


def agreement(
    a: Tensor | Sequence[float],
    b: Tensor | Sequence[float],
    *,
    terms: int,
    scale: float | None = None,
    dtype: torch.dtype | None = None,
) -> Agreement:
    """Compare a with the reference b entry by entry. Both are cast to `dtype` (default: float64 when
    either already is, else their common dtype), so pass float64 results for a deciding comparison.
    `scale` defaults to max |b|; a NaN or inf anywhere makes the difference inf (never agreeing)."""
    a_t, b_t = _as_tensor(a, "a"), _as_tensor(b, "b")
    if a_t.shape != b_t.shape:
        raise ValueError(f"cannot compare shapes {tuple(a_t.shape)} and {tuple(b_t.shape)}")
    if dtype is None:
        dtype = torch.promote_types(a_t.dtype, b_t.dtype)
    a_t, b_t = a_t.to(dtype), b_t.to(dtype)
    if a_t.numel() == 0:
        diff = 0.0
    elif not (torch.isfinite(a_t).all() and torch.isfinite(b_t).all()):
        diff = math.inf
    else:
        diff = float((a_t - b_t).abs().max())
    if scale is None:
        scale = float(b_t.abs().max()) if b_t.numel() and torch.isfinite(b_t).all() else 1.0
    return Agreement(diff, allowance(dtype, terms, scale), str(dtype).removeprefix("torch."), terms, float(scale))


def row_agreement(
    a: Tensor | Sequence[float],
    b: Tensor | Sequence[float],
    *,
    q_row: Sequence[float],
    k_rows: Sequence[Sequence[float]],
    v_rows: Sequence[Sequence[float]],
    scale: float,
    dtype: torch.dtype | None = None,
) -> Agreement:
    """Two computations of one attention row (weights or output), e.g. the hand-check against the attention kernel
    on the same q (D,), k and v rows (S, D). The chain is a D-term dot product, an S-term softmax normaliser
    and an S-term weighted sum (terms D + 2S); rounding is relative to the largest sum of |q_d k_d| (times
    the score scale, 1/sqrt(D)) and the largest |v| entry: Higham's bound for a dot product is
    gamma_n * sum |x_i y_i|, not |sum x_i y_i|."""
    if not k_rows:
        raise ValueError("row_agreement needs at least one key row")
    dots = max(math.fsum(abs(x * y) for x, y in zip(q_row, k)) for k in k_rows) * abs(scale)
    values = max((abs(x) for row in v_rows for x in row), default=0.0)
    return agreement(a, b, terms=len(q_row) + 2 * len(k_rows), scale=max(dots, values), dtype=dtype)


def model_terms(config) -> int:
    """The longest chain of additions behind one logit of a `ModelConfig` model: per layer the
    longest sum (the MLP's down projection, mlp_ratio * C terms, or attention over the context), plus the
    LM head's C. Residual connections add the layers' roundings up, hence the sum over layers."""
    per_layer = max(config.mlp_ratio * config.d_model, config.context_length, config.d_model)
    return config.n_layer * per_layer + config.d_model


def float64_copy(model: M) -> M:
    """A float64 copy of `model` in eval mode (the original is untouched): deciding comparisons run on it."""
    return copy.deepcopy(model).to(DECIDING_DTYPE).eval()


def _as_tensor(x, name: str) -> Tensor:
    if isinstance(x, Tensor):
        t = x.detach()
        if not t.dtype.is_floating_point:
            t = t.to(DECIDING_DTYPE)
        return t
    try:
        return torch.tensor(x, dtype=DECIDING_DTYPE)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a tensor or a (nested) list of numbers: {e}") from None
