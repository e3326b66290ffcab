"""Class results: every checkpoint answer, and a live session's rows, in SQLite or on a PostgreSQL server.

A class of 30 submits at once, so each submission is one short transaction on a pooled connection and no answer is
lost. A damaged SQLite file is moved aside and a fresh one started (`notice` says so), and a file removed or
replaced under a running class (issue 35) is noticed by its identity, at a transaction's start and again before a
write commits, rather than answers being kept where nothing reads them. Text from a form is bounded and checked
first; a database written by a newer lab is refused, never altered.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import (
    CheckConstraint,
    Column,
    Connection,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    func,
    select,
)

from core.database import Database, StoreError, location
from core.i18n import _

DEFAULT_PATH = "class.db"
ENV = "LAB_CLASS_DB"
COMPONENT = "class"  # its row in core.database's version table
BUSY_TIMEOUT_MS = 10_000  # how long a write waits for another writer's lock; 30 writes take well under a second
MAX_LEARNER = 64  # characters of a learner's name
MAX_ANSWER = 200  # characters of an answer as typed
CLASS_CODE = re.compile(r"[A-Za-z0-9_-]{1,32}")  # a code the teacher writes on the board
QUESTION_ID = re.compile(r"[a-z0-9_.-]{1,64}")

METADATA = MetaData()
ANSWERS = Table(
    "answers",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("learner", Text, nullable=False),
    Column("class_code", Text, nullable=False),
    Column("attempt", Text, nullable=False),
    Column("question", Text, nullable=False),
    Column("answer", Text, nullable=False),
    Column("correct", Integer, CheckConstraint("correct IN (0, 1)"), nullable=False),
    Column("at", Text, nullable=False),
    Index("answers_by_class", "class_code", "learner", "attempt"),
)


# A live class session (core.classroom.live, issue 29): the session with its teacher's view and a pulse counter
# the learners' pages poll, its learners (display names, shown to the teacher only), each question's rounds, and
# one answer per learner per question and round. Every row is reached by its session's code, which is never reused.
LIVE_SESSIONS = Table(
    "live_sessions",
    METADATA,
    Column("code", Text, primary_key=True),
    Column("opened_at", Text, nullable=False),
    Column("closed_at", Text),  # NULL while open
    Column("pulse", Integer, nullable=False, server_default="0"),  # bumped by reveal, new round, publish, close
    Column("page", Text),  # the teacher's view: a url_path, its widgets as JSON, a sequence number, when
    Column("params", Text),
    Column("view_seq", Integer, nullable=False, server_default="0"),
    Column("view_at", Text),
)
LIVE_LEARNERS = Table(
    "live_learners",
    METADATA,
    Column("id", Text, primary_key=True),  # uuid4 hex
    Column("code", Text, ForeignKey("live_sessions.code"), nullable=False),
    Column("name", Text, nullable=False),
    Column("joined_at", Text, nullable=False),
    Index("live_learners_by_session", "code"),
)
LIVE_ROUNDS = Table(
    "live_rounds",
    METADATA,
    Column("code", Text, ForeignKey("live_sessions.code"), primary_key=True),
    Column("question", Text, primary_key=True),
    Column("round", Integer, primary_key=True),
    Column("revealed", Integer, CheckConstraint("revealed IN (0, 1)"), nullable=False),
    Column("fingerprint", Text),  # the teacher's version of the question, when the teacher named it
)
LIVE_ANSWERS = Table(
    "live_answers",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("code", Text, ForeignKey("live_sessions.code"), nullable=False),
    Column("question", Text, nullable=False),
    Column("round", Integer, nullable=False),
    Column("learner", Text, ForeignKey("live_learners.id"), nullable=False),
    Column("fingerprint", Text, nullable=False),
    Column("answer", Text, nullable=False),
    Column("correct", Integer, CheckConstraint("correct IN (0, 1)"), nullable=False),
    Column("at", Text, nullable=False),
    UniqueConstraint("code", "question", "round", "learner", name="live_answers_one_per_round"),
)
LIVE_TABLES = (LIVE_SESSIONS, LIVE_LEARNERS, LIVE_ROUNDS, LIVE_ANSWERS)


def _add_live_class(conn: Connection) -> None:
    """Schema 1 -> 2: the live class's tables beside the checkpoint's answers, which stay as they are."""
    METADATA.create_all(conn, tables=list(LIVE_TABLES))


MIGRATIONS = (METADATA.create_all, _add_live_class)  # MIGRATIONS[i]: schema i -> i + 1 (core.database.Database.migrate)
SCHEMA_VERSION = len(MIGRATIONS)


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
        raise ValueError(_("enter your name (as the teacher will recognise it)"))
    name = name.strip()
    if len(name) > MAX_LEARNER:
        raise ValueError(
            _("a name may have at most {most} characters, this one has {count}").format(
                most=MAX_LEARNER, count=len(name)
            )
        )
    if not name.isprintable():
        raise ValueError(_("a name may not contain control characters or line breaks"))
    return name


def check_class_code(code: object) -> str:
    """The code if it is 1..32 letters, digits, '-' or '_'; else ValueError."""
    if not isinstance(code, str) or not CLASS_CODE.fullmatch(code.strip()):
        raise ValueError(_("the class code is 1 to 32 letters, digits, '-' or '_' (ask your teacher for it)"))
    return code.strip()


def class_db_path() -> Path:
    """Where the SQLite class database lives: LAB_CLASS_DB, else ./class.db."""
    return Path(os.environ.get(ENV) or DEFAULT_PATH)


def class_db_location() -> str:
    """Where the class results live: LAB_DATABASE_URL when set, else the SQLite path (class_db_path)."""
    return location(ENV, DEFAULT_PATH)


def new_attempt() -> str:
    return uuid.uuid4().hex


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class ClassStore:
    """The class database at `path`: a SQLite file, or a postgresql:// URL (default: LAB_DATABASE_URL, else
    LAB_CLASS_DB, else ./class.db). `path` is the SQLite file, None on a database server; `where` names either."""

    def __init__(self, path: str | os.PathLike | None = None):
        self._db = Database(
            path, path_env=ENV, default=DEFAULT_PATH, what="class database", timeout_ms=BUSY_TIMEOUT_MS,
            error=StoreError,
        )  # fmt: skip
        self.path = self._db.path
        self.where = self._db.name
        self.notice: str | None = None  # set when a damaged database was moved aside
        self._ready = False
        self._opened = 0  # the SQLite file's identity when prepared (Database.identity)

    @contextmanager
    # Issue 35: `rm class.db*` under a running class left the pooled connections writing into unlinked files, answers
    # "kept" that nothing would read; hence the identity check. The next use opens the file at the path, or a fresh one,
    # where the old sessions are not: the teacher opens a new session.
    def transaction(self, *, write: bool = False) -> Iterator[Connection]:
        """One read or one write in one transaction; the schema checked on first use. StoreError when the SQLite
        file was removed or replaced since (see the module docstring): checked before the block, and before a
        write commits, so what the block wrote is rolled back rather than kept where nothing reads it."""
        if not self._ready:
            self.notice = self._db.prepare(COMPONENT, MIGRATIONS, self._opening) or self.notice
            self._ready = True
        with self._db.transaction(write=write) as conn:
            self._same_file(conn)
            yield conn
            if write:
                self._same_file(conn)

    def _opening(self, conn: Connection) -> None:
        _probe(conn)
        self._opened = self._db.identity(conn, ANSWERS.name)

    def _same_file(self, conn: Connection) -> None:
        if self.path is None or self._db.identity(conn, ANSWERS.name) == self._opened:
            return  # a server's tables are not files: dropping them fails every statement on its own
        self._ready = False  # the next use opens what is at the path now (prepare disposes the old connections)
        raise StoreError(
            f"the class database {self.where!r} was removed or replaced while in use, so this was not kept; the "
            "teacher opens a new class session (Close, then Open) and learners join that one"
        )

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
        if rows:
            with self.transaction(write=True) as conn:
                conn.execute(
                    ANSWERS.insert(),
                    [{**{k: getattr(a, k) for k in _FIELDS}, "correct": int(a.correct)} for a in rows],
                )
        return rows

    def answers(self, class_code: str | None = None) -> list[Answer]:
        """Every answer kept, or one class's, oldest first."""
        query = select(*[ANSWERS.c[k] for k in _FIELDS]).order_by(ANSWERS.c.id)
        if class_code is not None:
            query = query.where(ANSWERS.c.class_code == check_class_code(class_code))
        with self.transaction() as conn:
            found = conn.execute(query).all()
        return [Answer(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6]) for r in found]

    def class_codes(self) -> list[str]:
        with self.transaction() as conn:
            return list(conn.execute(select(ANSWERS.c.class_code).distinct().order_by(ANSWERS.c.class_code)).scalars())


_FIELDS = ("learner", "class_code", "attempt", "question", "answer", "correct", "at")  # Answer's, in order


def _probe(conn: Connection) -> None:
    conn.execute(select(func.count()).select_from(ANSWERS)).scalar()  # a damaged table fails here, not later
