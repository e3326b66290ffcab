"""Turning logits into a token: temperature, top-k, top-p, as pure functions.

The distribution a token is drawn from is computed in one place, `next_token_distribution`, in this
order (the order Hugging Face's samplers use):

    0. suppress      the ids in `suppress` get probability exactly 0 (generation: NEVER_SAMPLED)
    1. temperature   probs ∝ exp(logits / temperature); temperature 0 means argmax (a one-hot row)
    2. top-k         keep exactly the k most likely tokens (ties broken by torch.topk), k clamped to V
    3. top-p         keep the smallest prefix of tokens, most likely first, whose mass reaches p
    4. renormalise   softmax over the kept tokens only (the attention kernel's softmax with a mask)

`sample_next_token` draws from exactly that distribution, so the app's bars are what sampling uses.
Randomness is explicit: a `torch.Generator` or a seed (an integer in 0 .. SEED_LIMIT - 1, check_seed).

Generation suppresses NEVER_SAMPLED = <pad>, <bos>, <unk> by default: they are not text, and a sampled <unk> used to
show as U+FFFD in a completion. <eos> is never suppressed by default: it is the model's stop signal.

Hostile numbers are bounded here, so a link, a form, a command line or a bundle manifest cannot make
generation crash or run without end (constants below, each with its reason): a temperature below
MIN_TEMPERATURE is greedy, max_new_tokens is at most MAX_NEW_TOKENS, top_k at most MAX_TOP_K.
The generation loop that calls these functions is the engine's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from core.attention import softmax
from core.model.tokenizer import BOS_ID, PAD_ID, UNK_ID
from core.numbers import is_int

# A temperature below MIN_TEMPERATURE is greedy (the same as 0, argmax). At temperature T a token whose logit
# lies d below the largest gets probability at most exp(-d / T). float32's exp is exactly 0 below about -103
# (its smallest subnormal, 1.4e-45, is e^-103.3) and overflows above 88.7, so its useful range is about 190
# wide, while logits here span about +-20. At T = 1e-3 the scaled logits span 4e4: every token more than
# 103 * T = 0.1 below the maximum already has probability exactly 0, and sampling differs from argmax only
# between near-ties. Further down logits / T leaves float32 altogether (20 / T > 3.4e38 for T < 6e-38) and
# softmax computes inf - inf = NaN: `--temperature 1e-40` crashed torch.multinomial that way. So greedy
# below 1e-3 changes nothing but near-ties, and no temperature the sampler divides by can overflow.
MIN_TEMPERATURE = 1e-3
# Tokens one request may generate: 32 times the shipped model's context (128). At a few ms per token that
# is seconds of CPU, not hours; a manifest, a form or `--max-new-tokens` asking for more is refused.
MAX_NEW_TOKENS = 4096
# top_k at or above V means "keep every token" (clamped), so any real vocabulary is far below this; a larger
# number is a typo or an attack, refused with the bound in the message.
MAX_TOP_K = 1_000_000
# Seeds are integers in 0 .. SEED_LIMIT - 1: torch.Generator.manual_seed takes an unsigned 64-bit number
# (2**64 and above raised "Overflow when unpacking long long" after the CLI had printed the prompt), and
# below 2**63 a seed also fits the signed 64-bit integers of JSON tools, numpy and SQLite that record it.
SEED_LIMIT = 2**63
# Never drawn into visible text by default: storage filler, the sequence start and "unknown character".
NEVER_SAMPLED: tuple[int, ...] = (PAD_ID, BOS_ID, UNK_ID)


def check_seed(seed) -> int:
    """`seed` if it is an integer in 0 .. SEED_LIMIT - 1, else a ValueError saying so."""
    if not is_int(seed) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"seed must be an integer from 0 to 2**63 - 1 = {SEED_LIMIT - 1}, got {seed!r}")
    return seed


def effective_temperature(temperature: float) -> float:
    """The temperature sampling uses: 0.0 (greedy) below MIN_TEMPERATURE, else `temperature` as a float.
    Negative, NaN, inf and non-numbers raise ValueError."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature!r}")
    return 0.0 if temperature < MIN_TEMPERATURE else float(temperature)


@dataclass(frozen=True)
class SampleConfig:
    temperature: float = 1.0  # 0 = greedy (argmax); below MIN_TEMPERATURE it is stored as 0.0
    top_k: int | None = None  # None = no top-k; 1 .. MAX_TOP_K, values above V are clamped to V
    top_p: float | None = None  # None = no nucleus filtering; else in (0, 1]
    max_new_tokens: int = 64  # 0 .. MAX_NEW_TOKENS

    def __post_init__(self):
        _check_filters(self.temperature, self.top_k, self.top_p)
        # frozen: the greedy fallback is written once, here, so every user of the config sees the same value
        object.__setattr__(self, "temperature", effective_temperature(self.temperature))
        if not is_int(self.max_new_tokens) or not 0 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise ValueError(
                f"max_new_tokens must be an integer from 0 to {MAX_NEW_TOKENS} (MAX_NEW_TOKENS; "
                f"generate longer texts in several calls), got {self.max_new_tokens!r}"
            )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def _check_filters(temperature: float, top_k: int | None, top_p: float | None) -> float:
    """Validate the filters; return the effective temperature (0.0 = greedy)."""
    temperature = effective_temperature(temperature)
    if top_k is not None and (not is_int(top_k) or not 1 <= top_k <= MAX_TOP_K):
        raise ValueError(
            f"top_k must be None or an integer from 1 to {MAX_TOP_K} (values above the vocabulary "
            f"keep every token), got {top_k!r}"
        )
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}")
    return temperature


