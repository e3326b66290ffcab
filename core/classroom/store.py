"""Class results: every checkpoint answer, kept in an embedded SQLite database.

Where: the environment variable LAB_CLASS_DB, else ./class.db under the working directory; created on first
use, with its parent folder. What: one row per answered question (learner, class code, attempt, question,
answer, correct, time in UTC). The schema's version is SQLite's `PRAGMA user_version` (SCHEMA_VERSION); a
database written by a newer lab is refused with a message, never altered.

Concurrency: a class of 30 submits at once. The database runs in WAL mode (readers never block the writer)
and every write opens its own connection, writes in one transaction and closes it; a writer waits up to
BUSY_TIMEOUT_MS for another's lock instead of failing, so no answer is lost.

Damage: a file that is not a SQLite database, or one whose tables are unreadable, is moved aside to
`<name>.damaged-<UTC time>` (nothing is deleted) and a fresh database takes its place; `ClassStore.notice`
then says what happened, for the page to show. Every text from a form is bounded and checked first
(`check_learner`, `check_class_code`).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from core.files import prepare_sqlite

SCHEMA_VERSION = 1
DEFAULT_PATH = "class.db"
ENV = "LAB_CLASS_DB"
BUSY_TIMEOUT_MS = 10_000  # how long a write waits for another writer's lock; 30 writes take well under a second
MAX_LEARNER = 64  # characters of a learner's name
MAX_ANSWER = 200  # characters of an answer as typed
CLASS_CODE = re.compile(r"[A-Za-z0-9_-]{1,32}")  # a code the teacher writes on the board
QUESTION_ID = re.compile(r"[a-z0-9_.-]{1,64}")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY,
    learner TEXT NOT NULL,
    class_code TEXT NOT NULL,
    attempt TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    correct INTEGER NOT NULL CHECK (correct IN (0, 1)),
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_by_class ON answers (class_code, learner, attempt);
"""


class StoreError(Exception):
    """The class database cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class Answer:
    learner: str
    class_code: str
    attempt: str  # one id per checkpoint submission (new_attempt)
    question: str  # the question's id
    answer: str  # as the learner gave it
    correct: bool
    at: str  # ISO 8601, UTC


def check_learner(name: object) -> str:
    """The name with its outer spaces removed, if it is 1..MAX_LEARNER printable characters; else ValueError."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError("enter your name (as the teacher will recognise it)")
    name = name.strip()
    if len(name) > MAX_LEARNER:
        raise ValueError(f"a name may have at most {MAX_LEARNER} characters, this one has {len(name)}")
    if not name.isprintable():
        raise ValueError("a name may not contain control characters or line breaks")
    return name


def check_class_code(code: object) -> str:
    """The code if it is 1..32 letters, digits, '-' or '_'; else ValueError."""
    if not isinstance(code, str) or not CLASS_CODE.fullmatch(code.strip()):
        raise ValueError("the class code is 1 to 32 letters, digits, '-' or '_' (ask your teacher for it)")
    return code.strip()


def class_db_path() -> Path:
    """Where the class database lives: LAB_CLASS_DB, else ./class.db."""
    return Path(os.environ.get(ENV) or DEFAULT_PATH)


def new_attempt() -> str:
    return uuid.uuid4().hex


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class ClassStore:
    """The class database at `path` (default: LAB_CLASS_DB, else ./class.db)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else class_db_path()
        self.notice: str | None = None  # set when a damaged database was moved aside
        self._ready = False

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """One connection for one read or one write, closed afterwards; the schema checked on first use."""
        if not self._ready:
            self._prepare()
        with closing(sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)) as conn:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            yield conn

    def _prepare(self) -> None:
        notice = prepare_sqlite(
            self.path, self._create, what="class database", timeout_s=BUSY_TIMEOUT_MS / 1000, error=StoreError
        )
        self.notice = notice or self.notice
        self._ready = True

    def _create(self) -> None:
        with closing(sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)) as conn:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"the class database {str(self.path)!r} was written by a newer lab (schema {version}, this lab "
                    f"reads {SCHEMA_VERSION}); point LAB_CLASS_DB at another file or update the lab"
                )
            with conn:
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("SELECT count(*) FROM answers").fetchone()  # a damaged table fails here, not later

    def record(
        self, learner: str, class_code: str, attempt: str, graded: Sequence[tuple[str, str, bool]]
    ) -> list[Answer]:
        """Keep one submission: (question id, answer, correct) for each question, in one transaction."""
        learner, class_code = check_learner(learner), check_class_code(class_code)
        if not re.fullmatch(r"[0-9a-f]{32}", attempt or ""):
            raise ValueError(f"attempt must be an id from new_attempt(), got {attempt!r}")
        at = _now()
        rows = []
        for question, answer, correct in graded:
            if not QUESTION_ID.fullmatch(question):
                raise ValueError(f"not a question id: {question!r}")
            rows.append(Answer(learner, class_code, attempt, question, str(answer)[:MAX_ANSWER], bool(correct), at))
        with self._connect() as conn, conn:
            conn.executemany(
                "INSERT INTO answers (learner, class_code, attempt, question, answer, correct, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(a.learner, a.class_code, a.attempt, a.question, a.answer, int(a.correct), a.at) for a in rows],
            )
        return rows

    def answers(self, class_code: str | None = None) -> list[Answer]:
        """Every answer kept, or one class's, oldest first."""
        query = "SELECT learner, class_code, attempt, question, answer, correct, at FROM answers"
        params: tuple = ()
        if class_code is not None:
            query, params = query + " WHERE class_code = ?", (check_class_code(class_code),)
        with self._connect() as conn:
            found = conn.execute(query + " ORDER BY id", params).fetchall()
        return [Answer(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6]) for r in found]

    def class_codes(self) -> list[str]:
        with self._connect() as conn:
            return [r[0] for r in conn.execute("SELECT DISTINCT class_code FROM answers ORDER BY class_code")]
