"""The scaling lessons: temperature, the 1/sqrt(D) scale and score variance, saturation, the worked example and
score geometry (how shapes flow through Q Kᵀ).

Each function is pure (inputs and a seed in, a frozen result out), so a page only renders it and a test can check it
against a closed form or a hand computation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from core.attention import AttentionResult, causal_mask, scaled_dot_product_attention, softmax
from core.i18n import _

# The temperature lab's fixed scores for four tokens (LESSON.md).
TEMPERATURE_SCORES: tuple[float, ...] = (1.2, 0.3, -0.4, 1.8)
# A row counts as "nearly one-hot" when its largest weight reaches this.
ONE_HOT_THRESHOLD = 0.99


def random_qkv(B: int, H: int, T: int, D: int, *, seed: int, Dv: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Unit-variance q, k (B, H, T, D) and v (B, H, T, Dv) drawn from one seeded generator."""
    if min(B, H, T, D) < 1:
        raise ValueError(f"B, H, T, D must all be >= 1, got {(B, H, T, D)}")
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, D, generator=g)  # (B, H, T, D)
    k = torch.randn(B, H, T, D, generator=g)  # (B, H, T, D)
    v = torch.randn(B, H, T, Dv or D, generator=g)  # (B, H, T, Dv)
    return q, k, v


@dataclass(frozen=True)
class WorkedExample:
    q: Tensor  # (1, 4, 3)
    k: Tensor  # (1, 4, 3)
    v: Tensor  # (1, 4, 2)
    mask: Tensor  # (4, 4) True = may attend
    result: AttentionResult


def worked_example(seed: int = 2) -> WorkedExample:
    """LESSON.md's attention_by_hand: draw q, k, v in that order after torch.manual_seed(seed).

    Uses its own generator seeded the same way, so the draws equal the script's without touching
    the global RNG of the app.
    """
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 4, 3, generator=g)  # (B, T, D)
    k = torch.randn(1, 4, 3, generator=g)  # (B, S, D)
    v = torch.randn(1, 4, 2, generator=g)  # (B, S, Dv)
    mask = causal_mask(4)  # (T, S)
    return WorkedExample(q, k, v, mask, scaled_dot_product_attention(q, k, v, mask))


@dataclass(frozen=True)
class VarianceRow:
    width: int  # head width D
    var_unscaled: float  # measured variance of q . k
    var_scaled: float  # measured variance of q . k / sqrt(D)
    samples: int = 0  # number of (q, k) pairs behind each measurement

    @property
    def expected_unscaled(self) -> float:
        """Closed form: the sum of D independent products q_d k_d, each of variance 1, has variance D."""
        return float(self.width)

    @property
    def expected_scaled(self) -> float:
        """Closed form: dividing by sqrt(D) divides the variance by D, leaving 1."""
        return 1.0

    @property
    def std_error_scaled(self) -> float:
        """Standard error of the measured scaled variance: sqrt((2 + 6/D) / samples).

        q . k has fourth moment 3D² + 6D (each product q_d k_d has E[(qk)^4] = 9), so the sample
        variance of N draws has variance (3D² + 6D - D²) / N; divide by D² for the scaled one.
        """
        return math.sqrt((2.0 + 6.0 / self.width) / self.samples) if self.samples else float("inf")

    @property
    def std_error_unscaled(self) -> float:
        """Standard error of the measured unscaled variance: D times the scaled one."""
        return self.width * self.std_error_scaled


def score_variance(widths: list[int], *, samples: int = 4096, seed: int = 0) -> list[VarianceRow]:
    """Measure Var(q . k) for unit-variance entries: it grows like D; divided by sqrt(D) it stays near 1."""
    if not widths or min(widths) < 1 or samples < 2:
        raise ValueError(f"score_variance needs widths >= 1 and samples >= 2, got widths={widths}, samples={samples}")
    g = torch.Generator().manual_seed(seed)
    rows = []
    for D in widths:
        q = torch.randn(samples, D, generator=g, dtype=torch.float64)  # (N, D)
        k = torch.randn(samples, D, generator=g, dtype=torch.float64)  # (N, D)
        dots = (q * k).sum(-1)  # (N,)
        rows.append(VarianceRow(D, dots.var().item(), (dots / math.sqrt(D)).var().item(), samples))
    return rows


