"""Cached against uncached generation, step by step: the KV-cache lesson's parity trace.

    parity_trace(model, ids, n_steps, sample)   at every step of a cached generation, |cached - uncached| logits
                                                decided in float64 (core.agreement), the float32 figure beside
                                                it, and whether the two would have chosen a different token

Shapes use the legend of `core/__init__.py`: V vocabulary size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from core.agreement import Agreement, agreement, float64_copy, model_terms
from core.model.forward import closing, eval_mode, forward_last
from core.model.gpt import GPT
from core.model.kv_cache import default_keep, next_window_start
from core.model.sampling import NEVER_SAMPLED, SampleConfig, check_seed, generate, sample_next_token, start_ids


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
        """What float64 rounding alone explains at this step (core.agreement.allowance)."""
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
    """Run a cached generation and, at every step, recompute the logits without the cache.

    The verdict runs both paths on a float64 copy of the model (core.agreement.float64_copy) and compares
    them with core.agreement.agreement(cached, uncached, terms=model_terms(config)): summation order then
    moves logits by about 1e-15 relative on every CPU, a cache bug by whole units. The float32 difference
    on the model as served, along the same windows, is kept as a figure with its float32 allowance.
    The uncached pass sees the window the sliding-window policy gives (core.model.kv_cache.next_window_start,
    recomputed here, not read from generate), so the comparison holds across the context boundary.
    The uncached token is drawn from the uncached logits with the random generator in the state the
    cached draw started from: any difference comes from the logits, never from the randomness.
    """
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 0:
        raise ValueError(f"n_steps must be an integer >= 0, got {n_steps!r}")
    if not isinstance(sample, SampleConfig):
        raise ValueError(f"sample must be a SampleConfig, got {type(sample).__name__}")
    run = dataclasses.replace(sample, max_new_tokens=n_steps)  # n_steps bounded by MAX_NEW_TOKENS here
    if seed is None and not sample.greedy:
        raise ValueError(f"sampling at temperature {sample.temperature} needs a seed")
    generator = torch.Generator().manual_seed(0 if seed is None else check_seed(seed))  # unused when greedy
    L = model.config.context_length
    keep = default_keep(L) if keep is None else keep
    terms = model_terms(model.config)
    model64 = float64_copy(model)  # a deep copy of the same class, in float64
    cache32 = model.new_cache(batch_size=1)  # the float32 figure walks the same windows through its own cache
    prefix = start_ids(ids)
    start = max(0, len(prefix) - L)  # the window is prefix[start:], as in generate
    steps: list[ParityStep] = []
    cached = generate(model64, prefix, run, generator=generator, use_cache=True, keep=keep)
    with closing(cached):
        for i in range(n_steps):
            state = generator.get_state()  # before this step's draw
            step = next(cached)
            new_start = next_window_start(len(prefix), start, L, keep)
            reencoded, start = new_start != start, new_start
            window = prefix[start:]
            with eval_mode(model64):
                uncached64 = forward_last(model64, window)  # (V,) float64, from scratch
            replay = None if sample.greedy else torch.Generator().set_state(state)
            uncached_token = int(
                sample_next_token(
                    uncached64, replay, sample.temperature, sample.top_k, sample.top_p, suppress=NEVER_SAMPLED
                )
            )
            if i == 0 or reencoded:
                cache32.reset()
            with eval_mode(model):
                feed = window if cache32.length == 0 else window[-1:]  # prefill, or the newest token only
                cached32 = model(torch.tensor([feed]), cache=cache32, fast_attention=True).logits[
                    0, -1
                ]  # (V,) as served
                uncached32 = forward_last(model, window)  # (V,) float32
            steps.append(
                ParityStep(
                    step=i,
                    position=step.position,
                    token=step.token,
                    uncached_token=uncached_token,
                    agreement=agreement(step.logits, uncached64, terms=terms),
                    float32=agreement(cached32, uncached32, terms=terms),
                    reencoded=reencoded,
                    context=len(window),
                    window_agrees=step.reencoded == reencoded and step.context == len(window),
                )
            )
            prefix.append(step.token)  # both paths continue from the cached choice
    return ParityTrace(steps=tuple(steps), terms=terms)
