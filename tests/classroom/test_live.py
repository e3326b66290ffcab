"""core.classroom.live: a class session's answers by round, the reveal, the teacher's view and the pulse, kept in
the class database. Tests taking `engine` run once on SQLite (WAL) and once on a throwaway PostgreSQL (tests/db.py);
what was kept is read back through the driver itself (engine.sql), not through the code under test."""

import csv
import io
import json
import sqlite3
import threading

import numpy as np
import pytest

from core.classroom import live as live_module
from core.classroom.checkpoint import Question
from core.classroom.live import (
    MAX_NAME,
    MAX_PARAM_CHARS,
    MAX_PARAMS,
    MAX_VIEW_BYTES,
    SESSION_ALPHABET,
    LiveClass,
    RoundResult,
    check_session_code,
    distribution,
    fingerprint,
)
from core.classroom.store import SCHEMA_VERSION, ClassStore, new_attempt

NUMBER = Question("masks.sum", "masks", "views/masks.py", "How much weight is lost?", 0.5, tolerance=0.05)
CHOICE = Question("masks_predict", "masks", "views/masks.py", "Which key?", "b", options=("c", "a", "b"))
F = fingerprint(NUMBER)


def test_a_round_is_answered_changed_revealed_and_followed_by_a_second_that_keeps_the_first(engine):
    where = engine.db("class.db")
    live = LiveClass(where)
    code = live.open_session()
    assert len(code) == 6 and set(code) <= set(SESSION_ALPHABET) and live.is_open(code)
    ada, bo = live.join(code, "  Ada  "), live.join(code.lower(), "Bo")  # a code typed in lower case is the same
    start = live.pulse(code)

    live.answer(code, ada, "masks.sum", F, "0.4", False)
    live.answer(code, ada, "masks.sum", F, "0.5", True)  # changed her mind before the reveal: replaces the first
    live.answer(code, bo, "masks.sum", F, "0.9", False)
    assert live.pulse(code) == start  # answers do not make the learners' pages rerun
    assert engine.sql(where, "SELECT answer, correct, round FROM live_answers ORDER BY id") == [
        ("0.5", 1, 1),
        ("0.9", 0, 1),
    ]
    assert (live.round(code, "masks.sum").number, live.round(code, "masks.sum").revealed) == (1, False)

    live.reveal(code, "masks.sum", F)
    assert live.round(code, "masks.sum").revealed and live.round(code, "masks.sum").fingerprint == F
    assert live.pulse(code) == start + 1
    with pytest.raises(ValueError, match="revealed"):
        live.answer(code, bo, "masks.sum", F, "0.5", True)  # after the reveal, no changing one's answer

    assert live.new_round(code, "masks.sum") == 2 and live.pulse(code) == start + 2
    live.answer(code, bo, "masks.sum", F, "0.52", True)
    first, second = live.rounds(code, "masks.sum", F)
    assert (first.number, first.revealed, first.answers, first.correct) == (1, True, ("0.5", "0.9"), (True, False))
    assert (second.number, second.revealed, second.answers, second.correct) == (2, False, ("0.52",), (True,))
    assert engine.sql(where, "SELECT round, count(*) FROM live_answers GROUP BY round ORDER BY round") == [
        (1, 2),
        (2, 1),
    ]
    assert live.rounds(code, "other.q", F) == [RoundResult(1, False, None, (), (), 0)]  # an unasked question

    seq = live.publish(code, "masks", {"temperature": "0.5", "masks_mode": "causal"})
    assert seq == 1 and live.pulse(code) == start + 3
    seen = live.view(code)
    assert seen is not None and (seen.page, seen.params, seen.seq) == (
        "masks",
        {"temperature": "0.5", "masks_mode": "causal"},
        1,
    )
    assert live.publish(code, "", {}) == 2 and live.view(code).page == ""  # the default page's url_path is ""

    live.close_session(code)
    assert not live.is_open(code) and live.pulse(code) == start + 5 and live.view(code) is None
    with pytest.raises(ValueError, match="closed"):
        live.answer(code, ada, "masks.sum", F, "0.5", True)
    with pytest.raises(ValueError, match="closed"):
        live.join(code, "Cy")
    with pytest.raises(ValueError, match="not open"):
        live.reveal(code, "masks.sum")
    assert engine.sql(where, "SELECT count(*) FROM live_answers") == [(3,)]


