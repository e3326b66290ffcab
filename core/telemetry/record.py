"""Serving, measured and recorded: what every surface calls instead of serving directly.

    served_suggestion(predictor, text, policy, ...)  core.release.serving.autocomplete.serve_suggestion, timed, with the
                                  input quality and the next-character distribution's top-1 probability and
                                  entropy, recorded in the telemetry store -> (Suggestion, event id or None)
    measure_suggestion(...)       the same without a store -> (Suggestion, Observation, error): the traffic
                                  replay and its release-time reference go through it
    outcome(suggestion_text, text_before, text_after)  'accepted', 'typed_other', or None while undecided
    position_slices(text)         the evaluation's column and indent slices of the cursor after `text`

The distribution is read where serving already computes it: the first (B, V) float64 row the predictor's
`continuations` yields (its P(next | context), the row the suggestion's first character is chosen from), tapped
on its way through, so recording costs no second forward pass. Completions: core.telemetry.completions.

Recording never changes what is served: a telemetry failure returns an event id of None (the store counts it).
An error in serving is recorded (its class name and message) and raised again, as before. Latency is the
wall clock of serving alone (time.perf_counter), not of the measuring around it. Shapes: V vocabulary size.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from core.model.bundle import DEFAULT_PROMPT_TEMPLATE
from core.model.corpus import Document
from core.model.gpt import GPT
from core.model.prompt import encode_for_model
from core.model.tokenizer import CharTokenizer
from core.release.evaluation.slices import char_class, slice_labels
from core.release.evaluation.typing_sim import MAX_CONTEXT
from core.release.serving.autocomplete import serve_suggestion
from core.release.serving.policy import Suggestion, SuggestionPolicy
from core.release.serving.predictor import Predictor
from core.telemetry.store import MAX_ERROR_CHARS, Event, TelemetryStore


@dataclass(frozen=True)
class Observation:
    """One served request as measured: input quality, the next-character distribution, latency, error."""

    prompt_chars: int  # characters typed (before the prompt template)
    unseen_chars: int  # characters the model reads that its vocabulary lacks (read as <unk>)
    truncated: bool  # the templated prompt was longer than the context the model reads
    top1_prob: float | None  # max of P(next | text), float64
    entropy_nats: float | None  # -sum p ln p of the same row
    latency_ms: float
    error: str | None = None


def distribution_figures(probs: Tensor) -> tuple[float, float]:
    """(top-1 probability, entropy in nats) of one next-token distribution (V,), in float64."""
    p = probs.detach().to(torch.float64).reshape(-1)  # (V,)
    nonzero = p[p > 0]
    return float(p.max()), float(-(nonzero * nonzero.log()).sum())


def input_quality(tokenizer: CharTokenizer, text: str, template: str, context_length: int) -> tuple[int, int, bool]:
    """(characters typed, unseen characters the model reads, truncated) for `text` after `template`."""
    encoded = encode_for_model(tokenizer, template.replace("{prompt}", text), context_length)  # (T,)
    return len(text), len(encoded.unknown_positions), encoded.truncated


def context_of(predictor: Predictor) -> int:
    """Tokens the predictor reads: a transformer's context length, else the evaluation's MAX_CONTEXT."""
    model = getattr(predictor, "model", None)
    return int(model.config.context_length) if isinstance(model, GPT) else MAX_CONTEXT


def position_slices(text: str) -> dict[str, str]:
    """column_bucket and indent of the cursor after `text`, as core.release.evaluation.slices.slice_labels labels the
    next character's position: its line so far, followed by a placeholder character (its class is unknown until
    the learner types it; `outcome` time gives it)."""
    line = text.rsplit("\n", 1)[-1]
    labels = slice_labels([Document("", line + "x")])  # the placeholder is the last position of the line
    return {"column_bucket": str(labels["column"][len(line)]), "indent": str(labels["indent"][len(line)])}


def outcome(suggestion_text: str, text_before: str, text_after: str) -> str | None:
    """What became of a suggestion made after `text_before`, now that the text is `text_after`: 'accepted' when
    it goes on with the whole suggestion, None while what was typed since is a strict prefix of it (undecided),
    'typed_other' when it diverges (or was edited before the cursor)."""
    if not suggestion_text:
        return None
    if not text_after.startswith(text_before):
        return "typed_other"
    typed = text_after[len(text_before) :]
    if typed.startswith(suggestion_text):
        return "accepted"
    return None if suggestion_text.startswith(typed) else "typed_other"


def next_char_class(text_before: str, text_after: str) -> str | None:
    """The char_class slice of the first character typed after `text_before` (None if none yet)."""
    if not text_after.startswith(text_before) or len(text_after) == len(text_before):
        return None
    return char_class(text_after[len(text_before)])


class _FirstRow:
    """A predictor passed through unchanged, keeping the first row its `continuations` yields."""

    def __init__(self, inner: Predictor):
        self.inner, self.kind, self.tokenizer = inner, inner.kind, inner.tokenizer
        self.first: Tensor | None = None

    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor:
        return self.inner.log_probs(ids, positions)

    def reads(self, max_new: int) -> int:
        return self.inner.reads(max_new)

    def continuations(self, contexts: Sequence[Sequence[int]], max_new: int) -> Generator[Tensor, Tensor, None]:
        steps = self.inner.continuations(contexts, max_new)
        try:
            rows = next(steps)  # (B, V) float64
            self.first = rows[0]  # (V,)
            while True:
                tokens = yield rows
                rows = steps.send(tokens)
        except StopIteration:
            return
        finally:
            steps.close()


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:MAX_ERROR_CHARS]


def measure_suggestion(
    predictor: Predictor, text: str, policy: SuggestionPolicy, *, template: str = DEFAULT_PROMPT_TEMPLATE
) -> tuple[Suggestion | None, Observation, Exception | None]:
    """serve_suggestion(predictor, text, policy, template=template), measured: (the suggestion, what was
    observed, None), or (None, the observation naming the error, the error) when serving raised."""
    tap = _FirstRow(predictor)
    began = time.perf_counter()
    served: Suggestion | None = None
    error: Exception | None = None
    try:
        served = serve_suggestion(tap, text, policy, template=template)
    except Exception as e:  # noqa: BLE001 - recorded, then raised again
        error = e
    latency_ms = 1000 * (time.perf_counter() - began)
    try:
        chars, unseen, truncated = input_quality(predictor.tokenizer, text, template, context_of(predictor))
    except Exception:  # noqa: BLE001 - the text or template was unusable: serving says so already
        chars, unseen, truncated = len(text) if isinstance(text, str) else 0, 0, False
    top1, entropy = distribution_figures(tap.first) if tap.first is not None else (None, None)
    why = None if error is None else error_text(error)
    seen = Observation(chars, unseen, truncated, top1, entropy, latency_ms, why)
    return served, seen, error


def served_suggestion(
    predictor: Predictor,
    text: str,
    policy: SuggestionPolicy,
    *,
    template: str = DEFAULT_PROMPT_TEMPLATE,
    version: str,
    surface: str,
    session: str | None = None,
    store: TelemetryStore | None = None,
    slices: Mapping[str, str | None] | None = None,
    typed_next: str | None = None,
) -> tuple[Suggestion, int | None]:
    """The suggestion serve_suggestion gives, and the id of its telemetry event (None: not recorded). `slices`:
    the position's slice labels when known (synthetic traffic), else derived from the text (position_slices);
    `typed_next`: the characters typed after `text`, when known (synthetic traffic), decide the outcome at
    once. An error in serving is recorded, then raised."""
    served, seen, error = measure_suggestion(predictor, text, policy, template=template)
    event_id = None
    if store is not None:
        try:
            event = suggestion_event(
                predictor, text, policy, seen, served, version=version, surface=surface, session=session,
                slices=slices, typed_next=typed_next,
            )  # fmt: skip
        except Exception as e:  # noqa: BLE001 - a bad label never breaks serving: counted by the store
            store.report_failure(e)
        else:
            event_id = store.record(event)
    if error is not None:
        raise error
    assert served is not None
    return served, event_id


def suggestion_event(
    predictor: Predictor,
    text: str,
    policy: SuggestionPolicy,
    seen: Observation,
    served: Suggestion | None,
    *,
    version: str,
    surface: str,
    session: str | None = None,
    slices: Mapping[str, str | None] | None = None,
    typed_next: str | None = None,
) -> Event:
    """The telemetry event of one measured suggestion (see served_suggestion)."""
    where = dict(slices) if slices is not None else safe_slices(text)
    decided = None
    if served is not None and typed_next is not None and isinstance(text, str):
        decided = outcome(served.text, text, text + typed_next[: len(served.text)])
    return Event(
        surface=surface,
        kind="suggestion",
        version=version,
        text=text if isinstance(text, str) else "",
        prompt_chars=seen.prompt_chars,
        unseen_chars=seen.unseen_chars,
        truncated=seen.truncated,
        latency_ms=seen.latency_ms,
        predictor=getattr(predictor, "kind", None),
        policy_version=policy.version,
        session=session,
        top1_prob=seen.top1_prob,
        entropy_nats=seen.entropy_nats,
        suggestion_chars=None if served is None else len(served.text),
        shown=None if served is None else served.shown,
        error=seen.error,
        outcome=decided,
        char_class=where.get("char_class"),
        column_bucket=where.get("column_bucket"),
        indent=where.get("indent"),
        document=where.get("document"),
    )


def safe_slices(text: object) -> dict[str, str | None]:
    try:
        return dict(position_slices(text)) if isinstance(text, str) else {}
    except Exception:  # noqa: BLE001 - slices are a figure, never a reason to fail
        return {}
