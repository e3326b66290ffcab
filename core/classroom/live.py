"""A live class session (issue 29): the room's predictions seen by the teacher before the reveal, and the
teacher's view followed by the room.

Everything lives in the class database, so every worker of `make class` sees the reveal another made; each call
is one short transaction. A question's first round exists without a row, so a room answering at once never races
to create it; one answer per learner per round (a second replaces the first). Answers are bounded (issue 35): a
number within ±MAX_NUMBER, a display name once per session; a stored value past the bound counts as unreadable, so
the teacher's chart always has finite bins. Learners poll `pulse`, one counter that reveals and publishes bump
(answers do not). Everything is keyed by a session code never reused; names are read only by the teacher's CSV.
"""

from __future__ import annotations

import bisect
import csv
import datetime as dt
import hashlib
import io
import json
import math
import os
import re
import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Table, select, update
from sqlalchemy.dialects import postgresql, sqlite

from core import i18n
from core.classroom.checkpoint import Question, parse_number
from core.classroom.results import safe_cell
from core.classroom.store import (
    LIVE_ANSWERS,
    LIVE_LEARNERS,
    LIVE_ROUNDS,
    LIVE_SESSIONS,
    MAX_ANSWER,
    QUESTION_ID,
    ClassStore,
    check_learner,
)
from core.i18n import _
from core.jsonfile import read_json

SESSION_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no I/1/L, O/0: read off a projector, typed on a phone
SESSION_LENGTH = 6  # 31**6, about 8.9e8 codes: guessing an open one is hopeless, typing one is easy
SESSION_CODE = re.compile(f"[{SESSION_ALPHABET}]{{{SESSION_LENGTH}}}")
MAX_NAME = 40  # characters of a display name
MAX_LEARNERS = 500  # joins per session: a class is 30-60; a script joining in a loop stops here
LEARNER_ID = re.compile(r"[0-9a-f]{32}")  # uuid4 hex, from join()
FINGERPRINT = re.compile(r"[0-9a-f]{16}")  # from fingerprint()
PAGE = re.compile(r"[a-z0-9_]{0,64}")  # an st.Page url_path ("" is the default page)
PARAM_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,64}")  # a widget key
MAX_PARAMS = 50  # widgets of one published view
MAX_PARAM_CHARS = 2_000  # characters of one widget's value
LANGUAGE = "lang"  # a view's entry for the teacher's language (a code of i18n.LANGUAGES), absent for English
# The most a stored view's params can hold as publish() writes them (every character escaped as 6 bytes, quotes and
# separators counted): a stored view is read back within this bound (about 0.6 MB).
MAX_VIEW_BYTES = 2 + MAX_PARAMS * (6 * (64 + MAX_PARAM_CHARS) + 6)
MAX_BINS = 20  # a histogram wider than this has wider bins, not more of them
MIN_BIN = 1e-9  # a bin is at least this wide: MAX_NUMBER / MIN_BIN is an exact float, flooring it never overflows
MAX_NUMBER = 1e6  # a number answer lies within +-MAX_NUMBER: every number question of the lab is far inside it
CSV_COLUMNS = ("question", "round", "name", "answer", "correct", "fingerprint", "at", "learner")


@dataclass(frozen=True)
class Round:
    """A question's current round in a session."""

    number: int  # 1, 2, ...
    revealed: bool  # the lab's answer is shown to everyone; answers are refused until the next round
    fingerprint: str | None  # the teacher's version of the question, when reveal or new_round named it


@dataclass(frozen=True)
class RoundResult:
    """One round's answers to one version of a question, without names: what the teacher's chart shows."""

    number: int
    revealed: bool
    fingerprint: str | None  # the teacher's version, as kept with the round
    answers: tuple[str, ...]  # to the fingerprint asked for, in the order they were first given
    correct: tuple[bool, ...]  # answers[i] was right
    other: int  # answers to another version of the question (a learner whose sliders differ)

    @property
    def n(self) -> int:
        return len(self.answers)


@dataclass(frozen=True)
class TeacherView:
    """What a follower is brought to: the teacher's page and widget values, as last published."""

    page: str  # a url_path
    params: dict[str, str]  # widget key -> value
    seq: int  # 1, 2, ... one per publish
    at: str  # ISO 8601, UTC

    @property
    def language(self) -> str:
        """The teacher's language: the class session's, which its learners read (ui.live_class)."""
        code = self.params.get(LANGUAGE, i18n.DEFAULT) if isinstance(self.params, dict) else None
        return code if code in i18n.LANGUAGES else i18n.DEFAULT