def test_answers_to_another_version_of_the_question_are_counted_apart(engine):
    live = LiveClass(engine.db("class.db"))
    code = live.open_session()
    moved = fingerprint(
        Question(NUMBER.id, "masks", "views/masks.py", "How much weight is lost?", 0.25, tolerance=0.05)
    )
    assert moved != F and fingerprint(NUMBER) == F  # same question, same digest; another answer, another one
    for name, version, given in (("Ada", F, "0.5"), ("Bo", moved, "0.25"), ("Cy", F, "0.6")):
        live.answer(code, live.join(code, name), NUMBER.id, version, given, True)
    (mine,) = live.rounds(code, NUMBER.id, F)
    assert (mine.answers, mine.other, mine.n) == (("0.5", "0.6"), 1, 2)
    (theirs,) = live.rounds(code, NUMBER.id, moved)
    assert (theirs.answers, theirs.other) == (("0.25",), 2)


def test_two_sessions_never_mix_answers_reveals_views_or_csv(engine):
    where = engine.db("class.db")
    teacher, worker = LiveClass(where), LiveClass(where)  # two workers of one class server, one database
    a, b = teacher.open_session(), teacher.open_session()
    assert a != b
    in_a, in_b = worker.join(a, "Ada"), worker.join(b, "Bo")
    worker.answer(a, in_a, NUMBER.id, F, "0.5", True)
    worker.answer(b, in_b, NUMBER.id, F, "0.9", False)
    with pytest.raises(ValueError, match="join"):
        worker.answer(a, in_b, NUMBER.id, F, "0.1", False)  # Bo's id is of session b
    teacher.reveal(a, NUMBER.id)
    teacher.publish(a, "masks", {"k": "1"})
    assert [r.answers for r in worker.rounds(a, NUMBER.id, F)] == [("0.5",)]
    assert [r.answers for r in worker.rounds(b, NUMBER.id, F)] == [("0.9",)]
    assert worker.round(a, NUMBER.id).revealed and not worker.round(b, NUMBER.id).revealed
    assert worker.view(a) is not None and worker.view(b) is None
    assert worker.pulse(a) == 2 and worker.pulse(b) == 0
    names_a = [row["name"] for row in csv.DictReader(io.StringIO(teacher.answers_csv(a)))]
    assert names_a == ["Ada"]
    teacher.close_session(a)
    assert not worker.is_open(a) and worker.is_open(b)
    worker.answer(b, in_b, NUMBER.id, F, "0.45", True)  # b goes on


def test_the_csv_has_the_names_and_quotes_what_a_spreadsheet_would_run_while_rounds_carry_no_names(engine):
    live = LiveClass(engine.db("class.db"))
    code = live.open_session()
    live.answer(code, live.join(code, "=HYPERLINK(1)"), CHOICE.id, fingerprint(CHOICE), "a", False)
    live.answer(code, live.join(code, "Bo"), NUMBER.id, F, "-0.5", False)
    rows = list(csv.reader(io.StringIO(live.answers_csv(code))))
    assert rows[0] == ["question", "round", "name", "answer", "correct", "fingerprint", "at", "learner"]
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows[1:]] == [
        ("masks.sum", "1", "Bo", "'-0.5", "0"),
        ("masks_predict", "1", "'=HYPERLINK(1)", "a", "0"),
    ]
    result = live.rounds(code, CHOICE.id, fingerprint(CHOICE))[0]
    assert "HYPERLINK" not in repr(result)  # what the teacher's chart gets has answers, never names


