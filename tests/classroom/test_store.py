"""core.classroom.store and results: answers kept (SQLite in WAL, or PostgreSQL; versioned), nothing lost under
concurrent writers, a database of today's SQLite code adopted, a damaged file set aside with a notice, and the
teacher's figures worked out by hand. The tests taking `engine` run on both engines (tests/db.py)."""

import sqlite3
import threading

import pytest

from core.classroom.results import passes, summarise, to_csv
from core.classroom.store import SCHEMA_VERSION, ClassStore, class_db_location, new_attempt
from core.database import URL_ENV, StoreError


@pytest.mark.smoke
def test_answers_are_kept_and_read_back_with_the_schema_version(engine):
    where = engine.db("class.db")
    store = ClassStore(where)
    attempt = new_attempt()
    store.record("  Ada  ", "7B", attempt, [("scores.shape", "3 x 4", True), ("mask.sum", "0.7", False)])
    got = store.answers("7B")
    assert [(a.learner, a.question, a.answer, a.correct) for a in got] == [
        ("Ada", "scores.shape", "3 x 4", True),
        ("Ada", "mask.sum", "0.7", False),
    ]
    assert got[0].attempt == attempt and got[0].at.endswith("+00:00")
    assert engine.sql(where, "SELECT component, version FROM lab_schema") == [("class", SCHEMA_VERSION)]
    assert engine.sql(where, "SELECT learner, question, correct FROM answers ORDER BY id") == [
        ("Ada", "scores.shape", 1),
        ("Ada", "mask.sum", 0),
    ]
    assert store.answers("8A") == [] and store.class_codes() == ["7B"]


def test_a_sqlite_file_is_made_with_its_folder_in_wal_mode_and_its_version_in_user_version(tmp_path):
    store = ClassStore(tmp_path / "sub" / "class.db")  # the folder is created on first use
    store.record("Ada", "7B", new_attempt(), [("q1", "1", True)])
    assert store.path == tmp_path / "sub" / "class.db" and store.where == str(store.path)
    with sqlite3.connect(store.path) as conn:  # user_version too: a lab older than lab_schema refuses a newer file
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_the_default_path_comes_from_lab_class_db(tmp_path, monkeypatch):
    monkeypatch.delenv(URL_ENV, raising=False)
    monkeypatch.setenv("LAB_CLASS_DB", str(tmp_path / "from-env.db"))
    assert ClassStore().path == tmp_path / "from-env.db"
    monkeypatch.delenv("LAB_CLASS_DB")
    monkeypatch.chdir(tmp_path)
    ClassStore().record("Ada", "7B", new_attempt(), [("q1", "1", True)])
    assert (tmp_path / "class.db").is_file()


def test_lab_database_url_puts_the_class_on_a_server_without_its_password_in_messages(tmp_path, monkeypatch):
    url = "postgresql://teacher:s3cret-pw@127.0.0.1:9/lab"  # port 9: nothing listens there
    monkeypatch.setenv(URL_ENV, url)
    monkeypatch.setenv("LAB_CLASS_DB", str(tmp_path / "ignored.db"))
    assert class_db_location() == url
    store = ClassStore()
    assert store.path is None and "s3cret-pw" not in store.where and "127.0.0.1" in store.where
    with pytest.raises(StoreError) as caught:
        store.answers()
    message = str(caught.value)
    assert "cannot connect" in message and "127.0.0.1:9" in message and URL_ENV in message
    assert "s3cret-pw" not in message
    assert not (tmp_path / "ignored.db").exists()


@pytest.mark.parametrize(
    "url, says",
    [
        ("mysql://root:pw@host/lab", "only postgresql://"),
        ("postgresql://" + "x" * 2000, "more than 1024"),
        ("postgresql://user:pw@host:notaport/lab", "not a database URL"),
    ],
)
def test_an_unusable_database_url_is_one_clear_message(monkeypatch, url, says):
    monkeypatch.setenv(URL_ENV, url)
    store = ClassStore()  # making the store never raises; its first use says what is wrong
    with pytest.raises(StoreError, match=says) as caught:
        store.class_codes()
    assert "pw" not in str(caught.value).replace("postgresql://", "")