@dataclass(frozen=True)
class Distribution:
    """A round's answers as counts. Choices: one label per option in the question's order. Numbers: bins
    [edges[i], edges[i + 1]) (the last one closed), labelled by their range. `unreadable` counts answers that
    are not an option, not a number or a number beyond +-MAX_NUMBER (a row kept before the bound)."""

    labels: tuple[str, ...]
    counts: tuple[int, ...]
    edges: tuple[float, ...] | None  # None for a choice question
    unreadable: int


def check_session_code(text: object) -> str:
    """The code upper-cased, without spaces around it, if it is SESSION_LENGTH characters of SESSION_ALPHABET."""
    code = text.strip().upper() if isinstance(text, str) else ""
    if not SESSION_CODE.fullmatch(code):
        raise ValueError(
            _(
                "a session code is {count} letters and digits as shown on the projector (no I, L, O, 0 or 1); "
                "check it and type it again"
            ).format(count=SESSION_LENGTH)
        )
    return code


def check_name(text: object) -> str:
    """A display name: 1..MAX_NAME printable characters, outer spaces removed (as store.check_learner)."""
    if isinstance(text, str) and len(text.strip()) > MAX_NAME:
        raise ValueError(
            _("a display name may have at most {most} characters, this one has {count}").format(
                most=MAX_NAME, count=len(text.strip())
            )
        )
    return check_learner(text)


def check_number(text: str) -> float:
    """A number answer as the checkpoint reads it (parse_number), if it lies within +-MAX_NUMBER; else ValueError
    saying the range. The one bound on numbers the live class keeps and counts."""
    within = _("a prediction is a number between {low} and {high}").format(
        low=f"{-MAX_NUMBER:g}", high=f"{MAX_NUMBER:g}"
    )
    try:
        value = parse_number(text)
    except ValueError as e:
        raise ValueError(f"{e}: {within}") from None
    if not -MAX_NUMBER <= value <= MAX_NUMBER:
        raise ValueError(_("{range}; type one in that range").format(range=within))
    return value


def _name_key(name: str) -> str:
    """What makes two display names one: case and spaces aside, "Ada  lovelace" is "Ada Lovelace"."""
    return " ".join(name.split()).casefold()


def fingerprint(question: Question) -> str:
    """A stable short digest of what makes this very question: two learners whose sliders differ get two."""
    body = json.dumps(
        [question.prompt, list(question.options), question.answer, question.tolerance], ensure_ascii=False
    )
    return hashlib.blake2b(body.encode(), digest_size=8).hexdigest()


def _check_question(question: object) -> str:
    if not isinstance(question, str) or not QUESTION_ID.fullmatch(question):
        raise ValueError("not a question id: it is 1 to 64 lower-case letters, digits, '.', '_' or '-'")
    return question


def _check_fingerprint(value: object) -> str:
    if not isinstance(value, str) or not FINGERPRINT.fullmatch(value):
        raise ValueError("not a question's fingerprint: use live.fingerprint(question)")
    return value


def _check_params(params: object) -> dict[str, str]:
    if not isinstance(params, Mapping):
        raise ValueError("the view's params are a dict of widget key -> value")
    if len(params) > MAX_PARAMS:
        raise ValueError(
            _("a view has at most {most} widgets, this one has {count}").format(most=MAX_PARAMS, count=len(params))
        )
    for key, value in params.items():
        if not isinstance(key, str) or not PARAM_KEY.fullmatch(key):
            raise ValueError(_("a widget key is 1 to 64 letters, digits, '.', ':', '_' or '-'"))
        if not isinstance(value, str) or len(value) > MAX_PARAM_CHARS:
            raise ValueError(
                _("the widget {key}'s value must be text of at most {most} characters").format(
                    key=repr(key), most=MAX_PARAM_CHARS
                )
            )
        if key == LANGUAGE and value not in i18n.LANGUAGES:
            raise ValueError(_("the view's language is not one of the lab's"))
    return dict(params)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def _upsert(conn: Connection, table: Table, values: dict, keys: Sequence[str], replace: Sequence[str]) -> None:
    """INSERT ... ON CONFLICT (keys) DO UPDATE SET replace (or DO NOTHING): one atomic statement on either engine,
    so two writers of the same row never fail on the unique key."""
    insert = (sqlite.insert if conn.dialect.name == "sqlite" else postgresql.insert)(table).values(values)
    if replace:
        statement = insert.on_conflict_do_update(
            index_elements=list(keys), set_={k: insert.excluded[k] for k in replace}
        )
    else:
        statement = insert.on_conflict_do_nothing(index_elements=list(keys))
    conn.execute(statement)


