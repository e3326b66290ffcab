"""What one telemetry event is: the Event a surface measures, the `events` table, its migrations, and the row it
becomes, with one table definition for SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass, fields

from sqlalchemy import CheckConstraint, Column, Connection, Float, Index, Integer, MetaData, Table, Text

SURFACES = ("page", "cli", "synthetic")
KINDS = ("suggestion", "completion")
OUTCOMES = ("accepted", "typed_other")
MAX_TEXT_CHARS = 2000  # of the learner's text, when text storage is on
MAX_ERROR_CHARS = 200
MAX_LABEL_CHARS = 200  # slice names, documents

METADATA = MetaData()
EVENTS = Table(
    "events",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("at", Text, nullable=False),
    Column("surface", Text, CheckConstraint("surface IN ('page', 'cli', 'synthetic')"), nullable=False),
    Column("kind", Text, CheckConstraint("kind IN ('suggestion', 'completion')"), nullable=False),
    Column("version", Text, nullable=False),
    Column("predictor", Text),
    Column("policy_version", Integer),
    Column("session", Text),
    Column("prompt_chars", Integer, nullable=False),
    Column("unseen_chars", Integer, nullable=False),
    Column("truncated", Integer, CheckConstraint("truncated IN (0, 1)"), nullable=False),
    Column("prompt_hash", Text, nullable=False),
    Column("text", Text),
    Column("top1_prob", Float),  # FLOAT: 8 bytes on both engines (PostgreSQL's REAL would be 4)
    Column("entropy_nats", Float),
    Column("suggestion_chars", Integer),
    Column("shown", Integer, CheckConstraint("shown IS NULL OR shown IN (0, 1)")),
    Column("latency_ms", Float, nullable=False),
    Column("error", Text),
    Column("outcome", Text, CheckConstraint("outcome IS NULL OR outcome IN ('accepted', 'typed_other')")),
    Column("char_class", Text),
    Column("column_bucket", Text),
    Column("indent", Text),
    Column("document", Text),
    Index("events_by_version", "version", "at"),
)
META = Table(  # the database's own values: its salt
    "meta", METADATA, Column("key", Text, primary_key=True), Column("value", Text, nullable=False)
)


def _create(conn: Connection) -> None:
    """Schema 0 -> 1: the tables as defined above, and this database's salt (see the telemetry store)."""
    METADATA.create_all(conn)
    conn.execute(META.insert().values(key="salt", value=secrets.token_hex(16)))


# MIGRATIONS[i]: schema i -> i + 1 inside one transaction (core.database.Database.migrate); the version is its length.
# A later schema changes the Table above and adds a step written for the tables as they were.
MIGRATIONS: tuple[Callable[[Connection], None], ...] = (_create,)

COLUMNS = [c.name for c in EVENTS.columns]  # in table order


@dataclass(frozen=True)
class Event:
    """One served request, as the telemetry record measures it (the store adds id, time and hashes)."""

    surface: str  # SURFACES
    kind: str  # KINDS
    version: str  # the bundle's version (hash)
    text: str  # the prompt as typed: hashed; stored only with LAB_TELEMETRY_STORE_TEXT=1
    prompt_chars: int
    unseen_chars: int  # characters the model reads that are outside its vocabulary (read as <unk>)
    truncated: bool  # the prompt was longer than the context the model reads
    latency_ms: float
    predictor: str | None = None  # "transformer", "ngram", "rule"
    policy_version: int | None = None
    session: str | None = None  # an opaque id (stored salted and hashed)
    top1_prob: float | None = None  # of the next-character distribution
    entropy_nats: float | None = None
    suggestion_chars: int | None = None
    shown: bool | None = None  # the suggestion clears the threshold
    error: str | None = None
    outcome: str | None = None  # OUTCOMES, when known at once (synthetic traffic)
    char_class: str | None = None  # the evaluation's slices of the position (core.release.evaluation.slices)
    column_bucket: str | None = None
    indent: str | None = None
    document: str | None = None


def event_row(event: Event, hash_text: Callable[[str], str], store_text: bool) -> dict:
    """The values of the events row for `event` (every column but id), checked and bounded; `hash_text` is the
    store's salted hash. ValueError for an event no surface should make."""
    if not isinstance(event, Event):
        raise ValueError(f"record() takes an Event, got {type(event).__name__}")
    if event.surface not in SURFACES or event.kind not in KINDS:
        raise ValueError(
            f"surface must be one of {SURFACES} and kind one of {KINDS}, got {event.surface!r}, {event.kind!r}"
        )
    if event.outcome is not None and event.outcome not in OUTCOMES:
        raise ValueError(f"outcome must be None or one of {OUTCOMES}, got {event.outcome!r}")
    if not isinstance(event.text, str):
        raise ValueError(f"text must be a str, got {type(event.text).__name__}")
    row = {f.name: getattr(event, f.name) for f in fields(Event)}
    row.update(
        at=_now(),
        version=label(event.version, 64),
        predictor=label(event.predictor, 32),
        policy_version=None if event.policy_version is None else int(event.policy_version),
        session=None if event.session is None else hash_text("session:" + str(event.session))[:16],
        prompt_chars=int(event.prompt_chars),
        unseen_chars=int(event.unseen_chars),
        truncated=int(bool(event.truncated)),
        prompt_hash=hash_text(event.text),
        text=event.text[-MAX_TEXT_CHARS:] if store_text else None,
        top1_prob=_real(event.top1_prob),
        entropy_nats=_real(event.entropy_nats),
        suggestion_chars=None if event.suggestion_chars is None else int(event.suggestion_chars),
        shown=None if event.shown is None else int(bool(event.shown)),
        latency_ms=_real(event.latency_ms) or 0.0,
        error=label(event.error, MAX_ERROR_CHARS),
        **{k: label(getattr(event, k)) for k in ("char_class", "column_bucket", "indent", "document")},
    )
    return row


def label(value: object, limit: int = MAX_LABEL_CHARS) -> str | None:
    """A text column's value: str, at most `limit` characters (None stays None)."""
    return None if value is None else str(value)[:limit]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def _real(value: object) -> float | None:
    """A finite float, else None: a NaN never reaches the database."""
    if value is None or isinstance(value, bool):
        return None
    number = float(value)  # type: ignore[arg-type]
    return number if math.isfinite(number) else None
