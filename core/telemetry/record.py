"""Serving, recorded: what every surface writes to the telemetry store after the one serving call.

Telemetry observes the serving call, it does not wrap it: the prompt is encoded once, and the distribution recorded
is the one the suggestion was chosen from. Recording never changes what is served: a telemetry failure only
returns no event id, and an error in serving is recorded, then raised again by the caller. Shapes: V vocabulary size.
"""

from __future__ import annotations

from collections.abc import Mapping

from core.model.corpus import Document
from core.release.evaluation.slices import char_class, slice_labels
from core.release.serving.autocomplete import MeasuredSuggestion
from core.telemetry.schema import MAX_ERROR_CHARS, Event
from core.telemetry.store import TelemetryStore


def position_slices(text: str) -> dict[str, str]:
    """column_bucket and indent of the cursor after `text`, as the evaluation's `slice_labels` labels the
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


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:MAX_ERROR_CHARS]


def record_suggestion(
    store: TelemetryStore,
    measured: MeasuredSuggestion,
    *,
    version: str,
    surface: str,
    session: str | None = None,
    slices: Mapping[str, str | None] | None = None,
    typed_next: str | None = None,
) -> int | None:
    """Record one measured suggestion (`suggest`) as a telemetry event: its id, or
    None when it was not recorded (a failure is counted by the store, never raised). `slices`: the position's slice
    labels when known (synthetic traffic), else derived from the text (position_slices); `typed_next`: the
    characters typed after the text, when known (synthetic traffic), decide the outcome at once."""
    try:
        event = suggestion_event(
            measured, version=version, surface=surface, session=session, slices=slices, typed_next=typed_next
        )
    except Exception as e:  # noqa: BLE001 - a bad label never breaks serving: counted by the store
        store.report_failure(e)
        return None
    return store.record(event)


def suggestion_event(
    measured: MeasuredSuggestion,
    *,
    version: str,
    surface: str,
    session: str | None = None,
    slices: Mapping[str, str | None] | None = None,
    typed_next: str | None = None,
) -> Event:
    """The telemetry event of one measured suggestion (see record_suggestion)."""
    prompt, served = measured.prompt, measured.suggestion
    text = prompt.text
    where = dict(slices) if slices is not None else safe_slices(text)
    decided = None
    if served is not None and typed_next is not None:
        decided = outcome(served.text, text, text + typed_next[: len(served.text)])
    return Event(
        surface=surface,
        kind="suggestion",
        version=version,
        text=text,
        prompt_chars=len(text),
        unseen_chars=prompt.unseen,
        truncated=prompt.truncated,
        latency_ms=measured.latency_ms,
        predictor=measured.predictor,
        policy_version=measured.policy.version,
        session=session,
        top1_prob=measured.top1_prob,
        entropy_nats=measured.entropy_nats,
        suggestion_chars=None if served is None else len(served.text),
        shown=None if served is None else served.shown,
        error=None if measured.error is None else error_text(measured.error),
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