def test_thirty_learners_answering_from_thirty_threads_at_once_lose_nothing(engine):
    where = engine.db("class.db")
    teacher = LiveClass(where)
    code = teacher.open_session()
    workers = [LiveClass(where) for _ in range(2)]  # two workers' engines, as behind the class server's proxy
    ids: list[str | None] = [None] * 30
    start, errors = threading.Barrier(30), []

    def learner(i: int) -> None:
        try:
            live = workers[i % 2]
            start.wait(timeout=60)
            ids[i] = live.join(code, f"learner {i}")
            live.answer(code, ids[i], NUMBER.id, F, str(i), False)
            live.answer(code, ids[i], NUMBER.id, F, str(100 + i), True)  # each changes their mind once
        except Exception as e:  # noqa: BLE001 - reported below, with which learner failed
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=learner, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and not any(t.is_alive() for t in threads)
    (result,) = teacher.rounds(code, NUMBER.id, F)
    assert sorted(result.answers, key=int) == [str(100 + i) for i in range(30)] and all(result.correct)
    assert engine.sql(where, "SELECT count(*), count(DISTINCT learner) FROM live_answers") == [(30, 30)]


def _schema_1(engine, where) -> None:
    """The class database as the lab wrote it before live sessions: the checkpoint's answers at schema 1."""
    serial = "INTEGER PRIMARY KEY" if engine.kind == "sqlite" else "SERIAL PRIMARY KEY"
    statements = [
        f"""CREATE TABLE answers (id {serial}, learner TEXT NOT NULL, class_code TEXT NOT NULL, attempt TEXT NOT NULL,
            question TEXT NOT NULL, answer TEXT NOT NULL, correct INTEGER NOT NULL CHECK (correct IN (0, 1)),
            at TEXT NOT NULL)""",
        "CREATE INDEX answers_by_class ON answers (class_code, learner, attempt)",
        "CREATE TABLE lab_schema (component VARCHAR(32) PRIMARY KEY, version INTEGER NOT NULL)",
        "INSERT INTO lab_schema VALUES ('class', 1)",
        "INSERT INTO answers (learner, class_code, attempt, question, answer, correct, at) VALUES "
        "('Ada', '7B', 'a1', 'q1', '3', 1, '2024-01-01T00:00:00+00:00')",
    ]
    if engine.kind == "sqlite":
        with sqlite3.connect(where) as conn:
            for s in [*statements, "PRAGMA user_version = 1"]:
                conn.execute(s)
        conn.close()
    else:
        import psycopg

        with psycopg.connect(where) as conn:
            for s in statements:
                conn.execute(s)


def test_a_schema_1_database_with_checkpoint_answers_migrates_to_2_and_keeps_them(engine):
    where = engine.db("class.db")
    _schema_1(engine, where)
    live = LiveClass(where)
    code = live.open_session()  # the first use migrates
    live.answer(code, live.join(code, "Bo"), NUMBER.id, F, "0.5", True)
    assert SCHEMA_VERSION == 2
    assert engine.sql(where, "SELECT component, version FROM lab_schema") == [("class", 2)]
    store = ClassStore(where)
    assert [(a.learner, a.answer, a.correct) for a in store.answers("7B")] == [("Ada", "3", True)]
    store.record("Cy", "7B", new_attempt(), [("q1", "4", False)])  # the checkpoint goes on as before
    assert engine.sql(where, "SELECT id, learner FROM answers ORDER BY id") == [(1, "Ada"), (2, "Cy")]
    assert engine.sql(where, "SELECT answer FROM live_answers") == [("0.5",)]


