"""Domain autocomplete with the from-scratch transformer: prompt, candidates, completion, parity.

Everything here is built on `core.model.sampling`, so the numbers the app shows are the ones generation uses:

    prepare_prompt        text -> the ids the model sees, and what happened on the way: characters the
                          vocabulary lacks (they become <unk>), a prompt longer than the context (only
                          its last context_length tokens are kept), an empty prompt (the model starts
                          from <eos>, a document start: core.model.sampling.start_ids)
    next_token_candidates the top k of core.model.sampling.next_token_distribution: exactly what a sampler
                          draws the next token from (temperature, then top-k, then top-p)
    complete              a streamed completion with each token's wall-clock time and position
    measure_cache_latency per-token time with the KV cache and without it at a window where the cache
                          matters: a warm-up run, then the median of several repeats
    parity_trace          at every step of a cached generation, |cached - uncached| logits decided in float64
                          (core.agreement), the float32 figure beside it, and whether the two would have
                          chosen a different token
    suggest               the completion up to the end of the next word: what an editor would offer

A character tokenizer maps one character to one token, so "the last N tokens" of a prompt are its
last N characters. Shapes use the legend of `core/__init__.py`: T positions, V vocabulary size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from core.agreement import Agreement, agreement, float64_copy, model_terms
from core.model.bundle import DEFAULT_PROMPT_TEMPLATE, Bundle
from core.model.gpt import ModelConfig
from core.model.kv_cache import default_keep, next_window_start
from core.model.sampling import (
    NEVER_SAMPLED,
    SampleConfig,
    check_seed,
    generate,
    next_token_distribution,
    sample_next_token,
    start_ids,
)
from core.model.tokenizer import EOS_ID, SPECIAL_TOKENS, CharTokenizer

SUGGESTION_MAX_CHARS = 40


# ---- the prompt ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    text: str  # what the user typed
    model_text: str  # after the bundle's prompt template
    ids: tuple[int, ...]  # (T,) what the model sees: the last context_length tokens, or (<eos>,) if empty
    pieces: tuple[str, ...]  # (T,) each id made visible: '␣' for a space, '↵' for a newline, '<unk>', '<bos>'
    unknown_chars: tuple[str, ...]  # distinct characters of the kept text outside the vocabulary
    n_tokens: int  # tokens of model_text before the cut
    context_length: int

    @property
    def empty(self) -> bool:
        """Nothing to encode: the model starts from <eos>, a document start (core.model.sampling.start_ids)."""
        return self.n_tokens == 0

    @property
    def truncated(self) -> bool:
        return self.n_tokens > self.context_length

    @property
    def dropped(self) -> int:
        """Tokens (= characters) cut from the front of the prompt."""
        return max(0, self.n_tokens - self.context_length)


def prepare_prompt(
    source: Bundle | CharTokenizer, text: str, config: ModelConfig | None = None, *, template: str | None = None
) -> Prompt:
    """Encode `text` for a bundle, or for a tokenizer and the ModelConfig of its model.

    The bundle's prompt_template is applied (a tokenizer alone uses "{prompt}", or `template`).
    """
    if isinstance(source, Bundle):
        tokenizer, config = source.tokenizer, source.config
        template = source.manifest["prompt_template"] if template is None else template
    elif isinstance(source, CharTokenizer):
        tokenizer = source
        if not isinstance(config, ModelConfig):
            raise ValueError(f"with a tokenizer, pass the model's ModelConfig too, got {type(config).__name__}")
        template = DEFAULT_PROMPT_TEMPLATE if template is None else template
    else:
        raise ValueError(f"source must be a Bundle or a CharTokenizer, got {type(source).__name__}")
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if not isinstance(template, str) or "{prompt}" not in template:
        raise ValueError(f"template must be a str containing '{{prompt}}', got {template!r}")
    L = config.context_length
    model_text = template.replace("{prompt}", text)
    all_ids = tokenizer.encode(model_text)  # (N,) one id per character
    kept = all_ids[-L:]  # (min(N, L),)
    kept_text = model_text[len(model_text) - len(kept) :]  # one character per token
    ids = tuple(start_ids(kept))
    return Prompt(
        text=text,
        model_text=model_text,
        ids=ids,
        pieces=tuple(tokenizer.display_piece(i) for i in ids),
        unknown_chars=tuple(tokenizer.unknown_chars(kept_text)),
        n_tokens=len(all_ids),
        context_length=L,
    )


# ---- the next token ------------------------------------------------------------------------------


def code_point(tokenizer: CharTokenizer, token_id: int) -> str:
    """'U+0020' for a character token, the special token's name for the others: unambiguous in any font."""
    piece = tokenizer.pieces[token_id]
    return piece if token_id < len(SPECIAL_TOKENS) else f"U+{ord(piece):04X}"