@dataclass(frozen=True)
class SaturationStats:
    max_weight: Tensor  # (..., T) largest weight of each row
    entropy_bits: Tensor  # (..., T) entropy of each row in bits
    jacobian_norm: Tensor  # (..., T) Frobenius norm of d weights / d scores for each row
    share_one_hot: float  # share of rows whose largest weight >= ONE_HOT_THRESHOLD
    mean_max_weight: float  # mean over rows of the largest weight
    mean_entropy_bits: float
    mean_jacobian_norm: float


def row_entropy_bits(weights: Tensor) -> Tensor:
    """Entropy per row in bits, with 0 log 0 = 0: (..., S) -> (...)."""
    logs = torch.where(weights > 0, torch.log2(weights.clamp_min(1e-300)), torch.zeros_like(weights))
    return -(weights * logs).sum(-1)  # (...)


def softmax_jacobian_norm(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Frobenius norm of the Jacobian of each softmax row with respect to its scores, by autograd.

    scores (..., T, S) -> (..., T). Small norms mean the gradient through softmax has vanished.
    """
    S = scores.shape[-1]
    rows = scores.detach().reshape(-1, S)  # (N, S)
    allowed = torch.ones_like(rows, dtype=torch.bool) if mask is None else mask.expand_as(scores).reshape(-1, S)
    x = rows.clone().requires_grad_(True)  # (N, S)
    with torch.enable_grad():
        y = softmax(x, mask=allowed)  # (N, S)
        # Rows are independent, so the gradient of output column j summed over rows is each row's ∂y_j/∂x: one
        # backward pass per column (S of them) gives every row's Jacobian, with plain autograd.
        cols = [torch.autograd.grad(y[:, j].sum(), x, retain_graph=j < S - 1)[0] for j in range(S)]  # S × (N, S)
    jac = torch.stack(cols, dim=1)  # (N, S, S): jac[n, j, i] = ∂y[n, j] / ∂x[n, i]
    return jac.flatten(1).norm(dim=-1).reshape(scores.shape[:-1])  # (..., T)


def saturation(result: AttentionResult, mask: Tensor | None = None) -> SaturationStats:
    """How close to one-hot the rows of an attention result are, and how much gradient softmax passes."""
    weights = result.weights.detach()
    max_weight = weights.amax(-1)  # (..., T)
    entropy = row_entropy_bits(weights)  # (..., T)
    jac = softmax_jacobian_norm(result.scores, mask)  # (..., T)
    return SaturationStats(
        max_weight=max_weight,
        entropy_bits=entropy,
        jacobian_norm=jac,
        share_one_hot=(max_weight >= ONE_HOT_THRESHOLD).float().mean().item(),
        mean_max_weight=max_weight.mean().item(),
        mean_entropy_bits=entropy.mean().item(),
        mean_jacobian_norm=jac.mean().item(),
    )


@dataclass(frozen=True)
class ScalingExperiment:
    factor: float
    baseline: SaturationStats  # q, k as drawn, divided by sqrt(D)
    unscaled: SaturationStats  # q, k multiplied by `factor`, no division
    baseline_result: AttentionResult
    unscaled_result: AttentionResult


def scaling_experiment(
    q: Tensor, k: Tensor, v: Tensor, *, factor: float = 10.0, causal: bool = True
) -> ScalingExperiment:
    """The lesson's prediction exercise: drop the 1/sqrt(D) and multiply Q and K by `factor`."""
    mask = causal_mask(q.shape[-2], k.shape[-2]) if causal else None
    base = scaled_dot_product_attention(q, k, v, mask)
    big = scaled_dot_product_attention(q * factor, k * factor, v, mask, scale=1.0)
    return ScalingExperiment(factor, saturation(base, mask), saturation(big, mask), base, big)


@dataclass(frozen=True)
class TemperatureResult:
    scores: tuple[float, ...]
    temperature: float
    probs: tuple[float, ...]
    entropy_bits: float
    uniform_entropy_bits: float  # log2(number of tokens): the most uncertain a distribution can be


def temperature_distribution(scores: tuple[float, ...] | list[float], temperature: float) -> TemperatureResult:
    """softmax(scores / temperature) computed in float64, with its entropy."""
    x = torch.tensor(list(scores), dtype=torch.float64)  # (S,)
    if x.dim() != 1 or x.numel() < 1 or not torch.isfinite(x).all():
        raise ValueError(f"scores must be a non-empty list of finite numbers, got {list(scores)}")
    probs = softmax(x, temperature=temperature)  # (S,)
    return TemperatureResult(
        tuple(x.tolist()),
        float(temperature),
        tuple(probs.tolist()),
        row_entropy_bits(probs).item(),
        math.log2(x.numel()),
    )


MAX_SCORES = 12


def parse_scores(text: str) -> tuple[float, ...]:
    """Read learner-typed scores such as '1.2, 0.3, -0.4, 1.8'. Numbers only: nothing is evaluated."""
    parts = [p for p in text.replace(";", ",").replace(" ", ",").split(",") if p.strip()]
    if not parts:
        raise ValueError(_("type at least one score, separated by commas, e.g. 1.2, 0.3, -0.4, 1.8"))
    if len(parts) > MAX_SCORES:
        raise ValueError(
            _("at most {limit} scores fit the chart; you typed {n}").format(limit=MAX_SCORES, n=len(parts))
        )
    scores = []
    for p in parts:
        try:
            x = float(p)
        except ValueError:
            raise ValueError(
                _("'{text}' is not a number; use digits, a minus sign and a decimal point").format(text=p.strip())
            ) from None
        if not math.isfinite(x) or abs(x) > 1e4:
            raise ValueError(_("'{text}' is out of range; use numbers between -10000 and 10000").format(text=p.strip()))
        scores.append(x)
    return tuple(scores)


# ---------------------------------------------------------------------------------------------------
# Score geometry: how shapes flow through Q Kᵀ, and why the scores are divided by √D.

# Head widths of the variance experiment: 1, 2, 4, ..., 256.
VARIANCE_WIDTHS: tuple[int, ...] = tuple(2**i for i in range(9))


@dataclass(frozen=True)
class ShapeStep:
    name: str  # what the tensor is: "Q", "Kᵀ", "scores", ...
    code: str  # the line that makes it
    legend: str  # its shape in the legend, e.g. "(B, H, T, D)"
    shape: tuple[int, ...]  # its actual shape


@dataclass(frozen=True)
class ScoreGeometry:
    q: Tensor  # (B, H, T, D)
    k: Tensor  # (B, H, S, D), S = T in self-attention
    v: Tensor  # (B, H, S, D)
    scale: float  # 1/sqrt(D), or 1.0 without the division
    result: AttentionResult  # no mask: scores (B, H, T, S)
    steps: tuple[ShapeStep, ...]
    score_variance: float  # measured variance over every entry of result.scores
    expected_variance: float  # closed form for unit-variance q, k: scale² · D (D unscaled, 1 scaled)
    max_abs_score: Tensor  # (B, H) largest |score| of each score matrix
    max_weight: Tensor  # (B, H, T) largest weight of each row: near 1 means nearly one-hot


def score_geometry(B: int, H: int, T: int, D: int, *, seed: int, scaled: bool = True) -> ScoreGeometry:
    """Seeded q, k, v, their (unmasked) attention, and the shape of every tensor on the way."""
    q, k, v = random_qkv(B, H, T, D, seed=seed)  # (B, H, T, D) each
    scale = 1.0 / math.sqrt(D) if scaled else 1.0
    result = scaled_dot_product_attention(q, k, v, scale=scale)
    k_t = k.transpose(-2, -1)  # (B, H, D, S)
    steps = (
        ShapeStep("Q", "q", "(B, H, T, D)", tuple(q.shape)),
        ShapeStep("K", "k", "(B, H, S, D)", tuple(k.shape)),
        ShapeStep("Kᵀ", "k.transpose(-2, -1)", "(B, H, D, S)", tuple(k_t.shape)),
        ShapeStep("scores", "q @ k.transpose(-2, -1) * scale", "(B, H, T, S)", tuple(result.scores.shape)),
        ShapeStep("weights", "softmax(scores, dim=-1)", "(B, H, T, S)", tuple(result.weights.shape)),
        ShapeStep("V", "v", "(B, H, S, D)", tuple(v.shape)),
        ShapeStep("out", "weights @ v", "(B, H, T, D)", tuple(result.out.shape)),
    )
    variance = result.scores.double().var(unbiased=False).item() if result.scores.numel() > 1 else 0.0
    max_abs = result.scores.abs().amax(dim=(-2, -1))  # (B, H)
    return ScoreGeometry(q, k, v, scale, result, steps, variance, scale**2 * D, max_abs, result.weights.amax(-1))
