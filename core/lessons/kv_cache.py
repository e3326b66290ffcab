"""The KV-cache lesson: the cache changes nothing (the parity trace) and saves time (the timing).

Parity reuses the release gate's own measurement of the cache, decided in float64 by the agreement rule, with the
float32 figure beside it. Timing is shown, never decides anything. Shapes: V vocabulary size, N new tokens.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from core.agreement import Agreement, agreement, model_terms
from core.model.engine import cache_parity, generate
from core.model.gpt import GPT
from core.model.sampling import SampleConfig
from core.model.tokenizer import SPECIAL_TOKENS
from core.numbers import integer, is_int

# ---- the cache changes nothing: cached against uncached, step by step ----------------------------


@dataclass(frozen=True)
class ParityStep:
    step: int
    position: int  # index of the new token in prompt + generated tokens
    token: int  # chosen by the cached generation (float64 copy of the model)
    uncached_token: int  # chosen from the uncached logits with the same random draw
    agreement: Agreement  # cached vs uncached logits, both in float64: decides (core.agreement)
    float32: Agreement  # the same step on the float32 weights as served: a figure, never a verdict
    reencoded: bool  # the window slid at this step (sliding-window policy of core.model.kv_cache)
    context: int  # tokens the model saw for this step
    window_agrees: bool  # generate's own window (reencoded, context) matches the policy recomputed here

    @property
    def max_abs_diff(self) -> float:
        """max over the vocabulary of |cached - uncached| logit, in float64."""
        return self.agreement.max_abs_diff

    @property
    def allowed(self) -> float:
        """What float64 rounding alone explains at this step (the agreement rule's allowance)."""
        return self.agreement.allowed

    @property
    def token_differs(self) -> bool:
        return self.token != self.uncached_token


@dataclass(frozen=True)
class ParityTrace:
    steps: tuple[ParityStep, ...]
    terms: int  # core.agreement.model_terms(config): the longest sum behind one logit

    @property
    def max_abs_diff(self) -> float:
        return max((s.max_abs_diff for s in self.steps), default=0.0)

    @property
    def worst_step(self) -> int | None:
        if not self.steps:
            return None
        return max(self.steps, key=lambda s: s.agreement.ratio).step

    @property
    def flagged_steps(self) -> tuple[int, ...]:
        """Steps whose chosen token differs between the cached and the uncached logits."""
        return tuple(s.step for s in self.steps if s.token_differs)

    @property
    def slid_steps(self) -> tuple[int, ...]:
        """Steps at which the window slid past the context (cache reset, last `keep` tokens re-encoded)."""
        return tuple(s.step for s in self.steps if s.reencoded)

    @property
    def exact_zero_steps(self) -> tuple[int, ...]:
        """Steps whose float64 logits agree exactly (a log-scale chart cannot draw them)."""
        return tuple(s.step for s in self.steps if s.max_abs_diff == 0)

    @property
    def worst_ratio(self) -> float:
        """The largest float64 |difference| / allowance of any step: <= 1 means every step agrees."""
        return max((s.agreement.ratio for s in self.steps), default=0.0)

    @property
    def within_tolerance(self) -> bool:
        return all(s.agreement.passed for s in self.steps)

    @property
    def float32_max_abs_diff(self) -> float:
        return max((s.float32.max_abs_diff for s in self.steps), default=0.0)

    @property
    def float32_worst_ratio(self) -> float:
        """The float32 figure's largest share of its float32 allowance (shown only)."""
        return max((s.float32.ratio for s in self.steps), default=0.0)

    @property
    def passed(self) -> bool:
        return self.within_tolerance and not self.flagged_steps and all(s.window_agrees for s in self.steps)


def parity_trace(
    model: GPT,
    ids: Sequence[int],
    n_steps: int,
    sample: SampleConfig,
    seed: int | None = 0,
    *,
    keep: int | None = None,
) -> ParityTrace:
    """Run a cached generation and, at every step, recompute the logits without the cache
    (the engine's cache_parity), and decide every step.

    The verdict compares the float64 copy's logits with `agreement(cached, uncached,
    terms=model_terms(config)): summation order then moves logits by about 1e-15 relative on every CPU, a cache bug
    by whole units. The float32 difference on the model as served, along the same windows, is kept as a figure with
    its float32 allowance. Bad arguments (n_steps, sample, seed) raise ValueError before any work.
    """
    terms = model_terms(model.config)
    steps = tuple(
        ParityStep(
            step=s.step,
            position=s.position,
            token=s.token,
            uncached_token=s.uncached_token,
            agreement=agreement(s.cached, s.uncached, terms=terms),
            float32=agreement(s.cached_as_given, s.uncached_as_given, terms=terms),
            reencoded=s.reencoded,
            context=s.context,
            window_agrees=s.window_agrees,
        )
        for s in cache_parity(model, ids, n_steps, sample, seed, keep=keep)
    )
    return ParityTrace(steps=steps, terms=terms)


# ---- the cache saves time: per-token time with and without it ------------------------------------

# The KV-cache lesson's measurement. A step's wall clock on a shared machine jumps with other jobs (a single
# 330 ms spike once made the cache look slower), so: one warm-up run per mode that is not recorded (first
# calls allocate buffers and pick kernels), then TIMING_REPEATS runs per mode, interleaved so load falls on
# both alike, and medians, which one spike cannot move.
TIMING_REPEATS = 5
TIMING_WARMUP = 1
TIMING_NEW_TOKENS = 16
MAX_TIMING_REPEATS = 50  # a bound on the work one measurement may ask for


@dataclass(frozen=True)
class CacheTiming:
    """Per-step seconds of greedy generation with and without the KV cache, warm-up runs excluded."""

    prompt_tokens: int  # tokens in the window before the first new one
    positions: tuple[int, ...]  # (N,) index of each new token: prompt_tokens .. prompt_tokens + N - 1
    cached_seconds: tuple[tuple[float, ...], ...]  # (repeats, N) each recorded run's step times
    uncached_seconds: tuple[tuple[float, ...], ...]  # (repeats, N)
    warmup: int  # runs per mode timed first and thrown away
    threads: int  # torch.get_num_threads() while measuring

    @property
    def repeats(self) -> int:
        return len(self.cached_seconds)

    @property
    def new_tokens(self) -> int:
        return len(self.positions)

    @staticmethod
    def _per_step_ms(runs: Sequence[Sequence[float]]) -> tuple[float, ...]:
        return tuple(1000 * statistics.median(step) for step in zip(*runs))

    @property
    def cached_ms(self) -> tuple[float, ...]:
        """(N,) median over the repeats of each step's milliseconds, with the cache (step 0 encodes the prompt)."""
        return self._per_step_ms(self.cached_seconds)

    @property
    def uncached_ms(self) -> tuple[float, ...]:
        """(N,) the same without the cache: every step encodes the whole window."""
        return self._per_step_ms(self.uncached_seconds)

    @property
    def cached_ms_per_token(self) -> float:
        """Median over the repeats of a run's mean milliseconds per new token (its prefill included)."""
        return 1000 * statistics.median(math.fsum(run) / len(run) for run in self.cached_seconds)

    @property
    def uncached_ms_per_token(self) -> float:
        return 1000 * statistics.median(math.fsum(run) / len(run) for run in self.uncached_seconds)

    @property
    def prefill_ms(self) -> float:
        """Median of the first cached step: it encodes the whole prompt, like an uncached step."""
        return self.cached_ms[0]

    @property
    def cached_one_token_ms(self) -> float | None:
        """Median over the repeats of a run's mean over its one-token steps (all but the first); None if N = 1."""
        if self.new_tokens < 2:
            return None
        return 1000 * statistics.median(math.fsum(run[1:]) / (len(run) - 1) for run in self.cached_seconds)

    @property
    def speedup(self) -> float:
        """Median time per token without the cache / with it: above 1 when the cache saves time."""
        return self.uncached_ms_per_token / self.cached_ms_per_token


def measure_cache_latency(
    model: GPT,
    *,
    prompt_tokens: int | None = None,
    new_tokens: int = TIMING_NEW_TOKENS,
    repeats: int = TIMING_REPEATS,
    warmup: int = TIMING_WARMUP,
    clock: Callable[[], float] = time.perf_counter,
) -> CacheTiming:
    """Time greedy generation of `new_tokens` after a `prompt_tokens`-long window, with and without the cache.

    The default window is context_length - new_tokens: the prompt fills most of the context, where the
    uncached step re-encodes the most and the window never slides. The prompt is a fixed, seeded sequence
    of character ids (timing does not depend on which). Each step is timed from the clock reading before
    generate computes it to the reading after it is yielded, with `clock` (time.perf_counter; a test may
    pass its own). `warmup` runs per mode come first and are not recorded; then `repeats` runs per mode,
    cached and uncached alternating.
    """
    L, V = model.config.context_length, model.config.vocab_size
    for name, value, lo, hi in (
        ("new_tokens", new_tokens, 1, L),
        ("repeats", repeats, 1, MAX_TIMING_REPEATS),
        ("warmup", warmup, 0, MAX_TIMING_REPEATS),
    ):
        integer(name, value, lo, hi)
    T = max(1, L - new_tokens) if prompt_tokens is None else prompt_tokens  # tokens in the prompt window
    longest = L - new_tokens + 1  # the last step then reads exactly L tokens: the window never slides
    if not is_int(T) or not 1 <= T <= longest:
        raise ValueError(
            f"prompt_tokens must be an integer in 1..{longest} (context_length {L} - new_tokens "
            f"{new_tokens} + 1, so the window never slides), got {T!r}"
        )
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(len(SPECIAL_TOKENS), V, (T,), generator=g).tolist()  # character ids
    greedy = SampleConfig(temperature=0.0, max_new_tokens=new_tokens)

    def run(use_cache: bool) -> tuple[float, ...]:
        seconds: list[float] = []
        before = clock()
        for _ in generate(model, prompt, greedy, use_cache=use_cache):
            after = clock()
            seconds.append(after - before)
            before = after
        return tuple(seconds)

    for _ in range(warmup):
        run(True)
        run(False)
    cached: list[tuple[float, ...]] = []
    uncached: list[tuple[float, ...]] = []
    for _ in range(repeats):
        cached.append(run(True))
        uncached.append(run(False))
    return CacheTiming(
        prompt_tokens=T,
        positions=tuple(range(T, T + new_tokens)),
        cached_seconds=tuple(cached),
        uncached_seconds=tuple(uncached),
        warmup=warmup,
        threads=torch.get_num_threads(),
    )
