"""The lab's experiments: every number the attention pages show beyond a single attention call.

Each function is pure (inputs and a seed in, a frozen result out) so that a page only renders it and a
test can check it against a closed form or a hand computation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from core import handcheck
from core.attention import AttentionResult, causal_mask, padding_mask, scaled_dot_product_attention, softmax

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
    width: int             # head width D
    var_unscaled: float    # measured variance of q . k
    var_scaled: float      # measured variance of q . k / sqrt(D)
    samples: int = 0       # number of (q, k) pairs behind each measurement

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
class MaskComparison:
    before: Tensor        # (..., T, S) mask applied to the logits: the formula
    after: Tensor         # (..., T, S) softmax over everything, forbidden weights zeroed afterwards
    missing_mass: Tensor  # (..., T) 1 - row sum of `after`: probability the forbidden keys took
    renormalised: Tensor  # (..., T, S) `after` divided by its row sum (NaN-free: 0 where the sum is 0)

    @property
    def before_sum(self) -> Tensor:
        """(..., T) row sums of `before`: 1 for a row with an allowed key, 0 for a row without."""
        return self.before.sum(-1)

    @property
    def after_sum(self) -> Tensor:
        """(..., T) row sums of `after`: what the allowed keys kept of the unmasked softmax."""
        return self.after.sum(-1)


def zero_after_softmax(scores: Tensor, mask: Tensor) -> MaskComparison:
    """Compare masking before softmax with the common mistake of zeroing weights after it."""
    before = softmax(scores, mask=mask)  # (..., T, S)
    after = softmax(scores) * mask  # (..., T, S)
    row_sum = after.sum(-1)  # (..., T)
    safe = torch.where(row_sum > 0, row_sum, torch.ones_like(row_sum)).unsqueeze(-1)  # (..., T, 1)
    return MaskComparison(before, after, 1.0 - row_sum, after / safe)


@dataclass(frozen=True)
class SaturationStats:
    max_weight: Tensor          # (..., T) largest weight of each row
    entropy_bits: Tensor        # (..., T) entropy of each row in bits
    jacobian_norm: Tensor       # (..., T) Frobenius norm of d weights / d scores for each row
    share_one_hot: float        # share of rows whose largest weight >= ONE_HOT_THRESHOLD
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
    jac = torch.func.vmap(torch.func.jacrev(lambda x, m: softmax(x, mask=m)))(rows, allowed)  # (N, S, S)
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
        mean_entropy_bits=entropy.mean().item(),
        mean_jacobian_norm=jac.mean().item(),
    )


@dataclass(frozen=True)
class ScalingExperiment:
    factor: float
    baseline: SaturationStats     # q, k as drawn, divided by sqrt(D)
    unscaled: SaturationStats     # q, k multiplied by `factor`, no division
    baseline_result: AttentionResult
    unscaled_result: AttentionResult


def scaling_experiment(q: Tensor, k: Tensor, v: Tensor, *, factor: float = 10.0, causal: bool = True) -> ScalingExperiment:
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
        tuple(x.tolist()), float(temperature), tuple(probs.tolist()), row_entropy_bits(probs).item(), math.log2(x.numel())
    )


MAX_SCORES = 12


def parse_scores(text: str) -> tuple[float, ...]:
    """Read learner-typed scores such as '1.2, 0.3, -0.4, 1.8'. Numbers only: nothing is evaluated."""
    parts = [p for p in text.replace(";", ",").replace(" ", ",").split(",") if p.strip()]
    if not parts:
        raise ValueError("type at least one score, separated by commas, e.g. 1.2, 0.3, -0.4, 1.8")
    if len(parts) > MAX_SCORES:
        raise ValueError(f"at most {MAX_SCORES} scores fit the chart; you typed {len(parts)}")
    scores = []
    for p in parts:
        try:
            x = float(p)
        except ValueError:
            raise ValueError(f"'{p.strip()}' is not a number; use digits, a minus sign and a decimal point") from None
        if not math.isfinite(x) or abs(x) > 1e4:
            raise ValueError(f"'{p.strip()}' is out of range; use numbers between -10000 and 10000")
        scores.append(x)
    return tuple(scores)


# ---------------------------------------------------------------------------------------------------
# Score geometry: how shapes flow through Q Kᵀ, and why the scores are divided by √D.

# Head widths of the variance experiment: 1, 2, 4, ..., 256.
VARIANCE_WIDTHS: tuple[int, ...] = tuple(2**i for i in range(9))


@dataclass(frozen=True)
class ShapeStep:
    name: str                # what the tensor is: "Q", "Kᵀ", "scores", ...
    code: str                # the line that makes it
    legend: str              # its shape in the legend, e.g. "(B, H, T, D)"
    shape: tuple[int, ...]   # its actual shape


@dataclass(frozen=True)
class ScoreGeometry:
    q: Tensor                # (B, H, T, D)
    k: Tensor                # (B, H, S, D), S = T in self-attention
    v: Tensor                # (B, H, S, D)
    scale: float             # 1/sqrt(D), or 1.0 without the division
    result: AttentionResult  # no mask: scores (B, H, T, S)
    steps: tuple[ShapeStep, ...]
    score_variance: float    # measured variance over every entry of result.scores
    expected_variance: float  # closed form for unit-variance q, k: scale² · D (D unscaled, 1 scaled)
    max_abs_score: Tensor    # (B, H) largest |score| of each score matrix
    max_weight: Tensor       # (B, H, T) largest weight of each row: near 1 means nearly one-hot


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


# ---------------------------------------------------------------------------------------------------
# Masks: causal and padding masks for a ragged batch, and what goes wrong when masking comes too late.

MAX_WORDS = 8


def word_tokens(text: str, max_tokens: int = MAX_WORDS) -> tuple[str, ...]:
    """Split a short sentence into word tokens on whitespace ('the cat sat down' -> 4 tokens)."""
    words = tuple(text.split())
    if not words:
        raise ValueError("type a few words separated by spaces, e.g. 'the cat sat down'")
    if len(words) > max_tokens:
        raise ValueError(f"at most {max_tokens} words fit the mask picture; you typed {len(words)}")
    return words


@dataclass(frozen=True)
class RaggedMasks:
    lengths: tuple[int, ...]  # real tokens per sequence; the batch is padded to T = max(lengths)
    side: str                 # "right": tokens first, padding after; "left": padding first
    real: Tensor              # (B, S) True where the position holds a token (the layout, mask on or off)
    causal: Tensor            # (T, S) the causal mask as applied: all True when it is off
    padding: Tensor           # (B, 1, S) the padding mask as applied: all True when it is off
    combined: Tensor          # (B, T, S) causal & padding: True = may attend
    allowed_keys: Tensor      # (B, T) number of allowed keys in each row of `combined`
    no_allowed_key: Tensor    # (B, T) rows of `combined` with no allowed key at all


def ragged_masks(lengths, *, side: str = "right", causal: bool = True, padding: bool = True) -> RaggedMasks:
    """Masks for a batch of sequences of different lengths, padded to the longest one (S = T)."""
    lengths = tuple(int(n) for n in lengths)
    if not lengths or min(lengths) < 0 or max(lengths) < 1:
        raise ValueError(f"lengths must be >= 0 with at least one sequence of length >= 1, got {list(lengths)}")
    T = max(lengths)
    real = padding_mask(lengths, T, side=side)  # (B, 1, S)
    causal_m = causal_mask(T) if causal else torch.ones(T, T, dtype=torch.bool)  # (T, S)
    padding_m = real if padding else torch.ones_like(real)  # (B, 1, S)
    combined = causal_m.unsqueeze(0) & padding_m  # (B, T, S)
    return RaggedMasks(lengths, side, real.squeeze(1), causal_m, padding_m, combined, combined.sum(-1), ~combined.any(-1))


@dataclass(frozen=True)
class EmptyRows:
    rows: Tensor              # (..., T) True where the row has no allowed key
    weights: Tensor           # (..., T, S) the lab's weights: all zero on those rows
    out: Tensor               # (..., T, Dv) the lab's output: zero on those rows
    grad_q: Tensor            # (..., T, D) gradient of out.sum() with respect to q
    grads_finite: bool        # every gradient entry (q, k and v) is finite
    naive_weights: Tensor     # (..., T, S) torch.softmax after masked_fill(-inf): NaN on those rows
    naive_nan_rows: Tensor    # (..., T) rows of naive_weights holding NaN
    naive_nan_grads: int      # NaN entries in the naive gradients of q, k and v
    grad_entries: int         # entries in the gradients of q, k and v together


def fully_masked_rows(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> EmptyRows:
    """What the lab returns for query rows with no allowed key, against the naive masked softmax.

    q (..., T, D), k (..., S, D), v (..., S, Dv), mask bool (..., T, S). The loss for the gradients is
    the sum of every output entry.
    """
    def run(attend):
        leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
        weights, out = attend(*leaves)
        out.sum().backward()
        return weights.detach(), out.detach(), [x.grad for x in leaves]

    def lab(q_, k_, v_):
        r = scaled_dot_product_attention(q_, k_, v_, mask)
        return r.weights, r.out

    def naive(q_, k_, v_):
        scores = (q_ @ k_.transpose(-2, -1)) / math.sqrt(q_.shape[-1])  # (..., T, S)
        weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # (..., T, S)
        return weights, weights @ v_  # (..., T, Dv)

    weights, out, grads = run(lab)
    naive_weights, _, naive_grads = run(naive)
    return EmptyRows(
        rows=~mask.expand(weights.shape).any(-1),
        weights=weights,
        out=out,
        grad_q=grads[0],
        grads_finite=all(bool(torch.isfinite(g).all()) for g in grads),
        naive_weights=naive_weights,
        naive_nan_rows=naive_weights.isnan().any(-1),
        naive_nan_grads=sum(int(g.isnan().sum()) for g in naive_grads),
        grad_entries=sum(g.numel() for g in grads),
    )


@dataclass(frozen=True)
class MaskExperiment:
    masks: RaggedMasks
    q: Tensor                  # (B, T, D)
    k: Tensor                  # (B, S, D)
    v: Tensor                  # (B, S, D)
    result: AttentionResult    # attention with masks.combined
    comparison: MaskComparison  # mask before softmax against zeroing after it
    empty: EmptyRows           # rows with no allowed key


def mask_experiment(masks: RaggedMasks, *, seed: int, D: int = 4) -> MaskExperiment:
    """Seeded q, k, v for the ragged batch, attended with its combined mask, plus both comparisons."""
    B, T = len(masks.lengths), masks.combined.shape[-1]
    q, k, v = (x[:, 0] for x in random_qkv(B, 1, T, D, seed=seed))  # (B, T, D) each
    result = scaled_dot_product_attention(q, k, v, masks.combined)
    return MaskExperiment(masks, q, k, v, result, zero_after_softmax(result.scores, masks.combined),
                          fully_masked_rows(q, k, v, masks.combined))


@dataclass(frozen=True)
class RenormalisedRow:
    forbidden_logit: float
    key: int                # the forbidden key given that logit
    logits: Tensor          # (S,) the row's scores with the forbidden logit in place
    allowed: Tensor         # (S,) True = may attend
    unmasked: Tensor        # (S,) softmax over every key, forbidden ones included
    kept_mass: float        # sum of the allowed entries of `unmasked`
    renormalised: Tensor    # (S,) allowed entries of `unmasked` / kept_mass; all 0 when kept_mass is 0
    undefined: bool         # kept_mass == 0: the plain division is 0/0 (NaN); the lab returns zeros
    masked: Tensor          # (S,) the formula: softmax with the mask applied to the logits
    max_error: float        # max |renormalised - masked|


# Forbidden logits for the renormalisation sweep: float32 underflow sets in between 88 and 104.
RENORMALISE_SWEEP: tuple[float, ...] = tuple(float(x) for x in range(0, 121, 4))


def renormalise_after_softmax(scores: Tensor, allowed: Tensor, *, forbidden_logit: float, key: int | None = None) -> RenormalisedRow:
    """Zero the forbidden weights after softmax and divide by what is left, with one forbidden logit set high.

    scores (S,), allowed bool (S,); `key` (default: the last forbidden key) gets `forbidden_logit`.
    In the dtype of `scores` (float32 in the lab) the allowed exponentials underflow once the forbidden
    logit exceeds the allowed ones by about 88 (smallest normal float32 ≈ e^-87.3), turn wrong as
    subnormals lose their digits, and reach 0 near 104: then renormalising is 0/0.
    """
    if scores.dim() != 1 or allowed.shape != scores.shape or allowed.dtype != torch.bool:
        raise ValueError(f"need scores (S,) and a bool allowed (S,), got {tuple(scores.shape)} and {tuple(allowed.shape)}")
    forbidden = (~allowed).nonzero().flatten().tolist()
    if not forbidden or not bool(allowed.any()):
        raise ValueError("the row needs at least one allowed and one forbidden key")
    key = forbidden[-1] if key is None else key
    if key not in forbidden:
        raise ValueError(f"key {key} is not forbidden in this row; forbidden keys are {forbidden}")
    if not math.isfinite(forbidden_logit):
        raise ValueError(f"the forbidden logit must be a finite number, got {forbidden_logit!r}")
    logits = scores.detach().clone()  # (S,)
    logits[key] = forbidden_logit
    cmp = zero_after_softmax(logits, allowed)
    kept = cmp.after.sum().item()
    return RenormalisedRow(
        float(forbidden_logit), key, logits, allowed, softmax(logits), kept, cmp.renormalised, kept == 0.0,
        cmp.before, (cmp.renormalised - cmp.before).abs().max().item(),
    )


# ---------------------------------------------------------------------------------------------------
# Read one row: the release checkpoint, a row of the tensor result against the hand computation.

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