class Candidate(NamedTuple):
    id: int
    piece: str  # visible piece (tokenizer.display_piece), or 'id N' without a tokenizer
    prob: float  # probability under the sampling distribution


def _window(model: torch.nn.Module, ids: Sequence[int]) -> list[int]:
    """The ids the model sees for the next token: the last context_length of them, <eos> if none."""
    ids = start_ids(ids)
    V, L = model.config.vocab_size, model.config.context_length
    if min(ids) < 0 or max(ids) >= V:
        raise ValueError(f"ids must lie in 0..{V - 1}, got min {min(ids)}, max {max(ids)}")
    return ids[-L:]


@contextlib.contextmanager
def _eval_mode(model: torch.nn.Module):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _forward_last(model: torch.nn.Module, window: list[int]) -> Tensor:
    """Uncached logits (V,) after `window`, recomputed from scratch."""
    device = next(model.parameters()).device
    return model(torch.tensor([window], device=device)).logits[0, -1]  # (1, T, V) -> (V,)


def next_token_logits(model: torch.nn.Module, ids: Sequence[int]) -> Tensor:
    """The model's logits (V,) for the token after `ids` (cut to the context; empty -> <eos>)."""
    window = _window(model, ids)
    with _eval_mode(model):
        return _forward_last(model, window)  # (V,)


def next_token_candidates(
    model: torch.nn.Module,
    ids: Sequence[int],
    sample: SampleConfig,
    k: int | None = 10,
    *,
    tokenizer: CharTokenizer | None = None,
) -> list[Candidate]:
    """The k most likely next tokens under core.model.sampling.next_token_distribution, most likely first.

    k=None (or k >= V) lists the whole vocabulary, whose probabilities sum to one. Ties are listed
    in id order. <pad>, <bos> and <unk> have probability 0, as in generation (core.model.sampling.NEVER_SAMPLED).
    sample.max_new_tokens is not used.
    """
    if not isinstance(sample, SampleConfig):
        raise ValueError(f"sample must be a SampleConfig, got {type(sample).__name__}")
    V = model.config.vocab_size
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k must be None or an integer >= 1, got {k!r}")
    logits = next_token_logits(model, ids)  # (V,)
    probs = next_token_distribution(
        logits, sample.temperature, sample.top_k, sample.top_p, suppress=NEVER_SAMPLED
    ).tolist()  # V floats
    order = sorted(range(V), key=lambda i: (-probs[i], i))[: V if k is None else min(k, V)]
    piece = tokenizer.display_piece if tokenizer is not None else (lambda i: f"id {i}")
    return [Candidate(i, piece(i), probs[i]) for i in order]


# ---- completion and its latency -----------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    text: str  # decoded tokens (generation never draws <pad>, <bos> or <unk>: core.model.sampling.NEVER_SAMPLED)
    tokens: tuple[int, ...]  # new ids, without a final <eos>
    per_token_seconds: tuple[float, ...]  # wall clock of each step (forward pass + sampling)
    positions: tuple[int, ...]  # index of each new token in prompt + generated tokens
    reencoded_steps: tuple[int, ...]  # steps at which the window slid (cache reset, last `keep` re-encoded)
    use_cache: bool
    stop_reason: str  # "eos" (the model ended the text) or "length" (max_new_tokens reached)

    @property
    def mean_ms_per_token(self) -> float | None:
        """Mean step time in milliseconds; None when no token was generated."""
        s = self.per_token_seconds
        return 1000 * math.fsum(s) / len(s) if s else None