class LiveClass:
    """Live class sessions on the class database at `path` (as ClassStore: a SQLite file, a postgresql:// URL, or
    None for LAB_DATABASE_URL / LAB_CLASS_DB / ./class.db). Every method checks its input first (ValueError with
    what to do) and raises StoreError when the database cannot be used."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.store = ClassStore(path)  # its Database, schema and damage handling, written once there
        self.where = self.store.where

    @property
    def notice(self) -> str | None:
        return self.store.notice

    # ---- the teacher's session ----------------------------------------------------------------------------

    def open_session(self) -> str:
        """A new session and its code, never used before on this database."""
        while True:
            code = "".join(secrets.choice(SESSION_ALPHABET) for _ in range(SESSION_LENGTH))
            with self.store.transaction(write=True) as conn:
                if conn.execute(select(LIVE_SESSIONS.c.code).where(LIVE_SESSIONS.c.code == code)).first() is None:
                    conn.execute(LIVE_SESSIONS.insert().values(code=code, opened_at=_now()))
                    return code

    def close_session(self, code: str) -> None:
        """No answer or join is taken after this; the learners' pages see it at their next poll."""
        code = check_session_code(code)
        with self.store.transaction(write=True) as conn:
            conn.execute(
                update(LIVE_SESSIONS)
                .where(LIVE_SESSIONS.c.code == code, LIVE_SESSIONS.c.closed_at.is_(None))
                .values(closed_at=_now(), pulse=LIVE_SESSIONS.c.pulse + 1)
            )

    def is_open(self, code: str) -> bool:
        code = check_session_code(code)
        with self.store.transaction() as conn:
            found = conn.execute(select(LIVE_SESSIONS.c.closed_at).where(LIVE_SESSIONS.c.code == code)).first()
        return found is not None and found[0] is None

    def _bump(self, conn: Connection, code: str) -> int:
        """pulse + 1 for an open session, in the caller's transaction; ValueError when it is not open."""
        found = conn.execute(
            update(LIVE_SESSIONS)
            .where(LIVE_SESSIONS.c.code == code, LIVE_SESSIONS.c.closed_at.is_(None))
            .values(pulse=LIVE_SESSIONS.c.pulse + 1)
            .returning(LIVE_SESSIONS.c.pulse)
        ).first()
        if found is None:
            raise ValueError(_("the session {code} is not open; open a new one").format(code=code))
        return int(found[0])

    # ---- learners -----------------------------------------------------------------------------------------

    def join(self, code: str, name: str) -> str:
        """A learner id for `name` in the open session `code`; the name is shown to the teacher only, and taken by
        one learner per session (case and spaces aside), else ValueError asking for another."""
        code, name = check_session_code(code), check_name(name)
        learner = uuid.uuid4().hex
        with self.store.transaction(write=True) as conn:
            _require_open(conn, code, lock=True)  # PostgreSQL: joins to one session take turns, so a name is once
            names = conn.execute(select(LIVE_LEARNERS.c.name).where(LIVE_LEARNERS.c.code == code)).scalars().all()
            if len(names) >= MAX_LEARNERS:
                raise ValueError(
                    _("the session {code} is full ({count} have joined); ask your teacher").format(
                        code=code, count=MAX_LEARNERS
                    )
                )
            if _name_key(name) in {_name_key(n) for n in names}:
                raise ValueError(
                    _("someone in this session already has that name: join under another name (add an initial, say)")
                )
            conn.execute(LIVE_LEARNERS.insert().values(id=learner, code=code, name=name, joined_at=_now()))
        return learner

    def learner(self, learner: str) -> tuple[str, str] | None:
        """(session code, display name) of the learner `learner` while their session is open, else None: how a
        browser session that lost its place (a worker restarted) takes it up again, as the same learner."""
        if not isinstance(learner, str) or not LEARNER_ID.fullmatch(learner):
            return None
        with self.store.transaction() as conn:
            found = conn.execute(
                select(LIVE_LEARNERS.c.code, LIVE_LEARNERS.c.name)
                .select_from(LIVE_LEARNERS.join(LIVE_SESSIONS, LIVE_LEARNERS.c.code == LIVE_SESSIONS.c.code))
                .where(LIVE_LEARNERS.c.id == learner, LIVE_SESSIONS.c.closed_at.is_(None))
            ).first()
        return None if found is None else (str(found[0]), str(found[1]))

    def answer(
        self,
        code: str,
        learner: str,
        question: str,
        fingerprint: str,
        answer: str,
        correct: bool,
        *,
        number: bool = False,
    ) -> None:
        """Keep a learner's answer in the question's current round, replacing their earlier one in that round.
        `number`: the question asks for a number, kept only within +-MAX_NUMBER (check_number)."""
        code, question, fingerprint = (
            check_session_code(code),
            _check_question(question),
            _check_fingerprint(fingerprint),
        )
        if not isinstance(learner, str) or not LEARNER_ID.fullmatch(learner):
            raise ValueError(_("not a learner of this session: join it with its code first"))
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError(_("the answer is empty: type or choose one"))
        if len(answer) > MAX_ANSWER or not answer.isprintable():
            raise ValueError(
                _("an answer is at most {count} printable characters on one line").format(count=MAX_ANSWER)
            )
        if number:
            check_number(answer)
        with self.store.transaction(write=True) as conn:
            joined = conn.execute(
                select(LIVE_SESSIONS.c.closed_at)
                .select_from(LIVE_LEARNERS.join(LIVE_SESSIONS, LIVE_LEARNERS.c.code == LIVE_SESSIONS.c.code))
                .where(LIVE_LEARNERS.c.id == learner, LIVE_LEARNERS.c.code == code)
                .with_for_update(read=True, of=LIVE_SESSIONS)  # PostgreSQL: a reveal waits for answers under way
            ).first()
            if joined is None:
                if conn.execute(select(LIVE_SESSIONS.c.code).where(LIVE_SESSIONS.c.code == code)).first() is None:
                    raise ValueError(_gone(code, self.where))  # a learner id of it was given: the session existed
                _require_open(conn, code)
                raise ValueError(_("not a learner of this session: join it with its code first"))
            if joined[0] is not None:
                raise ValueError(_("the session {code} is closed: answers are no longer taken").format(code=code))
            now = _current(conn, code, question)
            if now.revealed:
                raise ValueError(_("the lab's answer was revealed: wait for the teacher's next round to answer again"))
            _upsert(
                conn,
                LIVE_ANSWERS,
                dict(code=code, question=question, round=now.number, learner=learner, fingerprint=fingerprint,
                     answer=answer, correct=int(bool(correct)), at=_now()),
                keys=("code", "question", "round", "learner"),
                replace=("fingerprint", "answer", "correct", "at"),
            )  # fmt: skip

    # ---- rounds -------------------------------------------------------------------------------------------

    def round(self, code: str, question: str) -> Round:
        code, question = check_session_code(code), _check_question(question)
        with self.store.transaction() as conn:
            return _current(conn, code, question)

    def new_round(self, code: str, question: str, fingerprint: str | None = None) -> int:
        """Start the question's next round (the teacher, after the room discussed); returns its number."""
        code, question = check_session_code(code), _check_question(question)
        kept = None if fingerprint is None else _check_fingerprint(fingerprint)
        with self.store.transaction(write=True) as conn:
            self._bump(conn, code)
            number = _current(conn, code, question).number + 1  # round 1 needs no row: rounds() counts from 1
            _upsert(conn, LIVE_ROUNDS, dict(code=code, question=question, round=number, revealed=0, fingerprint=kept),
                    ("code", "question", "round"), ())  # fmt: skip
        return number

    def reveal(self, code: str, question: str, fingerprint: str | None = None) -> None:
        """Reveal the current round's answer to everyone (the teacher); `fingerprint` names the teacher's version."""
        code, question = check_session_code(code), _check_question(question)
        kept = None if fingerprint is None else _check_fingerprint(fingerprint)
        with self.store.transaction(write=True) as conn:
            self._bump(conn, code)
            now = _current(conn, code, question)
            _upsert(
                conn,
                LIVE_ROUNDS,
                dict(code=code, question=question, round=now.number, revealed=1, fingerprint=kept or now.fingerprint),
                keys=("code", "question", "round"),
                replace=("revealed", "fingerprint"),
            )

    def rounds(self, code: str, question: str, fingerprint: str) -> list[RoundResult]:
        """Every round of the question so far (at least round 1), with the answers to `fingerprint`, no names."""
        code, question, fingerprint = (
            check_session_code(code),
            _check_question(question),
            _check_fingerprint(fingerprint),
        )
        with self.store.transaction() as conn:
            if conn.execute(select(LIVE_SESSIONS.c.code).where(LIVE_SESSIONS.c.code == code)).first() is None:
                raise ValueError(_gone(code, self.where))  # the room never counts answers the database lost
            kept = {
                r.round: r
                for r in conn.execute(
                    select(LIVE_ROUNDS.c.round, LIVE_ROUNDS.c.revealed, LIVE_ROUNDS.c.fingerprint).where(
                        LIVE_ROUNDS.c.code == code, LIVE_ROUNDS.c.question == question
                    )
                )
            }
            given = conn.execute(
                select(LIVE_ANSWERS.c.round, LIVE_ANSWERS.c.fingerprint, LIVE_ANSWERS.c.answer, LIVE_ANSWERS.c.correct)
                .where(LIVE_ANSWERS.c.code == code, LIVE_ANSWERS.c.question == question)
                .order_by(LIVE_ANSWERS.c.id)
            ).all()
        last = max([1, *kept, *(g.round for g in given)])
        results = []
        for number in range(1, last + 1):
            mine = [g for g in given if g.round == number and g.fingerprint == fingerprint]
            row = kept.get(number)
            results.append(
                RoundResult(
                    number=number,
                    revealed=bool(row is not None and row.revealed),
                    fingerprint=None if row is None else row.fingerprint,
                    answers=tuple(g.answer for g in mine),
                    correct=tuple(bool(g.correct) for g in mine),
                    other=sum(1 for g in given if g.round == number and g.fingerprint != fingerprint),
                )
            )
        return results

    # ---- the teacher's view, and the pulse ---------------------------------------------------------------

    def publish(self, code: str, page: str, params: Mapping[str, str]) -> int:
        """Keep the teacher's page (a url_path) and widget values for followers; returns the view's number."""
        code = check_session_code(code)
        if not isinstance(page, str) or not PAGE.fullmatch(page):
            raise ValueError(_("not a page of the lab: a page's url_path is lower-case letters, digits and '_'"))
        body = json.dumps(_check_params(params), ensure_ascii=False, sort_keys=True)
        with self.store.transaction(write=True) as conn:
            self._bump(conn, code)
            found = conn.execute(
                update(LIVE_SESSIONS)
                .where(LIVE_SESSIONS.c.code == code)
                .values(page=page, params=body, view_seq=LIVE_SESSIONS.c.view_seq + 1, view_at=_now())
                .returning(LIVE_SESSIONS.c.view_seq)
            ).first()
        assert found is not None  # _bump found the open session in this transaction
        return int(found[0])

    def view(self, code: str) -> TeacherView | None:
        """The teacher's last published view of an open session; None before the first publish or once closed."""
        code = check_session_code(code)
        with self.store.transaction() as conn:
            found = conn.execute(
                select(
                    LIVE_SESSIONS.c.page, LIVE_SESSIONS.c.params, LIVE_SESSIONS.c.view_seq, LIVE_SESSIONS.c.view_at
                ).where(LIVE_SESSIONS.c.code == code, LIVE_SESSIONS.c.closed_at.is_(None))
            ).first()
        if found is None or found.page is None:
            return None
        params = read_json(
            found.params, "the teacher's published view", max_bytes=MAX_VIEW_BYTES, fix="publish the view again"
        )
        return TeacherView(found.page, _check_params(params), int(found.view_seq), found.view_at)

    def pulse(self, code: str) -> int:
        """A counter that reveal, new_round, publish and close bump (0 for an unknown code): one cheap read."""
        code = check_session_code(code)
        with self.store.transaction() as conn:
            found = conn.execute(select(LIVE_SESSIONS.c.pulse).where(LIVE_SESSIONS.c.code == code)).scalar()
        return int(found or 0)

    # ---- the teacher's download ---------------------------------------------------------------------------

    def answers_csv(self, code: str) -> str:
        """Every answer of the session by question and round, with display names: the teacher's download only.
        Cells a spreadsheet would run as a formula are quoted (results.safe_cell); `learner` numbers the learners
        in the order they joined (1, 2, ...), so two rows of one name from before names were unique stay apart."""
        code = check_session_code(code)
        a, learner = LIVE_ANSWERS.c, LIVE_LEARNERS.c
        with self.store.transaction() as conn:
            order = conn.execute(
                select(learner.id).where(learner.code == code).order_by(learner.joined_at, learner.id)
            ).scalars()
            place = {found: i for i, found in enumerate(order, start=1)}
            rows = conn.execute(
                select(a.question, a.round, learner.name, a.answer, a.correct, a.fingerprint, a.at, a.learner)
                .select_from(LIVE_ANSWERS.join(LIVE_LEARNERS, a.learner == learner.id))
                .where(a.code == code)
                .order_by(a.question, a.round, a.id)
            ).all()
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow([safe_cell(v) for v in (*row[:4], int(row[4]), *row[5:7], place.get(row[7], ""))])
        return out.getvalue()