def check_logits(logits: Tensor) -> None:
    """ValueError unless logits is a floating-point (V,) or (B, V) with no NaN or +inf."""
    if not isinstance(logits, Tensor) or logits.dim() not in (1, 2) or not logits.is_floating_point():
        got = f"{tuple(logits.shape)} {logits.dtype}" if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a floating-point tensor (V,) or (B, V), got {got}")
    if logits.shape[-1] < 1:
        raise ValueError(f"logits need at least one vocabulary entry, got shape {tuple(logits.shape)}")
    if not bool(logits.amax() < math.inf):  # NaN propagates through amax and fails the comparison, as +inf does
        raise ValueError("logits contain NaN or +inf (the model's numbers overflowed); nothing can be sampled")


def allowed_tokens(logits: Tensor, suppress: Sequence[int]) -> Tensor:
    """Bool (..., V): True for every id not in `suppress` (checked: ids in the vocabulary, one left over)."""
    V = logits.shape[-1]
    ids = list(suppress)
    if not all(is_int(i) and 0 <= i < V for i in ids):
        raise ValueError(f"suppress must hold token ids in 0..{V - 1}, got {ids!r}")
    allowed = torch.ones(V, dtype=torch.bool, device=logits.device)  # (V,)
    allowed[ids] = False
    if not allowed.any():
        raise ValueError(f"suppress {ids!r} removes every token of the vocabulary; nothing can be sampled")
    return allowed.expand(logits.shape)  # (..., V)


def next_token_distribution(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    *,
    suppress: Sequence[int] = (),
) -> Tensor:
    """The exact distribution sampling draws from: probs with the shape of logits, (V,) or (B, V).

    Ids in `suppress` get probability exactly 0 (before top-k, so top-k keeps k of the other tokens);
    a temperature below MIN_TEMPERATURE is greedy.
    """
    check_logits(logits)
    temperature = _check_filters(temperature, top_k, top_p)
    return filtered_distribution(logits, temperature, top_k, top_p, allowed_tokens(logits, suppress))


def filtered_distribution(
    logits: Tensor, temperature: float, top_k: int | None, top_p: float | None, allowed: Tensor
) -> Tensor:
    """next_token_distribution after its checks (generation checks once, then calls this every step);
    `allowed` (..., V) is False at the suppressed ids."""
    candidates = logits.masked_fill(~allowed, float("-inf"))  # (..., V) suppressed ids can never win
    if temperature == 0:
        greedy = candidates.argmax(dim=-1, keepdim=True)  # (..., 1) first index of the maximum
        return torch.zeros_like(logits).scatter_(-1, greedy, 1.0)  # (..., V) one-hot
    keep = allowed.clone()  # (..., V)
    V = logits.shape[-1]
    if top_k is not None and top_k < int(allowed.reshape(-1, V)[0].sum()):  # fewer than the allowed tokens
        top = candidates.topk(top_k, dim=-1).indices  # (..., k)
        keep = torch.zeros_like(keep).scatter_(-1, top, True)  # (..., V) exactly k True per row
    probs = softmax(logits, dim=-1, temperature=temperature, mask=keep)  # (..., V)
    if top_p is not None and top_p < 1.0:
        sorted_probs, order = probs.double().sort(dim=-1, descending=True, stable=True)  # (..., V) each
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (..., V) mass of the more likely tokens
        keep_sorted = mass_before < top_p  # (..., V): the prefix stops at the first token reaching p
        keep = keep & torch.zeros_like(keep).scatter_(-1, order, keep_sorted)  # (..., V) back to id order
        probs = softmax(logits, dim=-1, temperature=temperature, mask=keep)  # (..., V) renormalised
    return probs


def draw(probs: Tensor, generator: torch.Generator | None, greedy: bool) -> Tensor:
    """One token id per row of probs (..., V) -> (...,): argmax when greedy, else a multinomial draw."""
    if greedy:
        return probs.argmax(dim=-1)  # (...,)
    flat = probs.reshape(-1, probs.shape[-1])  # (B, V)
    tokens = torch.multinomial(flat, 1, generator=generator)  # (B, 1)
    return tokens.reshape(probs.shape[:-1])  # (...,)


def sample_next_token(
    logits: Tensor,
    generator: torch.Generator | None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    *,
    suppress: Sequence[int] = (),
) -> Tensor:
    """Draw one token id per row of logits (V,) -> () or (B, V) -> (B,), long.

    temperature 0 (or below MIN_TEMPERATURE) is argmax and uses no randomness (generator may be None);
    otherwise pass a torch.Generator, which makes the draw reproducible. Ids in `suppress` are never drawn.
    """
    probs = next_token_distribution(logits, temperature, top_k, top_p, suppress=suppress)  # (..., V)
    greedy = effective_temperature(temperature) == 0
    if not greedy and not isinstance(generator, torch.Generator):
        raise ValueError(f"sampling with temperature {temperature} needs a torch.Generator, got {generator!r}")
    return draw(probs, generator, greedy=greedy)
