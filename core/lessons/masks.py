"""Masks in the lab: causal and padding masks for a ragged batch, and what goes wrong when masking comes too late
(zeroing weights after softmax, renormalising what is left, rows with no allowed key).

Each function is pure (inputs and a seed in, a frozen result out), so the page only renders it and a test can check
it against a hand computation or PyTorch's SDPA. Masks are bool, True = may attend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from core.attention import AttentionResult, causal_mask, padding_mask, scaled_dot_product_attention, softmax
from core.i18n import _
from core.lessons.scores import random_qkv


@dataclass(frozen=True)
class MaskComparison:
    before: Tensor  # (..., T, S) mask applied to the logits: the formula
    after: Tensor  # (..., T, S) softmax over everything, forbidden weights zeroed afterwards
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


def first_partly_masked_row(mask: Tensor) -> int:
    """The first query row of `mask` (T, S) with at least one allowed and one forbidden key, else row 0.

    The row the masks page asks about: zeroing after softmax only loses weight where some keys are forbidden
    and some allowed (a fully allowed row keeps 1, a fully forbidden one keeps 0).
    """
    if mask.dim() != 2 or mask.dtype != torch.bool:
        raise ValueError(f"need a bool mask (T, S), got {mask.dtype} {tuple(mask.shape)}")
    allowed = mask.sum(-1).tolist()  # (T,)
    return next((t for t, n in enumerate(allowed) if 0 < n < mask.shape[-1]), 0)


MAX_WORDS = 8


def word_tokens(text: str, max_tokens: int = MAX_WORDS) -> tuple[str, ...]:
    """Split a short sentence into word tokens on whitespace ('the cat sat down' -> 4 tokens)."""
    words = tuple(text.split())
    if not words:
        raise ValueError(_("type a few words separated by spaces, e.g. 'the cat sat down'"))
    if len(words) > max_tokens:
        raise ValueError(
            _("at most {limit} words fit the mask picture; you typed {n}").format(limit=max_tokens, n=len(words))
        )
    return words


@dataclass(frozen=True)
class RaggedMasks:
    lengths: tuple[int, ...]  # real tokens per sequence; the batch is padded to T = max(lengths)
    side: str  # "right": tokens first, padding after; "left": padding first
    real: Tensor  # (B, S) True where the position holds a token (the layout, mask on or off)
    causal: Tensor  # (T, S) the causal mask as applied: all True when it is off
    padding: Tensor  # (B, 1, S) the padding mask as applied: all True when it is off
    combined: Tensor  # (B, T, S) causal & padding: True = may attend
    allowed_keys: Tensor  # (B, T) number of allowed keys in each row of `combined`
    no_allowed_key: Tensor  # (B, T) rows of `combined` with no allowed key at all


def ragged_masks(lengths, *, side: str = "right", causal: bool = True, padding: bool = True) -> RaggedMasks:
    """Masks for a batch of sequences of different lengths, padded to the longest one (S = T)."""
    lengths = tuple(int(n) for n in lengths)
    if not lengths or min(lengths) < 0 or max(lengths) < 1:
        raise ValueError(
            _("lengths must be >= 0 with at least one sequence of length >= 1, got {lengths}").format(
                lengths=list(lengths)
            )
        )
    T = max(lengths)
    real = padding_mask(lengths, T, side=side)  # (B, 1, S)
    causal_m = causal_mask(T) if causal else torch.ones(T, T, dtype=torch.bool)  # (T, S)
    padding_m = real if padding else torch.ones_like(real)  # (B, 1, S)
    combined = causal_m.unsqueeze(0) & padding_m  # (B, T, S)
    return RaggedMasks(
        lengths, side, real.squeeze(1), causal_m, padding_m, combined, combined.sum(-1), ~combined.any(-1)
    )


@dataclass(frozen=True)
class EmptyRows:
    rows: Tensor  # (..., T) True where the row has no allowed key
    weights: Tensor  # (..., T, S) the lab's weights: all zero on those rows
    out: Tensor  # (..., T, Dv) the lab's output: zero on those rows
    grad_q: Tensor  # (..., T, D) gradient of out.sum() with respect to q
    grads_finite: bool  # every gradient entry (q, k and v) is finite
    naive_weights: Tensor  # (..., T, S) torch.softmax after masked_fill(-inf): NaN on those rows
    naive_nan_rows: Tensor  # (..., T) rows of naive_weights holding NaN
    naive_nan_grads: int  # NaN entries in the naive gradients of q, k and v
    grad_entries: int  # entries in the gradients of q, k and v together


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
    naive_weights, _naive_out, naive_grads = run(naive)
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
    q: Tensor  # (B, T, D)
    k: Tensor  # (B, S, D)
    v: Tensor  # (B, S, D)
    result: AttentionResult  # attention with masks.combined
    comparison: MaskComparison  # mask before softmax against zeroing after it
    empty: EmptyRows  # rows with no allowed key


def mask_experiment(masks: RaggedMasks, *, seed: int, D: int = 4) -> MaskExperiment:
    """Seeded q, k, v for the ragged batch, attended with its combined mask, plus both comparisons."""
    B, T = len(masks.lengths), masks.combined.shape[-1]
    q, k, v = (x[:, 0] for x in random_qkv(B, 1, T, D, seed=seed))  # (B, T, D) each
    result = scaled_dot_product_attention(q, k, v, masks.combined)
    return MaskExperiment(
        masks,
        q,
        k,
        v,
        result,
        zero_after_softmax(result.scores, masks.combined),
        fully_masked_rows(q, k, v, masks.combined),
    )


@dataclass(frozen=True)
class RenormalisedRow:
    forbidden_logit: float
    key: int  # the forbidden key given that logit
    logits: Tensor  # (S,) the row's scores with the forbidden logit in place
    allowed: Tensor  # (S,) True = may attend
    unmasked: Tensor  # (S,) softmax over every key, forbidden ones included
    kept_mass: float  # sum of the allowed entries of `unmasked`
    renormalised: Tensor  # (S,) allowed entries of `unmasked` / kept_mass; all 0 when kept_mass is 0
    undefined: bool  # kept_mass == 0: the plain division is 0/0 (NaN); the lab returns zeros
    masked: Tensor  # (S,) the formula: softmax with the mask applied to the logits
    max_error: float  # max |renormalised - masked|


# Forbidden logits for the renormalisation sweep: float32 underflow sets in between 88 and 104.
RENORMALISE_SWEEP: tuple[float, ...] = tuple(float(x) for x in range(0, 121, 4))


def renormalise_after_softmax(
    scores: Tensor, allowed: Tensor, *, forbidden_logit: float, key: int | None = None
) -> RenormalisedRow:
    """Zero the forbidden weights after softmax and divide by what is left, with one forbidden logit set high.

    scores (S,), allowed bool (S,); `key` (default: the last forbidden key) gets `forbidden_logit`.
    In the dtype of `scores` (float32 in the lab) the allowed exponentials underflow once the forbidden
    logit exceeds the allowed ones by about 88 (smallest normal float32 ≈ e^-87.3), turn wrong as
    subnormals lose their digits, and reach 0 near 104: then renormalising is 0/0.
    """
    if scores.dim() != 1 or allowed.shape != scores.shape or allowed.dtype != torch.bool:
        raise ValueError(
            f"need scores (S,) and a bool allowed (S,), got {tuple(scores.shape)} and {tuple(allowed.shape)}"
        )
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
        float(forbidden_logit),
        key,
        logits,
        allowed,
        softmax(logits),
        kept,
        cmp.renormalised,
        kept == 0.0,
        cmp.before,
        (cmp.renormalised - cmp.before).abs().max().item(),
    )