def _gone(code: str, where: str) -> str:
    """Why a session that existed is not found: its database was removed or replaced (see the class store)."""
    return _(
        "the session {code} is not in the class database {where}: it was removed or replaced; the teacher "
        "opens a new class session (Close, then Open) and learners join that one"
    ).format(code=code, where=repr(where))


def _require_open(conn: Connection, code: str, *, lock: bool = False) -> None:
    """ValueError unless the session `code` is open; `lock` holds its row to the end of the transaction (PostgreSQL:
    writers that must not interleave, such as two joins under one name; SQLite's BEGIN IMMEDIATE already does)."""
    query = select(LIVE_SESSIONS.c.closed_at).where(LIVE_SESSIONS.c.code == code)
    closed = conn.execute(query.with_for_update() if lock else query).first()
    if closed is None:
        raise ValueError(_("no session has the code {code}: check the code on the projector").format(code=code))
    if closed[0] is not None:
        raise ValueError(_("the session {code} is closed: ask your teacher for the new code").format(code=code))


def _current(conn: Connection, code: str, question: str) -> Round:
    """The question's current round: its last row, else round 1 (no row until new_round or reveal makes one)."""
    r = LIVE_ROUNDS.c
    found = conn.execute(
        select(r.round, r.revealed, r.fingerprint)
        .where(r.code == code, r.question == question)
        .order_by(r.round.desc())
        .limit(1)
    ).first()
    return Round(1, False, None) if found is None else Round(int(found[0]), bool(found[1]), found[2])