@pytest.mark.parametrize(
    "call, says",
    [
        (lambda live, code, me: live.join("I0L1O0", "Ada"), "session code"),  # look-alikes are not in codes
        (lambda live, code, me: live.join("ABC", "Ada"), "session code"),
        (lambda live, code, me: live.join("x" * 10_000, "Ada"), "session code"),
        (lambda live, code, me: live.join("ZZZZZZ", "Ada"), "no session"),
        (lambda live, code, me: live.join(code, "A" * 10_000), f"at most {MAX_NAME}"),
        (lambda live, code, me: live.join(code, "Ada\x1b[31m"), "control characters"),
        (lambda live, code, me: live.join(code, "Ada\nBo"), "control characters"),
        (lambda live, code, me: live.join(code, "   "), "enter your name"),
        (lambda live, code, me: live.join(code, None), "enter your name"),
        (lambda live, code, me: live.answer(code, me, "Masks sum!", F, "1", True), "question id"),
        (lambda live, code, me: live.answer(code, me, "q" * 65, F, "1", True), "question id"),
        (lambda live, code, me: live.answer(code, me, NUMBER.id, "not-hex", "1", True), "fingerprint"),
        (lambda live, code, me: live.answer(code, "0" * 32, NUMBER.id, F, "1", True), "join"),
        (lambda live, code, me: live.answer(code, "'; DROP TABLE x", NUMBER.id, F, "1", True), "join"),
        (lambda live, code, me: live.answer(code, me, NUMBER.id, F, "9" * 10_000, True), "at most 200"),
        (lambda live, code, me: live.answer(code, me, NUMBER.id, F, "1\r\n2", True), "printable"),
        (lambda live, code, me: live.answer(code, me, NUMBER.id, F, "", True), "empty"),
        (lambda live, code, me: live.publish(code, "../etc/passwd", {}), "not a page"),
        (lambda live, code, me: live.publish(code, "masks", {f"k{i}": "1" for i in range(MAX_PARAMS + 1)}), "at most"),
        (lambda live, code, me: live.publish(code, "masks", {"k": "x" * 2_001}), "at most 2000"),
        (lambda live, code, me: live.publish(code, "masks", {"k": 3}), "text"),
        (lambda live, code, me: live.publish(code, "masks", {"bad key!": "1"}), "widget key"),
        (lambda live, code, me: live.publish(code, "masks", ["k"]), "dict"),
        (lambda live, code, me: live.new_round(code, NUMBER.id, fingerprint="x"), "fingerprint"),
    ],
)
def test_hostile_input_is_refused_with_a_clear_message_and_nothing_kept(tmp_path, call, says):
    live = LiveClass(tmp_path / "class.db")
    code = live.open_session()
    me = live.join(code, "Ada")
    with pytest.raises(ValueError, match=says) as caught:
        call(live, code, me)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200
    with sqlite3.connect(tmp_path / "class.db") as conn:
        assert conn.execute("SELECT count(*) FROM live_answers").fetchone() == (0,)
        assert conn.execute("SELECT count(*), min(name) FROM live_learners").fetchone() == (1, "Ada")
        assert conn.execute("SELECT page, pulse FROM live_sessions").fetchone() == (None, 0)
    conn.close()


def test_a_session_takes_at_most_max_learners_joins(tmp_path, monkeypatch):
    monkeypatch.setattr(live_module, "MAX_LEARNERS", 2)
    live = LiveClass(tmp_path / "class.db")
    code, other = live.open_session(), live.open_session()
    for name in ("Ada", "Bo"):
        live.join(code, name)
    with pytest.raises(ValueError, match="full"):
        live.join(code, "Cy")
    live.join(other, "Cy")  # counted per session


def test_a_session_code_is_read_as_typed_on_a_phone():
    assert check_session_code("  abc234 ") == "ABC234"
    with pytest.raises(ValueError, match="no I, L, O, 0 or 1"):
        check_session_code("ABC230")


def _result(answers: list[str]) -> RoundResult:
    return RoundResult(1, False, None, tuple(answers), tuple(False for _ in answers), 0)


def test_a_choice_distribution_counts_each_option_in_the_questions_order():
    got = distribution(_result(["a", "b", "a", "a", "zz", "c"]), CHOICE)  # counted by hand: c 1, a 3, b 1
    assert (got.labels, got.counts, got.edges, got.unreadable) == (("c", "a", "b"), (1, 3, 1), None, 1)
    empty = distribution(_result([]), CHOICE)
    assert (empty.counts, empty.unreadable) == ((0, 0, 0), 0)