def complete(
    model: torch.nn.Module,
    tokenizer: CharTokenizer,
    ids: Sequence[int],
    sample: SampleConfig,
    *,
    seed: int | None = 0,
    use_cache: bool = True,
    keep: int | None = None,
    stop_at_eos: bool = True,
) -> Completion:
    """Up to sample.max_new_tokens tokens after `ids` through core.model.sampling.generate.

    The same seed gives the same completion. With stop_at_eos the completion ends before <eos>.
    """
    tokens, seconds, positions, reencoded = [], [], [], []
    stop_reason = "length"
    for step in generate(model, ids, sample, seed=seed, use_cache=use_cache, keep=keep):
        if stop_at_eos and step.token == EOS_ID:
            stop_reason = "eos"
            break
        if step.reencoded:
            reencoded.append(len(tokens))
        tokens.append(step.token)
        seconds.append(step.seconds)
        positions.append(step.position)
    return Completion(
        text=tokenizer.decode(tokens),
        tokens=tuple(tokens),
        per_token_seconds=tuple(seconds),
        positions=tuple(positions),
        reencoded_steps=tuple(reencoded),
        use_cache=use_cache,
        stop_reason=stop_reason,
    )


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
    def _per_step_ms(runs) -> tuple[float, ...]:
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
    model: torch.nn.Module,
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
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    prompt_tokens = max(1, L - new_tokens) if prompt_tokens is None else prompt_tokens
    longest = L - new_tokens + 1  # the last step then reads exactly L tokens: the window never slides
    if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int) or not 1 <= prompt_tokens <= longest:
        raise ValueError(
            f"prompt_tokens must be an integer in 1..{longest} (context_length {L} - new_tokens "
            f"{new_tokens} + 1, so the window never slides), got {prompt_tokens!r}"
        )
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(len(SPECIAL_TOKENS), V, (prompt_tokens,), generator=g).tolist()  # character ids
    greedy = SampleConfig(temperature=0.0, max_new_tokens=new_tokens)

    def run(use_cache: bool) -> tuple[float, ...]:
        seconds = []
        before = clock()
        for _ in generate(model, prompt, greedy, use_cache=use_cache):
            after = clock()
            seconds.append(after - before)
            before = after
        return tuple(seconds)

    for _ in range(warmup):
        run(True), run(False)
    cached, uncached = [], []
    for _ in range(repeats):
        cached.append(run(True))
        uncached.append(run(False))
    return CacheTiming(
        prompt_tokens=prompt_tokens,
        positions=tuple(range(prompt_tokens, prompt_tokens + new_tokens)),
        cached_seconds=tuple(cached),
        uncached_seconds=tuple(uncached),
        warmup=warmup,
        threads=torch.get_num_threads(),
    )


# ---- cached / uncached parity -------------------------------------------------------------------


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
    model: torch.nn.Module,
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
    model64 = float64_copy(model)
    cache32 = model.new_cache(batch_size=1)  # the float32 figure walks the same windows through its own cache
    prefix = start_ids(ids)
    start = max(0, len(prefix) - L)  # the window is prefix[start:], as in generate
    steps = []
    cached = generate(model64, prefix, run, generator=generator, use_cache=True, keep=keep)
    with contextlib.closing(cached):
        for i in range(n_steps):
            state = generator.get_state()  # before this step's draw
            step = next(cached)
            new_start = next_window_start(len(prefix), start, L, keep)
            reencoded, start = new_start != start, new_start
            window = prefix[start:]
            with _eval_mode(model64):
                uncached64 = _forward_last(model64, window)  # (V,) float64, from scratch
            replay = None if sample.greedy else torch.Generator().set_state(state)
            uncached_token = int(
                sample_next_token(
                    uncached64, replay, sample.temperature, sample.top_k, sample.top_p, suppress=NEVER_SAMPLED
                )
            )
            if i == 0 or reencoded:
                cache32.reset()
            with _eval_mode(model):
                feed = window if cache32.length == 0 else window[-1:]  # prefill, or the newest token only
                cached32 = model(torch.tensor([feed]), cache=cache32).logits[0, -1]  # (V,) float32
                uncached32 = _forward_last(model, window)  # (V,) float32
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


