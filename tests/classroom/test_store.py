"""core.classroom.store and results: answers kept in SQLite (WAL, versioned), nothing lost under concurrent
writers, a damaged file set aside with a notice, and the teacher's figures worked out by hand."""

import sqlite3
import threading

import pytest

from core.classroom.results import passes, summarise, to_csv
from core.classroom.store import SCHEMA_VERSION, ClassStore, StoreError, new_attempt


def test_answers_are_kept_and_read_back_with_the_schema_version_and_wal(tmp_path):
    store = ClassStore(tmp_path / "sub" / "class.db")  # the folder is created on first use
    attempt = new_attempt()
    store.record("  Ada  ", "7B", attempt, [("scores.shape", "3 x 4", True), ("mask.sum", "0.7", False)])
    got = store.answers("7B")
    assert [(a.learner, a.question, a.answer, a.correct) for a in got] == [
        ("Ada", "scores.shape", "3 x 4", True),
        ("Ada", "mask.sum", "0.7", False),
    ]
    assert got[0].attempt == attempt and got[0].at.endswith("+00:00")
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.answers("8A") == [] and store.class_codes() == ["7B"]


def test_the_default_path_comes_from_lab_class_db(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CLASS_DB", str(tmp_path / "from-env.db"))
    assert ClassStore().path == tmp_path / "from-env.db"
    monkeypatch.delenv("LAB_CLASS_DB")
    monkeypatch.chdir(tmp_path)
    ClassStore().record("Ada", "7B", new_attempt(), [("q1", "1", True)])
    assert (tmp_path / "class.db").is_file()


def test_thirty_learners_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "class.db"
    errors = []

    def learner(i):
        try:
            store = ClassStore(path)  # each session has its own store, as each browser session does
            for q in range(10):
                store.record(f"learner {i}", "7B", new_attempt(), [(f"q{q}", str(q), q % 2 == 0)])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=learner, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    answers = ClassStore(path).answers("7B")
    assert len(answers) == 300
    assert {a.learner for a in answers} == {f"learner {i}" for i in range(30)}


def test_a_damaged_file_is_set_aside_with_a_notice_and_a_fresh_database_started(tmp_path):
    path = tmp_path / "class.db"
    path.write_bytes(b"this is not a database at all" * 100)
    store = ClassStore(path)
    assert store.answers() == []  # no traceback: a fresh, empty database
    assert store.notice and "kept as class.db.damaged-" in store.notice
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("class.db.damaged-")]
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"this is not a database")  # nothing deleted
    store.record("Ada", "7B", new_attempt(), [("q1", "1", True)])
    assert len(ClassStore(path).answers()) == 1


def test_a_database_from_a_newer_lab_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "class.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer lab"):
        ClassStore(path).answers()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1


@pytest.mark.parametrize(
    "learner, code, message",
    [
        ("", "7B", "enter your name"),
        ("x" * 65, "7B", "at most 64"),
        ("Ada\nDROP", "7B", "control characters"),
        ("Ada", "7B; DROP TABLE answers", "class code"),
        ("Ada", "", "class code"),
    ],
)
def test_bad_names_and_class_codes_are_refused_before_anything_is_written(tmp_path, learner, code, message):
    store = ClassStore(tmp_path / "class.db")
    with pytest.raises(ValueError, match=message):
        store.record(learner, code, new_attempt(), [("q1", "1", True)])
    assert store.answers() == []


def test_the_pass_mark_is_eight_of_ten_exactly():
    assert passes(8, 10) and passes(4, 5) and passes(10, 10)
    assert not passes(7, 10) and not passes(79, 100) and not passes(0, 0)


def test_the_summary_counts_each_learners_latest_attempt(tmp_path):
    store = ClassStore(tmp_path / "class.db")
    first, second = new_attempt(), new_attempt()
    store.record("Ada", "7B", first, [(f"q{i}", "x", i < 3) for i in range(10)])  # 3/10, superseded
    store.record("Ada", "7B", second, [(f"q{i}", "x", i < 8) for i in range(10)])  # 8/10: passes
    store.record("Bo", "7B", new_attempt(), [(f"q{i}", "x", i < 7) for i in range(10)])  # 7/10: does not
    summary = summarise(store.answers("7B"))
    assert [(s.learner, s.right, s.asked, s.passed) for s in summary.learners] == [
        ("Ada", 8, 10, True),
        ("Bo", 7, 10, False),
    ]
    assert summary.pass_rate == 0.5
    hardest = summary.questions[0]  # q8 and q9: both learners wrong; q7: Bo wrong only
    assert (hardest.question, hardest.wrong, hardest.asked) == ("q8", 2, 2)
    assert [(d.question, d.wrong) for d in summary.questions[:3]] == [("q8", 2), ("q9", 2), ("q7", 1)]
    assert summarise([]).pass_rate is None


def test_the_csv_has_every_answer_and_no_cell_a_spreadsheet_would_run(tmp_path):
    store = ClassStore(tmp_path / "class.db")
    store.record('=HYPERLINK("http://x")', "7B", new_attempt(), [("q1", "-1+2", False), ("q2", "@SUM(A1)", True)])
    lines = to_csv(store.answers()).splitlines()
    assert lines[0] == "learner,class_code,attempt,question,answer,correct,at"
    assert len(lines) == 3
    assert all(not cell.startswith(("=", "+", "-", "@")) for line in lines[1:] for cell in line.split(","))
    assert "'-1+2" in lines[1] and "'@SUM(A1)" in lines[2]
