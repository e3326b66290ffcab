"""Turning logits into tokens: temperature, top-k, top-p, and streaming generation.

The distribution a token is drawn from is computed in one place, `next_token_distribution`, in this
order (the order Hugging Face's samplers use):

    0. suppress      the ids in `suppress` get probability exactly 0 (generation: NEVER_SAMPLED)
    1. temperature   probs ∝ exp(logits / temperature); temperature 0 means argmax (a one-hot row)
    2. top-k         keep exactly the k most likely tokens (ties broken by torch.topk), k clamped to V
    3. top-p         keep the smallest prefix of tokens, most likely first, whose mass reaches p
    4. renormalise   softmax over the kept tokens only (core.attention.softmax with a mask)

`sample_next_token` draws from exactly that distribution, so the app's bars are what sampling uses.
Randomness is explicit: a `torch.Generator` or a seed (an integer in 0 .. SEED_LIMIT - 1, check_seed).

Before step 1, `suppress` removes token ids from the distribution (probability exactly 0). Generation
suppresses NEVER_SAMPLED = <pad>, <bos>, <unk> by default: they are not text, and a sampled <unk> used to
show as U+FFFD in a completion. <eos> is never suppressed by default: it is the model's stop signal.

Hostile numbers are bounded here, so a link, a form, a command line or a bundle manifest cannot make
generation crash or run without end (constants below, each with its reason): a temperature below
MIN_TEMPERATURE is greedy, max_new_tokens is at most MAX_NEW_TOKENS, top_k at most MAX_TOP_K.

`generate` streams one `GenerationStep` per new token. Its first window is the context window of
core.model.kv_cache (`window_start`); past the context length it slides the window the way that module documents
(reset and re-encode the last `keep` tokens), with or without the cache, so both paths produce the same tokens. An
empty prompt starts from <eos> (core.model.prompt.start_ids). Generation does not stop at <eos> by itself: the caller
sees each token and stops the loop when it wants. It never yields a <pad>, <bos> or <unk> unless the caller asks for
them (suppress=()).

`cache_parity` is the one measurement of the KV cache's parity: a generation through the cache and, at every step,
the same window recomputed without it, on a float64 copy of the model (and the model as given beside it, a figure).
The KV-cache lesson (core.lessons.kv_cache.parity_trace) and the release gate (core.release.gate.checks.cache_checks)
both read it and decide with core.agreement.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from core.agreement import float64_copy
from core.attention import softmax
from core.model.forward import closing, eval_mode, forward_last
from core.model.gpt import GPT
from core.model.kv_cache import KVCache, default_keep, next_window_start
from core.model.prompt import start_ids, window_start
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


def _check_logits(logits: Tensor) -> None:
    if not isinstance(logits, Tensor) or logits.dim() not in (1, 2) or not logits.is_floating_point():
        got = f"{tuple(logits.shape)} {logits.dtype}" if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a floating-point tensor (V,) or (B, V), got {got}")
    if logits.shape[-1] < 1:
        raise ValueError(f"logits need at least one vocabulary entry, got shape {tuple(logits.shape)}")
    if not bool(logits.amax() < math.inf):  # NaN propagates through amax and fails the comparison, as +inf does
        raise ValueError("logits contain NaN or +inf (the model's numbers overflowed); nothing can be sampled")


def _allowed(logits: Tensor, suppress: Sequence[int]) -> Tensor:
    """Bool (..., V): True for every id not in `suppress`."""
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
    _check_logits(logits)
    temperature = _check_filters(temperature, top_k, top_p)
    return _distribution(logits, temperature, top_k, top_p, _allowed(logits, suppress))


def _distribution(
    logits: Tensor, temperature: float, top_k: int | None, top_p: float | None, allowed: Tensor
) -> Tensor:
    """next_token_distribution after its checks; `allowed` (..., V) is False at the suppressed ids."""
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


def _draw(probs: Tensor, generator: torch.Generator | None, greedy: bool) -> Tensor:
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
    return _draw(probs, generator, greedy=greedy)


@dataclass(frozen=True)
class GenerationStep:
    token: int  # the new token id
    logits: Tensor  # (V,) the model's logits for this step
    probs: Tensor  # (V,) the distribution the token was drawn from
    seconds: float  # wall-clock time of this step (forward pass + sampling)
    reencoded: bool  # the window slid this step: cache reset and the last `keep` tokens encoded again
    position: int  # index of the new token in prompt + generated tokens
    context: int  # tokens the model saw to predict it (the window length)


def generate(
    model: GPT,
    prompt_ids: Sequence[int],
    sample: SampleConfig,
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    keep: int | None = None,
    suppress: Sequence[int] = NEVER_SAMPLED,
) -> Iterator[GenerationStep]:
    """Stream up to sample.max_new_tokens new tokens after prompt_ids, one GenerationStep each.

    A prompt longer than the context keeps its last context_length tokens; an empty prompt starts
    from <eos>, a document start (start_ids). `keep` is the number of tokens re-encoded when the window slides (default
    context_length // 2, see core.model.kv_cache). Stochastic sampling needs a seed (0 .. SEED_LIMIT - 1) or a
    generator. Ids in `suppress` (default <pad>, <bos>, <unk>) are never generated; <eos> is, so the caller
    can stop there. Every argument is checked here, before the first token: a bad one raises ValueError
    before a caller has printed anything. The model is put in eval mode for the duration and restored afterwards.
    """
    if not isinstance(sample, SampleConfig):
        raise ValueError(f"sample must be a SampleConfig, got {type(sample).__name__}")
    if seed is not None and generator is not None:
        raise ValueError("pass either seed or generator, not both")
    if seed is not None:
        generator = torch.Generator().manual_seed(check_seed(seed))
    if not sample.greedy and generator is None:
        raise ValueError(f"sampling at temperature {sample.temperature} needs a seed or a torch.Generator")
    config = model.config
    L = config.context_length
    keep = default_keep(L) if keep is None else keep
    if not is_int(keep) or not 1 <= keep <= L:
        raise ValueError(f"keep must be an integer in 1..context_length={L}, got {keep!r}")
    ids = start_ids(prompt_ids)
    if min(ids) < 0 or max(ids) >= config.vocab_size:
        raise ValueError(f"prompt ids must lie in 0..{config.vocab_size - 1}, got min {min(ids)}, max {max(ids)}")
    device = next(model.parameters()).device
    # (V,): checks every suppressed id is in the vocabulary with one left over; built once, not per step
    allowed = _allowed(torch.zeros(config.vocab_size, device=device), tuple(suppress))
    return _generate(model, ids, sample, generator, use_cache, keep, allowed)


def _generate(model, ids, sample, generator, use_cache, keep, allowed) -> Iterator[GenerationStep]:
    L = model.config.context_length
    device = allowed.device
    cache = model.new_cache(batch_size=1) if use_cache else None
    start = window_start(len(ids), L)  # the window the model sees is ids[start:], the last L
    # Eval mode for the whole generation, but autograd left as it is: a no_grad open at a yield would switch
    # gradients off in the caller's code between steps (no_grad wraps each forward pass instead, _last_logits).
    with eval_mode(model, no_grad=False):
        for step in range(sample.max_new_tokens):
            began = time.perf_counter()
            new_start = next_window_start(len(ids), start, L, keep)
            reencoded = new_start != start
            start = new_start
            if cache is None:
                feed = ids[start:]  # the whole window, every step
            elif step == 0 or reencoded:
                cache.reset()
                feed = ids[start:]  # prefill, or re-encode after the window slid
            else:
                feed = ids[-1:]  # only the newest token; the rest is in the cache
            logits = _last_logits(model, torch.tensor([feed], device=device), cache)  # (V,)
            _check_logits(logits)
            probs = _distribution(logits, sample.temperature, sample.top_k, sample.top_p, allowed)  # (V,)
            token = int(_draw(probs, generator, greedy=sample.greedy))  # () -> Python int
            seconds = time.perf_counter() - began
            ids.append(token)
            yield GenerationStep(
                token=token,
                logits=logits,
                probs=probs,
                seconds=seconds,
                reencoded=reencoded,
                position=len(ids) - 1,
                context=len(ids) - 1 - start,
            )


def _last_logits(model: GPT, idx: Tensor, cache: KVCache | None) -> Tensor:
    """The last position's logits (V,): through the cache and the fused kernel, or without a cache through the
    lessons' kernel (the teaching recompute the cached path is held to). inference_mode wraps this call only: a
    generator suspended inside it would leave gradients disabled in the caller's code."""
    with torch.inference_mode():
        return model(idx, cache=cache, return_weights=cache is None).logits[0, -1]  # (V,)


@dataclass(frozen=True)
class CacheParityStep:
    """One generation step computed through the KV cache and without it (`cache_parity`)."""

    step: int
    position: int  # index of the new token in prompt + generated tokens
    token: int  # drawn from the cached logits: generate's own token (on the float64 copy)
    uncached_token: int  # drawn from the uncached logits with the generator in the state the cached draw started from
    cached: Tensor  # (V,) float64: generate's logits through the cache
    uncached: Tensor  # (V,) float64: the same window recomputed from scratch (the teaching forward pass)
    cached_as_given: Tensor  # (V,) the model in its own dtype (float32 as served), through its own cache
    uncached_as_given: Tensor  # (V,) the model in its own dtype, the same window from scratch
    reencoded: bool  # the window slid at this step (core.model.kv_cache.next_window_start, recomputed here)
    context: int  # tokens the model saw for this step
    window_agrees: bool  # generate's own window (reencoded, context) matches the policy recomputed here

    @property
    def token_differs(self) -> bool:
        return self.token != self.uncached_token


def cache_parity(
    model: GPT,
    ids: Sequence[int],
    n_steps: int,
    sample: SampleConfig,
    seed: int | None = 0,
    *,
    keep: int | None = None,
) -> tuple[CacheParityStep, ...]:
    """Cached against uncached generation, step by step: the one computation of the KV cache's parity.

    A generation of n_steps tokens after `ids` runs through the cache (generate) on a float64 copy of the model
    (core.agreement.float64_copy); at every step the window the sliding-window policy gives
    (core.model.kv_cache.next_window_start, recomputed here, not read from generate) is recomputed from scratch on the
    same copy, so the comparison holds across the context boundary. The uncached token is drawn from the uncached
    logits with the generator in the state the cached draw started from: any difference comes from the logits, never
    from the randomness. The model as given (float32 as served) walks the same windows through its own cache and from
    scratch beside it: a figure. Both paths continue from the cached token. Nothing is decided here: the callers
    compare with core.agreement (float64 decides)."""
    if not is_int(n_steps) or n_steps < 0:
        raise ValueError(f"n_steps must be an integer >= 0, got {n_steps!r}")
    if not isinstance(sample, SampleConfig):
        raise ValueError(f"sample must be a SampleConfig, got {type(sample).__name__}")
    run = dataclasses.replace(sample, max_new_tokens=n_steps)  # n_steps bounded by MAX_NEW_TOKENS here
    if seed is None and not sample.greedy:
        raise ValueError(f"sampling at temperature {sample.temperature} needs a seed")
    generator = torch.Generator().manual_seed(0 if seed is None else check_seed(seed))  # unused when greedy
    L = model.config.context_length
    keep = default_keep(L) if keep is None else keep
    device = next(model.parameters()).device
    model64 = float64_copy(model)  # a deep copy of the same class, in float64
    cache = model.new_cache(batch_size=1)  # the model as given walks the same windows through its own cache
    prefix = start_ids(ids)
    start = window_start(len(prefix), L)  # the window is prefix[start:], as in generate
    steps: list[CacheParityStep] = []
    cached = generate(model64, prefix, run, generator=generator, use_cache=True, keep=keep)
    with closing(cached):
        for i in range(n_steps):
            state = generator.get_state()  # before this step's draw
            step = next(cached)
            new_start = next_window_start(len(prefix), start, L, keep)
            reencoded, start = new_start != start, new_start
            window = prefix[start:]
            with eval_mode(model64):
                uncached = forward_last(model64, window)  # (V,) float64, from scratch
            replay = None if sample.greedy else torch.Generator().set_state(state)
            uncached_token = int(
                sample_next_token(
                    uncached, replay, sample.temperature, sample.top_k, sample.top_p, suppress=NEVER_SAMPLED
                )
            )
            if i == 0 or reencoded:
                cache.reset()
            feed = window if cache.length == 0 else window[-1:]  # prefill, or the newest token only
            with eval_mode(model):
                cached_as_given = model(torch.tensor([feed], device=device), cache).logits[0, -1]
                uncached_as_given = forward_last(model, window)  # (V,)
            steps.append(
                CacheParityStep(
                    step=i,
                    position=step.position,
                    token=step.token,
                    uncached_token=uncached_token,
                    cached=step.logits,
                    uncached=uncached,
                    cached_as_given=cached_as_given,  # (V,)
                    uncached_as_given=uncached_as_given,
                    reencoded=reencoded,
                    context=len(window),
                    window_agrees=step.reencoded == reencoded and step.context == len(window),
                )
            )
            prefix.append(step.token)  # both paths continue from the cached choice
    return tuple(steps)