# ---- the suggestion -----------------------------------------------------------------------------


def is_word_char(c: str) -> bool:
    """Letters, digits and '_' make words; every other character is a boundary."""
    return c.isalnum() or c == "_"


def cut_suggestion(generated: str) -> tuple[str, str | None]:
    """(suggestion, why it ended) for generated text; why is None while the word is still open.

    The suggestion keeps leading non-word characters (so after 'import' it is ' os', with its space),
    then the word; it ends before the first boundary character (space, punctuation) after a word
    character ("word boundary"), or before any newline ("end of line": a suggestion stays on its line).
    """
    seen_word = False
    for i, c in enumerate(generated):
        if c in "\r\n":
            return generated[:i], "end of line"
        if is_word_char(c):
            seen_word = True
        elif seen_word:
            return generated[:i], "word boundary"
    return generated, None


@dataclass(frozen=True)
class Suggestion:
    text: str  # what the user would accept
    stop_reason: str  # "word boundary", "end of line", "eos" or "limit"
    generated: str  # every character generated, including the one that ended the suggestion
    prompt: Prompt


def suggest(
    model: torch.nn.Module,
    tokenizer: CharTokenizer,
    text: str,
    sample: SampleConfig | None = None,
    *,
    seed: int | None = 0,
    use_cache: bool = True,
    max_chars: int = SUGGESTION_MAX_CHARS,
    template: str = DEFAULT_PROMPT_TEMPLATE,
) -> Suggestion:
    """Complete `text` up to the end of the next word (see cut_suggestion); greedy unless `sample` says so.

    Generation stops as soon as the suggestion is decided, at <eos>, or after max_chars characters.
    With the same sample and seed the suggestion is a prefix of `complete`'s completion.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ValueError(f"max_chars must be an integer >= 1, got {max_chars!r}")
    sample = SampleConfig(temperature=0.0) if sample is None else sample
    prompt = prepare_prompt(tokenizer, text, model.config, template=template)
    generated = ""
    steps = generate(
        model, prompt.ids, dataclasses.replace(sample, max_new_tokens=max_chars), seed=seed, use_cache=use_cache
    )
    with contextlib.closing(steps):
        for step in steps:
            if step.token == EOS_ID:
                return Suggestion(cut_suggestion(generated)[0], "eos", generated, prompt)
            generated += tokenizer.decode([step.token])
            suggestion, why = cut_suggestion(generated)
            if why is not None:
                return Suggestion(suggestion, why, generated, prompt)
    return Suggestion(generated, "limit", generated, prompt)


# ---- serving a baseline ------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineSuggestion:
    candidates: tuple[Candidate, ...]  # the k most likely next characters, most likely first
    suggestion: str  # the predictor's word completion of the text


def baseline_suggestion(predictor, text: str, k: int = 10) -> BaselineSuggestion:
    """Next-character candidates and the word suggestion of any core.release.baselines.Predictor (the n-gram the
    registry falls back to): what the service still offers when no transformer version loads."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    tok = predictor.tokenizer
    ids = start_ids(tok.encode(text))
    # log_probs row t is the distribution of ids[t] given ids[:t]: ask for the slot after the text.
    probs = predictor.log_probs(ids + [EOS_ID], range(len(ids), len(ids) + 1))[0].exp()  # (V,)
    top = torch.topk(probs, min(k, probs.numel()))
    candidates = tuple(Candidate(int(i), tok.display_piece(int(i)), float(p)) for p, i in zip(top.values, top.indices))
    return BaselineSuggestion(candidates, tok.decode(predictor.suggest(ids)))
