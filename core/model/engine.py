"""Generation: the model's forward pass, a KV cache and the sampler in one loop, as nanochat's engine.

`generate` streams one `GenerationStep` per new token. Its first window is the context window (the last
context_length tokens, the prompt's `window_start`); past the context length the window slides:
`next_window_start` resets the cache and re-encodes the last `keep` tokens (`default_keep`: half the context), with or
without the cache, so both paths produce the same tokens. An empty prompt starts from <eos>. Generation does not stop
at <eos> by itself: the caller sees each token and stops the loop when it wants.

`next_token_logits` is generation's first step alone (the autocomplete pages' bars); `forward_last` the same window
recomputed from scratch through the lessons' kernel. `cache_parity` is the one measurement of the KV cache's parity:
a generation through the cache and, at every step, the same window recomputed without it, on a float64 copy of the
model (and the model as given beside it, a figure); the KV-cache lesson and the release gate read it and decide
with the agreement rule (float64 decides).

Shapes use the legend of `core/__init__.py`: T positions, V vocabulary size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor

from core.agreement import float64_copy
from core.model.gpt import GPT
from core.model.kv_cache import KVCache
from core.model.prompt import start_ids, window_start
from core.model.sampling import (
    NEVER_SAMPLED,
    SampleConfig,
    allowed_tokens,
    check_logits,
    check_seed,
    draw,
    filtered_distribution,
    sample_next_token,
)
from core.numbers import integer, is_int

Step = TypeVar("Step")


def window(model: GPT, ids: Sequence[int]) -> list[int]:
    """The ids the model sees for the next token: the context window with no room (prompt_window, the last
    context_length of them), <eos> if none."""
    kept = start_ids(ids)
    V, L = model.config.vocab_size, model.config.context_length
    if min(kept) < 0 or max(kept) >= V:
        raise ValueError(f"ids must lie in 0..{V - 1}, got min {min(kept)}, max {max(kept)}")
    return kept[window_start(len(kept), L) :]


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module, *, no_grad: bool = True) -> Iterator[None]:
    """Eval mode (no dropout) for the block, without gradients; the model's training flag is restored afterwards.

    no_grad=False leaves autograd as it is: a generator that yields inside the block (generate)
    passes it, since a no_grad open at a yield would switch gradients off in its caller's code between steps."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            yield
    finally:
        model.train(was_training)


def forward_last(model: GPT, ids: list[int]) -> Tensor:
    """Uncached logits (V,) after `ids` (a window), recomputed from scratch through the lessons' kernel."""
    device = next(model.parameters()).device
    return model(torch.tensor([ids], device=device), return_weights=True).logits[0, -1]  # (1, T, V) -> (V,)


def next_token_logits(model: GPT, ids: Sequence[int]) -> Tensor:
    """The model's logits (V,) for the token after `ids` (cut to the context; empty -> <eos>), computed as
    generation computes its first step."""
    kept = window(model, ids)
    device = next(model.parameters()).device
    with eval_mode(model):
        idx = torch.tensor([kept], device=device)  # (1, T)
        return model(idx, model.new_cache()).logits[0, -1]  # (V,)


@contextlib.contextmanager
def closing(steps: Iterator[Step]) -> Iterator[Iterator[Step]]:
    """contextlib.closing for generate, which is annotated as an Iterator: a generation
    left early is closed, so its generator (and the model's eval mode it holds) is released."""
    try:
        yield steps
    finally:
        close = getattr(steps, "close", None)
        if close is not None:
            close()


# ---- the sliding window past the context ------------------------------------------------------


def default_keep(context_length: int) -> int:
    """Tokens kept (re-encoded) when the window slides: half the context, at least one."""
    integer("context_length", context_length, 1)
    return max(1, context_length // 2)


def next_window_start(n_tokens: int, start: int, context_length: int, keep: int) -> int:
    """Start of the window the model sees for the next step, given `n_tokens` tokens so far.

    Returns `start` unchanged while ids[start:n_tokens] fits in the context; otherwise n_tokens - keep
    (the caller resets the cache and re-encodes ids[new_start:n_tokens]).
    """
    if not 1 <= keep <= context_length:
        raise ValueError(f"keep must lie in 1..context_length={context_length}, got {keep}")
    if not 0 <= start <= n_tokens:
        raise ValueError(f"start must lie in 0..n_tokens={n_tokens}, got {start}")
    if n_tokens - start <= context_length:
        return start
    return n_tokens - keep


# ---- generation --------------------------------------------------------------------------------


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
    context_length // 2, see the module docstring). Stochastic sampling needs a seed (0 .. SEED_LIMIT - 1) or a
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
    allowed = allowed_tokens(torch.zeros(config.vocab_size, device=device), tuple(suppress))
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
            check_logits(logits)
            probs = filtered_distribution(logits, sample.temperature, sample.top_k, sample.top_p, allowed)  # (V,)
            token = int(draw(probs, generator, greedy=sample.greedy))  # () -> Python int
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
    reencoded: bool  # the window slid at this step (next_window_start, recomputed here)
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
    (next_window_start, recomputed here, not read from generate) is recomputed from scratch on the
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