def test_thirty_learners_writing_at_once_lose_nothing(engine):
    where = engine.db("class.db")
    errors = []
    start = threading.Barrier(30)

    def learner(i):
        try:
            store = ClassStore(where)  # each session has its own store, as each browser session does
            start.wait(timeout=60)
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
    answers = ClassStore(where).answers("7B")
    assert len(answers) == 300
    assert {a.learner for a in answers} == {f"learner {i}" for i in range(30)}
    assert engine.sql(where, "SELECT count(*), count(DISTINCT learner) FROM answers") == [(300, 30)]


def test_two_workers_on_one_server_see_each_others_answers(engine):
    if engine.kind != "postgresql":
        pytest.skip("two worker processes share a database server; on SQLite they share a file (the test above)")
    where = engine.db()
    first, second = ClassStore(where), ClassStore(where)  # two processes' stores, each with its own pool
    first.record("Ada", "7B", new_attempt(), [("q1", "1", True)])
    assert [(a.learner, a.question) for a in second.answers("7B")] == [("Ada", "q1")]
    second.record("Bo", "7B", new_attempt(), [("q1", "2", False)])
    assert [a.learner for a in first.answers("7B")] == ["Ada", "Bo"]
    assert first.class_codes() == second.class_codes() == ["7B"]


def test_a_database_of_todays_sqlite_code_is_adopted_at_its_version_with_its_rows(tmp_path):
    path = tmp_path / "class.db"
    with sqlite3.connect(path) as conn:  # exactly what the store wrote before lab_schema (schema 1, user_version)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(
            """CREATE TABLE IF NOT EXISTS answers (
                id INTEGER PRIMARY KEY, learner TEXT NOT NULL, class_code TEXT NOT NULL, attempt TEXT NOT NULL,
                question TEXT NOT NULL, answer TEXT NOT NULL, correct INTEGER NOT NULL CHECK (correct IN (0, 1)),
                at TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS answers_by_class ON answers (class_code, learner, attempt);"""
        )
        conn.execute(
            "INSERT INTO answers (learner, class_code, attempt, question, answer, correct, at) VALUES "
            "('Ada', '7B', 'a1', 'q1', '3', 1, '2024-01-01T00:00:00+00:00')"
        )
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    store = ClassStore(path)
    assert [(a.learner, a.answer, a.correct) for a in store.answers("7B")] == [("Ada", "3", True)]
    store.record("Bo", "7B", new_attempt(), [("q1", "4", False)])
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT component, version FROM lab_schema").fetchall() == [("class", SCHEMA_VERSION)]
        assert conn.execute("SELECT id, learner FROM answers ORDER BY id").fetchall() == [(1, "Ada"), (2, "Bo")]
    conn.close()


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
    with sqlite3.connect(path) as conn:  # as an older lab marks it (user_version only)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer lab"):
        ClassStore(path).answers()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []  # nothing was made


def test_a_database_marked_newer_in_lab_schema_is_refused_on_both_engines(engine):
    where = engine.db("class.db")
    store = ClassStore(where)
    store.record("Ada", "7B", new_attempt(), [("q1", "1", True)])
    ahead = SCHEMA_VERSION + 1
    if engine.kind == "sqlite":
        with sqlite3.connect(where) as conn:
            conn.execute(f"UPDATE lab_schema SET version = {ahead}")
        conn.close()
    else:
        import psycopg

        with psycopg.connect(where) as conn:
            conn.execute(f"UPDATE lab_schema SET version = {ahead}")
    with pytest.raises(StoreError, match="newer lab"):
        ClassStore(where).answers()
    assert engine.sql(where, "SELECT version FROM lab_schema") == [(ahead,)]
    assert engine.sql(where, "SELECT count(*) FROM answers") == [(1,)]


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
def test_bad_names_and_class_codes_are_refused_before_anything_is_written(engine, learner, code, message):
    store = ClassStore(engine.db("class.db"))
    with pytest.raises(ValueError, match=message):
        store.record(learner, code, new_attempt(), [("q1", "1", True)])
    assert store.answers() == []


def test_the_pass_mark_is_eight_of_ten_exactly():
    assert passes(8, 10) and passes(4, 5) and passes(10, 10)
    assert not passes(7, 10) and not passes(79, 100) and not passes(0, 0)


def test_the_summary_counts_each_learners_latest_attempt(engine):
    store = ClassStore(engine.db("class.db"))
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