@pytest.mark.parametrize(
    "answers, tolerance",
    [
        (["0.5", "0.52", "0.61", "0.9", "0.1", "1,5", "-0.2"], 0.05),
        (["3", "3", "4", "7", "12"], 0.0),
        (["1e6", "-1e6", "0"], 0.01),  # a wild spread: bins merged, not 10**8 of them
        (["0.3", "0.3"], 0.05),
    ],
)
def test_number_bins_count_as_numpy_histogram_on_the_same_edges(answers, tolerance):
    question = Question("q", "t", "views/masks.py", "?", 0.5, tolerance=tolerance)
    got = distribution(_result([*answers, "not a number"]), question)
    values = np.array([float(a.replace(",", ".")) for a in answers])
    assert got.edges is not None and got.unreadable == 1
    assert len(got.counts) == len(got.edges) - 1 == len(got.labels) <= 20
    assert got.edges[0] <= values.min() and got.edges[-1] >= values.max()  # every answer in a bin
    expected, _ = np.histogram(values, bins=np.array(got.edges))
    assert list(got.counts) == expected.tolist() and sum(got.counts) == len(answers)
    if tolerance and len(got.counts) < 20:
        assert np.allclose(np.diff(got.edges), 2 * tolerance)  # a bin is as wide as the tolerance window


def test_number_bins_say_nothing_of_the_labs_answer():
    answers = _result(["0.12", "0.33", "0.71"])
    one = distribution(answers, Question("q", "t", "views/masks.py", "?", 0.3, tolerance=0.05))
    other = distribution(answers, Question("q", "t", "views/masks.py", "?", 0.7, tolerance=0.05))
    assert one == other


# ---- issue 35: hostile numbers, a database removed mid-class, names and rejoins -----------------------------


@pytest.mark.parametrize("given", ["1e308", "-1.7e308", "9" * 190, "1000000.5", "inf", "nan"])
def test_a_number_answer_beyond_the_stores_bound_is_refused_at_submit_with_the_range(tmp_path, given):
    live = LiveClass(tmp_path / "class.db")
    code = live.open_session()
    me = live.join(code, "Ada")
    with pytest.raises(ValueError, match=r"between -1e\+06 and 1e\+06") as caught:
        live.answer(code, me, NUMBER.id, F, given, False, number=True)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200
    live.answer(code, me, NUMBER.id, F, "-1e6", False, number=True)  # the bound itself is kept
    live.answer(code, me, CHOICE.id, fingerprint(CHOICE), "inf", False)  # a choice's text is not a number
    assert [r.answers for r in live.rounds(code, NUMBER.id, F)] == [("-1e6",)]


@pytest.mark.parametrize("tolerance", [0.05, 0.0, 1e-320, float("inf"), float("nan")])
def test_a_distribution_never_raises_on_stored_huge_or_non_finite_numbers(tolerance):
    """Rows written before the bound (or by another version of the lab) are read as they are: counted apart as
    unreadable, never binned, and the bins stay at most MAX_BINS."""
    question = Question("q", "t", "views/masks.py", "?", 0.5, tolerance=tolerance)
    stored = ["1e308", "-1.7e308", "9" * 190, "1e400", "-inf", "nan", "1000001", "0.5", "0.52", "-1e6"]
    got = distribution(_result(stored), question)
    assert got.unreadable == 7 and sum(got.counts) == 3
    assert got.edges is not None and len(got.counts) == len(got.edges) - 1 <= 20
    assert all(np.isfinite(got.edges)) and got.edges[0] <= -1e6 and got.edges[-1] >= 0.52
    expected, _ = np.histogram([0.5, 0.52, -1e6], bins=np.array(got.edges))
    assert list(got.counts) == expected.tolist()


def _remove_database(path) -> None:
    """`rm class.db*` under a running class: the file, its WAL and shared memory, while connections hold them open."""
    for found in path.parent.glob(path.name + "*"):
        if not found.name.endswith(".lock"):
            found.unlink()


