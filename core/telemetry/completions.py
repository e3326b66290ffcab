"""Completions, measured and recorded: the generated text a surface shows, as one telemetry event each.

Recording never changes what is served, and a prompt already encoded by its surface is not encoded again. Shapes:
V vocabulary size.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator

import torch.nn.functional as F
from torch import Tensor

from core.model.bundle import DEFAULT_PROMPT_TEMPLATE
from core.model.engine import next_token_logits
from core.model.gpt import GPT
from core.model.prompt import Prompt, encode_for_model, start_ids
from core.model.sampling import SampleConfig
from core.model.tokenizer import EOS_ID, CharTokenizer
from core.release.serving.autocomplete import distribution_figures
from core.release.serving.completion import Completion, complete
from core.telemetry.record import error_text, safe_slices
from core.telemetry.schema import Event
from core.telemetry.store import TelemetryStore


class CompletionRecorder:
    """Collects a streamed generation's steps (see recording_completion)."""

    def __init__(self) -> None:
        self.tokens = 0
        self.first_logits: Tensor | None = None  # (V,)

    def step(self, step) -> None:
        """One `GenerationStep` that was served (an <eos> that ends it included)."""
        if self.first_logits is None:
            self.first_logits = step.logits  # (V,)
        self.tokens += step.token != EOS_ID


@contextlib.contextmanager
def recording_completion(
    tokenizer: CharTokenizer,
    context_length: int,
    text: str,
    *,
    template: str = DEFAULT_PROMPT_TEMPLATE,
    version: str,
    surface: str,
    session: str | None = None,
    store: TelemetryStore | None = None,
) -> Iterator[CompletionRecorder]:
    """Time the block that streams a completion after `text`; record one completion event when it ends (an
    exception in it is recorded with the event and raised again)."""
    recorder = CompletionRecorder()
    began = time.perf_counter()
    error: str | None = None
    try:
        yield recorder
    except Exception as e:
        error = error_text(e)
        raise
    finally:
        latency_ms = 1000 * (time.perf_counter() - began)
        if store is not None:
            probs = None if recorder.first_logits is None else F.softmax(recorder.first_logits.double(), dim=-1)
            store.record(
                _completion_event(
                    text_quality(tokenizer, text, template, context_length),
                    text,
                    probs,
                    recorder.tokens,
                    latency_ms,
                    error,
                    version,
                    surface,
                    session,
                )  # fmt: skip
            )


def served_completion(
    model: GPT,
    tokenizer: CharTokenizer,
    text: str,
    sample: SampleConfig,
    *,
    template: str = DEFAULT_PROMPT_TEMPLATE,
    seed: int | None = 0,
    use_cache: bool = True,
    version: str,
    surface: str,
    session: str | None = None,
    store: TelemetryStore | None = None,
) -> tuple[Completion, int | None]:
    """The served completion (`complete`) after `text` (templated), timed and recorded; the first step's
    distribution comes from one more forward pass (`next_token_logits`, what generation's
    first step computes)."""
    ids = tokenizer.encode(template.replace("{prompt}", text))
    began = time.perf_counter()
    try:
        done = complete(model, tokenizer, ids, sample, seed=seed, use_cache=use_cache)
    except Exception as e:
        if store is not None:
            latency_ms = 1000 * (time.perf_counter() - began)
            store.record(
                _completion_event(
                    text_quality(tokenizer, text, template, model.config.context_length),
                    text,
                    None,
                    0,
                    latency_ms,
                    error_text(e),
                    version,
                    surface,
                    session,
                )  # fmt: skip
            )
        raise
    latency_ms = 1000 * (time.perf_counter() - began)
    if store is None:
        return done, None
    probs = F.softmax(next_token_logits(model, start_ids(ids)).double(), dim=-1)  # (V,)
    quality = text_quality(tokenizer, text, template, model.config.context_length)
    event = _completion_event(quality, text, probs, len(done.tokens), latency_ms, None, version, surface, session)
    return done, store.record(event)


def record_completion(
    store: TelemetryStore,
    model: GPT,
    prompt: Prompt,
    done: Completion,
    latency_ms: float,
    *,
    version: str,
    surface: str,
    session: str | None = None,
) -> int | None:
    """Record `done`, a completion after `prompt` (the prompt's ids: what the
    completion read) that a surface showed after waiting `latency_ms` for it (a cached one: the lookup); the first
    step's distribution from one forward pass over those ids, as served_completion's. The input quality is the
    prompt's own: nothing is encoded again."""
    try:
        probs = F.softmax(next_token_logits(model, list(prompt.ids)).double(), dim=-1)  # (V,)
    except Exception as e:  # noqa: BLE001 - recording never changes what is served
        store.report_failure(e)
        return None
    quality = (len(prompt.text), prompt.unseen, prompt.truncated)
    event = _completion_event(
        quality, prompt.text, probs, len(done.tokens), latency_ms, None, version, surface, session
    )  # fmt: skip
    return store.record(event)


def text_quality(tokenizer: CharTokenizer, text: str, template: str, context_length: int) -> tuple[int, int, bool]:
    """(characters typed, unseen characters the model reads, truncated) for `text` after `template`, read with the
    whole context (a streamed completion's first step); (len(text), 0, False) when the text or template is unusable
    (serving says so already)."""
    try:
        prompt = encode_for_model(tokenizer, text, context_length, template=template)  # (T,)
    except Exception:  # noqa: BLE001 - recording never changes what is served
        return (len(text) if isinstance(text, str) else 0), 0, False
    return len(text), prompt.unseen, prompt.truncated


def _completion_event(quality, text, probs, tokens, latency_ms, error, version, surface, session) -> Event:
    chars, unseen, truncated = quality
    top1, entropy = distribution_figures(probs) if probs is not None else (None, None)
    where = safe_slices(text)
    return Event(
        surface=surface,
        kind="completion",
        version=version,
        text=text if isinstance(text, str) else "",
        prompt_chars=chars,
        unseen_chars=unseen,
        truncated=truncated,
        latency_ms=latency_ms if math.isfinite(latency_ms) else 0.0,
        predictor="transformer",
        session=session,
        top1_prob=top1,
        entropy_nats=entropy,
        suggestion_chars=tokens,
        error=error,
        column_bucket=where.get("column_bucket"),
        indent=where.get("indent"),
    )
