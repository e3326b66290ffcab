"""The telemetry database: every suggestion and completion served, by exact model version (SQLite, WAL).

Where: the environment variable LAB_TELEMETRY_DB, else ./telemetry.db under the working directory
(`telemetry_path`); created on first write, with its parent folder. What: one row per served request in the
table `events` (core.telemetry.schema): when (UTC), where ('page', 'cli' or 'synthetic'), what ('suggestion' or
'completion'), the bundle version (its hash) and the suggestion policy's version, input quality (prompt length,
characters outside the vocabulary, cut to the context), the prediction (top-1 probability and entropy of the
next-character distribution, the suggestion's length, shown or withheld by the threshold), latency, the error if
serving failed, the outcome once it matures ('accepted' or 'typed_other'), and the evaluation's slices of the
position (core.release.slices).

Privacy: the learner's text is not stored. Its length is, and `prompt_hash`: sha256 over a random salt kept in
this database (table `meta`) followed by the text, so equal texts can be counted without the hash revealing a
short text by dictionary (the salt is in the same file: whoever holds the file can still test a guess, which is
why the text itself is never in it). The session id is stored the same way, salted and cut to 16 hex digits. The
operator can turn text storage on with LAB_TELEMETRY_STORE_TEXT=1 (the last MAX_TEXT_CHARS characters).

Never in the way of serving: `TelemetryStore.record` and `set_outcome` never raise. A write that fails (a full
disk, a lock held past WRITE_TIMEOUT_MS, a damaged or read-only file, a database from a newer lab, a file past
LAB_TELEMETRY_MAX_BYTES) returns None and is counted; `health()` reports the counts and the last reason, for the
page to show. Reads (`rows`, `count`) raise StoreError with a message instead, for the Monitoring page.

Schema: SQLite's `PRAGMA user_version` is the schema version; core.telemetry.schema.MIGRATIONS[i] brings version
i to i + 1, applied here each in one transaction, so schema 2 is one more entry. A database written by a newer
lab is refused, never altered. A file that is not a database is moved aside to `<name>.damaged-<UTC time>` and a
fresh one started (`notice`).
The pattern is core.classroom.store's (WAL, a busy timeout, the first use through core.files.prepare_sqlite, one
short transaction per write), but a write reuses an idle connection of the store (see `_connect`): opening one per
write cost 25 times the write. Thread-safe: a connection serves one thread at a time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from core.files import DAMAGED_SQLITE, prepare_sqlite
from core.telemetry import schema
from core.telemetry.schema import (
    COLUMNS,
    KINDS,
    MAX_ERROR_CHARS,
    MAX_TEXT_CHARS,
    OUTCOMES,
    SURFACES,
    Event,
    event_row,
    label,
)

__all__ = [
    "COLUMNS",
    "KINDS",
    "MAX_ERROR_CHARS",
    "MAX_TEXT_CHARS",
    "OUTCOMES",
    "SURFACES",
    "Event",
    "Health",
    "StoreError",
    "TelemetryStore",
    "telemetry_path",
]

ENV = "LAB_TELEMETRY_DB"
DEFAULT_PATH = "telemetry.db"
STORE_TEXT_ENV = "LAB_TELEMETRY_STORE_TEXT"  # "1": keep the learner's text too (default: lengths and hashes only)
MAX_BYTES_ENV = "LAB_TELEMETRY_MAX_BYTES"
DEFAULT_MAX_BYTES = 200 * 2**20  # ~1M events; past it writes are skipped and reported
MAX_BYTES_LIMIT = 2**40
WRITE_TIMEOUT_MS = 1000  # a write waits this long for another writer's lock, then gives up (and is counted)
READ_TIMEOUT_MS = 10_000
MAX_IDLE = 4  # write connections kept open for reuse
WAL_LIMIT = 4 * 2**20  # bytes the write-ahead log is cut back to after a checkpoint
MAX_READ = 200_000  # events a reader loads at most (the most recent)


class StoreError(Exception):
    """The telemetry database cannot be read; the message says why and what to do."""


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
    """The database file this process records to: LAB_TELEMETRY_DB, else ./telemetry.db."""
    return Path(os.environ.get(ENV) or DEFAULT_PATH)


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
    """The telemetry database at `path` (default: LAB_TELEMETRY_DB, else ./telemetry.db). Safe to share
    between threads: every write opens its own connection."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else telemetry_path()
        self.store_text = store_text_enabled()
        self.max_bytes, setting_problem = max_bytes_setting()
        self.notice: str | None = None
        self._ready = False
        self._idle: list[sqlite3.Connection] = []  # write connections not in use (see _connect)
        self._salt: bytes | None = None
        self._lock = threading.Lock()
        self._counts = {"recorded": 0, "failed": 0, "skipped": 0}
        self._last_error: str | None = setting_problem

    # ---- writing: never raises ----------------------------------------------------------------------

    def record(self, event: Event) -> int | None:
        """Keep one event; its id, or None when it could not be written (counted, see health())."""
        try:
            if self._full():
                self._note("skipped", f"the database reached {MAX_BYTES_ENV}={self.max_bytes} bytes; writes skipped")
                return None
            row = event_row(event, self.hash_text, self.store_text)
            with self._connect(WRITE_TIMEOUT_MS, pooled=True) as conn:
                conn.execute("BEGIN IMMEDIATE")
                cursor = conn.execute(
                    f"INSERT INTO events ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", tuple(row.values())
                )
                conn.execute("COMMIT")
            self._note("recorded")
            return int(cursor.lastrowid or 0) or None
        except Exception as e:  # noqa: BLE001 - telemetry never breaks serving: counted and reported instead
            self.report_failure(e)
            return None

    def set_outcome(self, event_id: int, outcome: str, char_class: str | None = None) -> bool:
        """Mature an event's outcome (only once: a matured outcome is never changed); the slice char_class of
        the character typed next may be given with it. False only when the write failed (counted)."""
        try:
            if outcome not in OUTCOMES:
                raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
            with self._connect(WRITE_TIMEOUT_MS, pooled=True) as conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "UPDATE events SET outcome = ?, char_class = COALESCE(char_class, ?) "
                    "WHERE id = ? AND outcome IS NULL",
                    (outcome, label(char_class), int(event_id)),
                )
                conn.execute("COMMIT")
            return True
        except Exception as e:  # noqa: BLE001 - as record()
            self.report_failure(e)
            return False

    def health(self) -> Health:
        with self._lock:
            counts, last = dict(self._counts), self._last_error
        return Health(
            str(self.path), **counts, last_error=last, notice=self.notice, max_bytes=self.max_bytes,
            store_text=self.store_text,
        )  # fmt: skip

    # ---- reading: raises StoreError -----------------------------------------------------------------

    def rows(self, limit: int = MAX_READ) -> list[dict]:
        """The most recent `limit` events (at most MAX_READ), oldest first, one dict per event (COLUMNS)."""
        limit = max(0, min(int(limit), MAX_READ))
        found = self._read(f"SELECT {', '.join(COLUMNS)} FROM events ORDER BY id DESC LIMIT ?", (limit,))
        return [dict(zip(COLUMNS, r)) for r in reversed(found)]

    def stamp(self) -> tuple[int, int, int]:
        """What changes whenever an event is recorded or an outcome matures: (the file's inode, the last id, the
        outcomes known). Rows are only inserted, and an outcome is only ever set once (set_outcome), so two equal
        stamps of one file mean the same rows; a damaged file set aside starts a new file. (0, 0, 0) before the
        first write."""
        found = self._read("SELECT coalesce(max(id), 0), count(outcome) FROM events")
        if not found:
            return (0, 0, 0)
        try:
            inode = os.stat(self.path).st_ino
        except OSError:
            inode = 0
        return (inode, int(found[0][0]), int(found[0][1]))

    def count(self) -> int:
        found = self._read("SELECT count(*) FROM events")
        return found[0][0] if found else 0

    def _read(self, query: str, params: tuple = ()) -> list[tuple]:
        if not self.path.exists():
            return []  # nothing recorded yet: reading never creates the file
        try:
            with self._connect(READ_TIMEOUT_MS) as conn:
                return conn.execute(query, params).fetchall()
        except (sqlite3.Error, OSError, StoreError) as e:
            self._ready = False  # a damaged file is set aside on the next use
            why = str(e) if isinstance(e, StoreError) else f"the telemetry database cannot be read: {e}"
            raise StoreError(why) from None

    # ---- the file --------------------------------------------------------------------------------------

    def _full(self) -> bool:
        size = 0
        for suffix in ("", "-wal"):
            try:
                size += os.stat(str(self.path) + suffix).st_size
            except OSError:
                pass
        return size >= self.max_bytes if self.max_bytes > 0 else True

    @contextmanager
    def _connect(self, timeout_ms: int, *, pooled: bool = False) -> Iterator[sqlite3.Connection]:
        """An autocommit connection (the caller opens its transaction), the schema checked on first use.

        Writes (`pooled`) reuse an idle connection of this store when there is one: opening and closing one per
        write cost about 2.5 ms here, most of it the checkpoint SQLite runs when the last connection closes,
        against about 0.1 ms for the write itself (bench/bench_telemetry.py). Each write is still its own short
        transaction, and a connection serves one thread at a time."""
        if not self._ready:
            self._prepare()
        conn = None
        if pooled:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=timeout_ms / 1000, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints, no fsync per event
            conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT}")
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            conn.close()
            raise
        if pooled:
            with self._lock:
                if len(self._idle) < MAX_IDLE and self._ready:
                    self._idle.append(conn)
                    return
        conn.close()

    def close(self) -> None:
        """Close the idle write connections (a store that is dropped closes them as it is collected)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _prepare(self) -> None:
        self.close()  # connections to a file that may since have been set aside
        notice = prepare_sqlite(
            self.path, self._migrate, what="telemetry database", timeout_s=READ_TIMEOUT_MS / 1000, error=StoreError
        )
        self.notice = notice or self.notice
        self._ready = True

    def _migrate(self) -> None:
        """Bring the file to schema len(MIGRATIONS), one transaction per step; refuse a newer one."""
        target = len(schema.MIGRATIONS)
        with closing(sqlite3.connect(self.path, timeout=READ_TIMEOUT_MS / 1000, isolation_level=None)) as conn:
            conn.execute(f"PRAGMA busy_timeout = {READ_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > target:
                raise StoreError(
                    f"the telemetry database {str(self.path)!r} was written by a newer lab (schema {version}, this "
                    f"lab reads {target}); point {ENV} at another file or update the lab"
                )
            for step in range(version, target):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in schema.MIGRATIONS[step]:
                        conn.execute(statement)
                    if step == 0:
                        conn.execute("INSERT INTO meta (key, value) VALUES ('salt', ?)", (secrets.token_hex(16),))
                    conn.execute(f"PRAGMA user_version = {step + 1}")
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            conn.execute("SELECT count(*) FROM events").fetchone()  # a damaged table fails here, not later
            self._salt = bytes.fromhex(conn.execute("SELECT value FROM meta WHERE key = 'salt'").fetchone()[0])

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
        if isinstance(e, sqlite3.DatabaseError) and any(sign in str(e) for sign in DAMAGED_SQLITE):
            self._ready = False  # set aside on the next write
        self._note("failed", f"{type(e).__name__}: {e}"[:MAX_ERROR_CHARS])