def test_a_database_removed_mid_class_refuses_answers_and_joins_and_the_room_counts_none_of_them(tmp_path):
    from core.database import StoreError

    path = tmp_path / "class.db"
    teacher, worker = LiveClass(path), LiveClass(path)  # two workers of one class server
    code = teacher.open_session()
    ada = worker.join(code, "Ada")
    worker.answer(code, ada, NUMBER.id, F, "0.5", True)
    assert teacher.rounds(code, NUMBER.id, F)[0].n == 1
    _remove_database(path)

    with pytest.raises(StoreError, match="removed or replaced") as caught:
        worker.answer(code, ada, NUMBER.id, F, "0.6", True)
    assert "new class session" in str(caught.value)
    with pytest.raises((StoreError, ValueError), match="removed or replaced|no session"):
        worker.join(code, "Bo")
    with pytest.raises((StoreError, ValueError), match="removed or replaced"):
        teacher.rounds(code, NUMBER.id, F)  # the room never says "1 answered" of answers no longer kept
    with pytest.raises((StoreError, ValueError), match="removed or replaced"):
        teacher.rounds(code, NUMBER.id, F)  # nor on the next poll
    with pytest.raises(ValueError):
        worker.answer(code, ada, NUMBER.id, F, "0.7", True)

    fresh = teacher.open_session()  # what the message says to do: a new session, on a new database
    worker.answer(fresh, worker.join(fresh, "Ada"), NUMBER.id, F, "0.5", True)
    assert [r.n for r in teacher.rounds(fresh, NUMBER.id, F)] == [1]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM live_answers").fetchone() == (1,)  # on disk this time
    conn.close()


def test_a_second_join_under_a_taken_name_is_refused_whatever_its_case_and_spaces(engine):
    where = engine.db("class.db")
    live = LiveClass(where)
    code, other = live.open_session(), live.open_session()
    live.join(code, "Ada Lovelace")
    for same in ("ada lovelace", "  ADA   Lovelace ", "Ada LOVELACE"):
        with pytest.raises(ValueError, match="already has that name.*another name"):
            live.join(code, same)
    live.join(other, "ada lovelace")  # per session
    live.join(code, "Ada L.")
    assert engine.sql(where, "SELECT count(*) FROM live_learners") == [(3,)]


def test_the_csv_tells_learners_apart_by_their_place_in_the_session(tmp_path):
    live = LiveClass(tmp_path / "class.db")
    code = live.open_session()
    for name, given in (("Ada", "0.5"), ("Bo", "0.6")):
        live.answer(code, live.join(code, name), NUMBER.id, F, given, False)
    rows = list(csv.DictReader(io.StringIO(live.answers_csv(code))))
    assert [(r["name"], r["learner"]) for r in rows] == [("Ada", "1"), ("Bo", "2")]


def test_a_learner_is_found_again_by_their_id_while_the_session_is_open(tmp_path):
    live = LiveClass(tmp_path / "class.db")
    code = live.open_session()
    ada = live.join(code, "Ada")
    assert live.learner(ada) == (code, "Ada")
    assert live.learner("0" * 32) is None and live.learner("not an id") is None
    live.close_session(code)
    assert live.learner(ada) is None


def test_a_stored_view_is_read_back_within_a_bound_that_the_largest_publish_fits(engine):
    """The teacher's view is stored as JSON text and read back by the one bounded JSON reader: the largest view
    publish() accepts (every character one json.dumps escapes to six bytes) reads back whole, and a stored view
    larger than the bound (written to the database by hand) is refused with a message, never parsed."""
    where = engine.db("class.db")
    live = LiveClass(where)
    code = live.open_session()
    largest = {f"{i:064d}": "\x01" * MAX_PARAM_CHARS for i in range(MAX_PARAMS)}
    assert len(json.dumps(largest, ensure_ascii=False, sort_keys=True).encode()) <= MAX_VIEW_BYTES
    live.publish(code, "masks", largest)
    assert live.view(code).params == largest
    padded = json.dumps({"k": " " * MAX_VIEW_BYTES})
    engine.sql(where, f"UPDATE live_sessions SET params = '{padded}' WHERE code = '{code}' RETURNING code")
    with pytest.raises(ValueError, match="the teacher's published view: .* is more than the 619,502 it may hold"):
        live.view(code)
