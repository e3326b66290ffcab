"""The telemetry database: every suggestion and completion served, by exact model version (SQLite or PostgreSQL).

Privacy: the learner's text is not stored unless the operator turns it on, only its length and a sha256 over a salt
kept in this database, so equal texts can be counted without a short text being found by dictionary. Never in the
way of serving: a write that fails is counted and reported by `health()`, never raised; reads raise StoreError for
the Monitoring page.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Connection, func, select, update

from core.database import Database, StoreError, location
from core.files import DAMAGED_SQLITE, damaged_sqlite
from core.telemetry import schema
from core.telemetry.schema import (
    COLUMNS,
    EVENTS,
    MAX_ERROR_CHARS,
    META,
    OUTCOMES,
    Event,
    event_row,
    label,
)

ENV = "LAB_TELEMETRY_DB"
DEFAULT_PATH = "telemetry.db"
STORE_TEXT_ENV = "LAB_TELEMETRY_STORE_TEXT"  # "1": keep the learner's text too (default: lengths and hashes only)
MAX_BYTES_ENV = "LAB_TELEMETRY_MAX_BYTES"
DEFAULT_MAX_BYTES = 200 * 2**20  # ~1M events; past it writes are skipped and reported
MAX_BYTES_LIMIT = 2**40
COMPONENT = "telemetry"  # its row in core.database's version table
WRITE_TIMEOUT_MS = 1000  # a write waits this long for another writer's lock (or a server), then gives up (counted)
SIZE_EVERY_S = 10.0  # on a server, the size (LAB_TELEMETRY_MAX_BYTES) is measured at most this often
MAX_READ = 200_000  # events a reader loads at most (the most recent)


T = TypeVar("T")


@dataclass(frozen=True)
class Health:
    path: str
    recorded: int  # writes that succeeded, by this process
    failed: int  # writes that failed (and were dropped)
    skipped: int  # writes skipped because the database reached max_bytes
    last_error: str | None
    notice: str | None  # a damaged file was moved aside
    max_bytes: int
    store_text: bool

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.skipped == 0


def telemetry_path() -> Path:
    """The SQLite file this process records to without LAB_DATABASE_URL: LAB_TELEMETRY_DB, else ./telemetry.db."""
    return Path(os.environ.get(ENV) or DEFAULT_PATH)


def telemetry_location() -> str:
    """Where this process records: LAB_DATABASE_URL when set, else the SQLite path (telemetry_path)."""
    return location(ENV, DEFAULT_PATH)


def store_text_enabled() -> bool:
    return os.environ.get(STORE_TEXT_ENV, "").strip() == "1"


def max_bytes_setting() -> tuple[int, str | None]:
    """LAB_TELEMETRY_MAX_BYTES as an integer in 0..2**40, or the default and why the value was not usable."""
    raw = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES, None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_BYTES_LIMIT:
        return DEFAULT_MAX_BYTES, f"{MAX_BYTES_ENV}={raw[:40]!r} is not a byte count in 0..{MAX_BYTES_LIMIT}"
    return value, None


class TelemetryStore:
    """The telemetry database at `path`: a SQLite file, or a postgresql:// URL (default: LAB_DATABASE_URL, else
    LAB_TELEMETRY_DB, else ./telemetry.db). `path` is the SQLite file, None on a database server. Safe to share
    between threads: every write takes its own pooled connection."""

    def __init__(self, path: str | os.PathLike | None = None):
        self._db = Database(
            path, path_env=ENV, default=DEFAULT_PATH, what="telemetry database", timeout_ms=WRITE_TIMEOUT_MS,
            error=StoreError, fast_writes=True,
        )  # fmt: skip
        self.path = self._db.path
        self.store_text = store_text_enabled()
        self.max_bytes, setting_problem = max_bytes_setting()
        self.notice: str | None = None
        self._ready = False
        self._salt: bytes | None = None
        self._lock = threading.Lock()
        self._counts = {"recorded": 0, "failed": 0, "skipped": 0}
        self._last_error: str | None = setting_problem
        self._size: tuple[float, int] | None = None  # (when measured, bytes) on a server

    # ---- writing: never raises ----------------------------------------------------------------------

    def record(self, event: Event) -> int | None:
        """Keep one event; its id, or None when it could not be written (counted, see health())."""
        try:
            if self._full():
                self._note("skipped", f"the database reached {MAX_BYTES_ENV}={self.max_bytes} bytes; writes skipped")
                return None
            row = event_row(event, self.hash_text, self.store_text)
            with self._transaction(write=True) as conn:
                event_id = conn.execute(EVENTS.insert(), row).inserted_primary_key[0]
            self._note("recorded")
            return int(event_id or 0) or None
        except Exception as e:  # noqa: BLE001 - telemetry never breaks serving: counted and reported instead
            self.report_failure(e)
            return None

    def set_outcome(self, event_id: int, outcome: str, char_class: str | None = None) -> bool:
        """Store an event's outcome (only once: a matured outcome is never changed); the slice char_class of
        the character typed next may be given with it. False only when the write failed (counted)."""
        try:
            if outcome not in OUTCOMES:
                raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
            with self._transaction(write=True) as conn:
                conn.execute(
                    update(EVENTS)
                    .where(EVENTS.c.id == int(event_id), EVENTS.c.outcome.is_(None))
                    .values(outcome=outcome, char_class=func.coalesce(EVENTS.c.char_class, label(char_class)))
                )
            return True
        except Exception as e:  # noqa: BLE001 - as record()
            self.report_failure(e)
            return False

    def health(self) -> Health:
        with self._lock:
            counts, last = dict(self._counts), self._last_error
        return Health(
            self._db.name, **counts, last_error=last, notice=self.notice, max_bytes=self.max_bytes,
            store_text=self.store_text,
        )  # fmt: skip

    # ---- reading: raises StoreError -----------------------------------------------------------------

    def rows(self, limit: int = MAX_READ) -> list[dict]:
        """The most recent `limit` events (at most MAX_READ), oldest first, one dict per event (COLUMNS)."""
        limit = max(0, min(int(limit), MAX_READ))
        query = select(*[EVENTS.c[c] for c in COLUMNS]).order_by(EVENTS.c.id.desc()).limit(limit)
        found: list[tuple] = self._read(lambda conn: [tuple(r) for r in conn.execute(query)], [])
        return [dict(zip(COLUMNS, r)) for r in reversed(found)]

    def stamp(self) -> tuple[int, int, int]:
        """What changes whenever an event is recorded or an outcome matures: (what identifies the tables, the last
        id, the outcomes known); the first is the SQLite file's inode (a damaged file set aside starts a new file),
        on a server the events table's oid. Rows are only inserted, and an outcome is only ever set once
        (set_outcome), so two equal stamps mean the same rows. (0, 0, 0) while nothing is recorded."""

        def read(conn: Connection) -> tuple[int, int, int]:
            last, known = conn.execute(
                select(func.coalesce(func.max(EVENTS.c.id), 0), func.count(EVENTS.c.outcome))
            ).one()
            if not last:
                return (0, 0, 0)
            return (self._db.identity(conn, EVENTS.name), int(last), int(known))

        return self._read(read, (0, 0, 0))

    def count(self) -> int:
        return self._read(lambda conn: int(conn.execute(select(func.count()).select_from(EVENTS)).scalar() or 0), 0)

    def _read(self, query: Callable[[Connection], T], nothing: T) -> T:
        """query(connection) in one read transaction; `nothing` when no SQLite file exists yet (reading never
        creates it). StoreError with a message when the database cannot be read."""
        if self.path is not None and not self.path.exists():
            return nothing
        try:
            with self._transaction() as conn:
                return query(conn)
        except StoreError:
            self._ready = False  # a damaged file is set aside on the next use
            raise

    # ---- the database ----------------------------------------------------------------------------------

    def _full(self) -> bool:
        if self.max_bytes <= 0:
            return True
        if self.path is not None:
            return self._db.size([]) >= self.max_bytes
        now = time.monotonic()
        if self._size is None or now - self._size[0] > SIZE_EVERY_S:  # a query per write would double its cost
            if not self._ready:
                self._prepare()
            self._size = (now, self._db.size([EVENTS.name, META.name]))
        return self._size[1] >= self.max_bytes

    # Each write is one short transaction on a pooled connection: opening a SQLite connection per write cost 25 times
    # the write, most of it the checkpoint SQLite runs when the last connection closes (bench/bench_telemetry.py).
    def _transaction(self, *, write: bool = False):
        if not self._ready:
            self._prepare()
        return self._db.transaction(write=write)

    def close(self) -> None:
        """Close the pooled connections (a store that is dropped closes them as it is collected)."""
        self._db.dispose()

    def _prepare(self) -> None:
        self.notice = self._db.prepare(COMPONENT, schema.MIGRATIONS, self._load_salt) or self.notice
        self._ready = True

    def _load_salt(self, conn: Connection) -> None:
        conn.execute(select(func.count()).select_from(EVENTS)).scalar()  # a damaged table fails here, not later
        self._salt = bytes.fromhex(conn.execute(select(META.c.value).where(META.c.key == "salt")).scalar_one())

    # The salt is in the same file: whoever holds the file can still test a guess, which is why the text itself is never
    # in it unless the operator asks for it.
    def hash_text(self, text: str) -> str:
        """sha256(salt + text) in hex: the salt is this database's (see the module docstring)."""
        if self._salt is None:
            self._prepare()
        assert self._salt is not None
        return hashlib.sha256(self._salt + text.encode("utf-8", errors="surrogatepass")).hexdigest()

    # ---- counts -----------------------------------------------------------------------------------------

    def _note(self, what: str, reason: str | None = None) -> None:
        with self._lock:
            self._counts[what] += 1
            if reason is not None:
                self._last_error = reason

    def report_failure(self, e: BaseException) -> None:
        """Count a telemetry failure (of a write, or of making its event) and keep its reason for health()."""
        if self.path is not None and (damaged_sqlite(e) or any(s in str(e) for s in DAMAGED_SQLITE)):
            self._ready = False  # set aside on the next write
        self._note("failed", f"{type(e).__name__}: {e}"[:MAX_ERROR_CHARS])