# ---- what the teacher's chart counts ------------------------------------------------------------------------


def distribution(result: RoundResult, question: Question) -> Distribution:
    """A round's answers as counts. Choices: per option in the question's order. Numbers: bins as wide as the
    question's tolerance window (2 x tolerance; a tenth of the answers' spread, or 1, when the tolerance is 0),
    their edges on multiples of the width, so the edges say nothing of the lab's answer before the reveal; more than
    MAX_BINS bins are merged into wider ones. Never raises on what is stored: a number beyond +-MAX_NUMBER (or not
    finite) is unreadable, and a bin is at least MIN_BIN wide, so no edge overflows."""
    if question.is_choice:
        counts = [sum(1 for a in result.answers if a == option) for option in question.options]
        return Distribution(tuple(question.options), tuple(counts), None, result.n - sum(counts))
    values = []
    for a in result.answers:
        try:
            values.append(check_number(a))
        except ValueError:
            pass
    unreadable = result.n - len(values)
    if not values:
        return Distribution((), (), None, unreadable)
    lo, hi = min(values), max(values)
    width = 2 * question.tolerance
    if not (math.isfinite(width) and width > 0):  # no tolerance (or not a number): a tenth of the spread
        width = (hi - lo) / 10 or 1.0
    width = max(width, MIN_BIN)
    start = math.floor(lo / width)
    bins = max(1, math.floor(hi / width) - start + 1)
    while bins > MAX_BINS:  # twice at most: edges put back on multiples of the wider width may add one bin
        width *= math.ceil(bins / MAX_BINS)
        start = math.floor(lo / width)
        bins = max(1, math.floor(hi / width) - start + 1)
    edges = [(start + i) * width for i in range(bins + 1)]
    counts = [0] * bins
    for v in values:  # [edges[i], edges[i + 1]), the last bin closed (numpy.histogram's rule)
        counts[min(max(bisect.bisect_right(edges, v) - 1, 0), bins - 1)] += 1
    labels = tuple(_("{low} to {high}").format(low=f"{edges[i]:.4g}", high=f"{edges[i + 1]:.4g}") for i in range(bins))
    return Distribution(labels, tuple(counts), tuple(edges), unreadable)
