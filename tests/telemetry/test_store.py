"""core.telemetry.store: events kept (SQLite in WAL, or PostgreSQL; versioned, migrated), the text kept only when
turned on, and every failure (a path that cannot be made, a server that cannot be reached, a full database, a newer
or damaged file) reported, never raised. The tests taking `engine` run on both engines (tests/db.py)."""

import hashlib
import math
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from core.database import URL_ENV, StoreError
from core.telemetry import schema
from core.telemetry.schema import Event
from core.telemetry.store import (
    DEFAULT_MAX_BYTES,
    ENV,
    MAX_BYTES_ENV,
    STORE_TEXT_ENV,
    TelemetryStore,
    telemetry_location,
    telemetry_path,
)

TEXT = "def add(a, b):\n    ret"


def event(**changes) -> Event:
    values = dict(
        surface="cli", kind="suggestion", version="0123456789abcdef", text=TEXT, prompt_chars=len(TEXT),
        unseen_chars=0, truncated=False, latency_ms=3.5, predictor="ngram", policy_version=1, session="s1",
        top1_prob=0.75, entropy_nats=0.9, suggestion_chars=4, shown=True, column_bucket="4-7", indent="1",
    )  # fmt: skip
    values.update(changes)
    return Event(**values)


def raw(path, query: str, params: tuple = ()):
    with sqlite3.connect(path) as conn:
        found = conn.execute(query, params).fetchall()
    conn.close()
    return found


def execute(engine, where, statement: str) -> None:
    """A change made behind the store's back, through the driver itself."""
    if engine.kind == "sqlite":
        with sqlite3.connect(where) as conn:
            conn.execute(statement)
        conn.close()
    else:
        import psycopg

        with psycopg.connect(where) as pg:
            pg.execute(statement)


# The events table exactly as the store made it before core.database (schema 1, kept in PRAGMA user_version).
TODAYS_EVENTS = """CREATE TABLE events (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL,
    surface TEXT NOT NULL CHECK (surface IN ('page', 'cli', 'synthetic')),
    kind TEXT NOT NULL CHECK (kind IN ('suggestion', 'completion')),
    version TEXT NOT NULL, predictor TEXT, policy_version INTEGER, session TEXT, prompt_chars INTEGER NOT NULL,
    unseen_chars INTEGER NOT NULL, truncated INTEGER NOT NULL CHECK (truncated IN (0, 1)), prompt_hash TEXT NOT NULL,
    text TEXT, top1_prob REAL, entropy_nats REAL, suggestion_chars INTEGER,
    shown INTEGER CHECK (shown IS NULL OR shown IN (0, 1)), latency_ms REAL NOT NULL, error TEXT,
    outcome TEXT CHECK (outcome IS NULL OR outcome IN ('accepted', 'typed_other')),
    char_class TEXT, column_bucket TEXT, indent TEXT, document TEXT
)"""


@pytest.mark.smoke
def test_an_event_is_kept_with_the_schema_version_and_a_salted_hash_not_the_text(engine):
    where = engine.db("telemetry.db")
    store = TelemetryStore(where)
    event_id = store.record(event())
    assert event_id == 1
    [row] = store.rows()
    assert (row["surface"], row["version"], row["prompt_chars"], row["top1_prob"], row["shown"]) == (
        "cli", "0123456789abcdef", len(TEXT), 0.75, 1,
    )  # fmt: skip
    assert row["latency_ms"] == 3.5 and row["entropy_nats"] == 0.9  # 8-byte floats on both engines
    assert row["at"].endswith("+00:00") and row["outcome"] is None and row["text"] is None
    [(salt,)] = engine.sql(where, "SELECT value FROM meta WHERE key = 'salt'")
    assert row["prompt_hash"] == hashlib.sha256(bytes.fromhex(salt) + TEXT.encode()).hexdigest()
    assert engine.sql(where, "SELECT prompt_hash, session FROM events") == [(row["prompt_hash"], row["session"])]
    assert row["session"] != "s1"
    assert engine.sql(where, "SELECT component, version FROM lab_schema") == [("telemetry", len(schema.MIGRATIONS))]
    assert store.health().ok and store.health().recorded == 1


def test_a_sqlite_file_is_kept_in_wal_with_no_text_in_its_bytes(tmp_path):
    store = TelemetryStore(tmp_path / "sub" / "telemetry.db")  # the folder is made on first write
    assert store.record(event()) == 1
    [row] = store.rows()
    assert row["text"] is None  # by default the learner's text is not stored
    assert row["prompt_hash"] != hashlib.sha256(TEXT.encode()).hexdigest()  # unsalted would be guessable
    files = [p for p in store.path.parent.iterdir() if p.name.startswith("telemetry.db")]  # the file and its WAL
    assert all(TEXT.encode() not in p.read_bytes() for p in files) and row["session"] != "s1"
    assert raw(store.path, "PRAGMA user_version")[0][0] == len(schema.MIGRATIONS) == 1
    assert raw(store.path, "PRAGMA journal_mode")[0][0] == "wal"
    assert store.health().ok and store.health().recorded == 1


def test_the_text_is_stored_only_when_the_operator_turns_it_on(engine, monkeypatch):
    monkeypatch.setenv(STORE_TEXT_ENV, "1")
    where = engine.db("t.db")
    store = TelemetryStore(where)
    store.record(event(text="x" * 5000))
    assert store.rows()[0]["text"] == "x" * schema.MAX_TEXT_CHARS  # bounded: the last MAX_TEXT_CHARS
    monkeypatch.setenv(STORE_TEXT_ENV, "yes")  # only "1" turns it on
    assert TelemetryStore(where).store_text is False


def test_a_database_from_a_newer_lab_is_refused_reported_and_left_alone(tmp_path):
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as conn:  # as an older lab marks it (user_version only)
        conn.execute(f"PRAGMA user_version = {len(schema.MIGRATIONS) + 1}")
    store = TelemetryStore(path)
    assert store.record(event()) is None  # no exception into serving
    assert store.health().failed == 1 and "newer lab" in store.health().last_error
    with pytest.raises(StoreError, match="newer lab"):
        store.rows()
    assert raw(path, "PRAGMA user_version")[0][0] == len(schema.MIGRATIONS) + 1
    assert raw(path, "SELECT name FROM sqlite_master") == []


def test_a_database_of_todays_sqlite_code_is_adopted_at_its_version_with_its_rows_and_salt(tmp_path):
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as conn:  # exactly what the store wrote before lab_schema (schema 1, user_version)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(TODAYS_EVENTS)
        conn.execute("CREATE INDEX events_by_version ON events (version, at)")
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta (key, value) VALUES ('salt', '00112233445566778899aabbccddeeff')")
        conn.execute(
            "INSERT INTO events (at, surface, kind, version, prompt_chars, unseen_chars, truncated, prompt_hash, "
            "latency_ms, outcome) VALUES ('2024-01-01T00:00:00+00:00', 'page', 'suggestion', 'v0', 3, 0, 0, 'h', "
            "1.25, 'accepted')"
        )
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    store = TelemetryStore(path)
    assert [(r["id"], r["version"], r["latency_ms"], r["outcome"]) for r in store.rows()] == [
        (1, "v0", 1.25, "accepted")
    ]
    assert store.record(event()) == 2
    salt = bytes.fromhex("00112233445566778899aabbccddeeff")  # the file's own salt, still used
    assert store.rows()[1]["prompt_hash"] == hashlib.sha256(salt + TEXT.encode()).hexdigest()
    assert raw(path, "SELECT component, version FROM lab_schema") == [("telemetry", 1)]
    assert raw(path, "SELECT count(*) FROM meta") == [(1,)]  # its salt kept, not a second one


def test_a_database_marked_newer_in_lab_schema_is_refused_on_both_engines(engine):
    where = engine.db("t.db")
    assert TelemetryStore(where).record(event()) == 1
    ahead = len(schema.MIGRATIONS) + 1
    execute(engine, where, f"UPDATE lab_schema SET version = {ahead}")
    store = TelemetryStore(where)
    assert store.record(event()) is None and "newer lab" in store.health().last_error
    with pytest.raises(StoreError, match="newer lab"):
        store.rows()
    assert engine.sql(where, "SELECT version FROM lab_schema") == [(ahead,)]
    assert engine.sql(where, "SELECT count(*) FROM events") == [(1,)]


def test_a_damaged_file_is_set_aside_with_a_notice_and_a_fresh_database_started(tmp_path):
    path = tmp_path / "t.db"
    path.write_bytes(b"not a database at all " * 200)
    store = TelemetryStore(path)
    assert store.record(event()) == 1
    assert store.notice and "kept as t.db.damaged-" in store.notice
    [aside] = [p for p in tmp_path.iterdir() if p.name.startswith("t.db.damaged-") and not p.name.endswith("-wal")]
    assert aside.read_bytes().startswith(b"not a database")  # nothing deleted
    assert store.count() == 1


def test_a_path_that_cannot_be_made_fails_writes_without_raising_and_says_why(tmp_path):
    (tmp_path / "file").write_text("a regular file, not a folder")
    store = TelemetryStore(tmp_path / "file" / "t.db")  # its parent cannot be created (even as root)
    assert store.record(event()) is None and store.set_outcome(1, "accepted") is False
    health = store.health()
    assert (health.recorded, health.failed) == (0, 2) and not health.ok
    assert "cannot create the folder" in health.last_error


def test_past_the_size_limit_writes_are_skipped_and_reported(tmp_path, monkeypatch):
    monkeypatch.setenv(MAX_BYTES_ENV, "1")
    store = TelemetryStore(tmp_path / "t.db")
    assert store.record(event()) == 1  # an empty file is below any limit
    assert store.record(event()) is None and store.record(event()) is None
    health = store.health()
    assert (health.recorded, health.skipped) == (1, 2) and MAX_BYTES_ENV in health.last_error
    assert store.count() == 1


@pytest.mark.parametrize("value", ["lots", "-5", str(2**41)])
def test_an_unusable_size_limit_falls_back_to_the_default_and_says_so(tmp_path, monkeypatch, value):
    monkeypatch.setenv(MAX_BYTES_ENV, value)
    store = TelemetryStore(tmp_path / "t.db")
    assert store.max_bytes == DEFAULT_MAX_BYTES and MAX_BYTES_ENV in store.health().last_error
    assert store.record(event()) == 1


def test_concurrent_writers_lose_nothing(engine):
    path = engine.db("t.db")
    shared = TelemetryStore(path)
    errors, ids = [], []

    def writer(i: int) -> None:
        own = TelemetryStore(path)  # a second process would have its own store; threads share one too
        for n in range(25):
            for store in (own, shared):
                got = store.record(event(session=f"w{i}", prompt_chars=n))
                (ids if got is not None else errors).append(got)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and len(ids) == len(set(ids)) == 8 * 25 * 2
    assert engine.sql(path, "SELECT count(*), count(DISTINCT session) FROM events") == [(400, 8)]


def test_an_outcome_matures_once_and_a_bad_one_is_refused(engine):
    store = TelemetryStore(engine.db("t.db"))
    first = store.record(event())
    assert store.set_outcome(first, "accepted", "letter") is True
    assert store.set_outcome(first, "typed_other", "digit") is True  # no failure, but nothing changes
    assert store.set_outcome(first, "maybe") is False and store.health().failed == 1
    row = store.rows()[0]
    assert (row["outcome"], row["char_class"]) == ("accepted", "letter")


def test_bad_values_are_bounded_or_refused_never_raised(engine):
    store = TelemetryStore(engine.db("t.db"))
    assert store.record(event(top1_prob=math.nan, entropy_nats=math.inf, error="E" * 999)) == 1
    row = store.rows()[0]
    assert row["top1_prob"] is None and row["entropy_nats"] is None and len(row["error"]) == schema.MAX_ERROR_CHARS
    assert store.record(event(surface="browser")) is None  # not a surface: refused, counted
    assert store.record("not an event") is None
    assert store.health().failed == 2 and store.count() == 1


def test_a_second_schema_is_one_more_migration_and_keeps_the_rows(engine, monkeypatch):
    where = engine.db("t.db")
    TelemetryStore(where).record(event())

    def v2(conn: Connection) -> None:  # schema 1 -> 2, as a real second schema would be written
        conn.execute(text("ALTER TABLE events ADD COLUMN note TEXT"))
        conn.execute(text("CREATE INDEX events_by_outcome ON events (outcome)"))

    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS + (v2,))
    store = TelemetryStore(where)
    assert store.record(event()) == 2
    assert engine.sql(where, "SELECT version FROM lab_schema") == [(2,)]
    assert engine.sql(where, "SELECT count(note), count(*) FROM events") == [(0, 2)]  # the new column is there
    assert [r["id"] for r in store.rows()] == [1, 2]
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])  # an older lab now refuses it
    with pytest.raises(StoreError, match="newer lab"):
        TelemetryStore(where).rows()


def test_a_failing_migration_leaves_the_database_as_it_was(engine, monkeypatch):
    where = engine.db("t.db")
    TelemetryStore(where).record(event())

    def broken(conn: Connection) -> None:
        conn.execute(text("ALTER TABLE events ADD COLUMN note TEXT"))
        conn.execute(text("SELECT no_such_column FROM events"))  # fails after the first change

    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS + (broken,))
    store = TelemetryStore(where)
    assert store.record(event()) is None and store.health().failed == 1  # counted, never raised
    assert "from schema 1 to 2" in store.health().last_error and store.notice is None  # not taken for damage
    assert engine.sql(where, "SELECT version FROM lab_schema") == [(1,)]  # one transaction: nothing half done
    assert engine.sql(where, "SELECT count(*) FROM events") == [(1,)]
    with pytest.raises(Exception, match="note"):
        engine.sql(where, "SELECT note FROM events")


def test_a_server_that_cannot_be_reached_is_reported_without_its_password_and_never_raised(monkeypatch):
    monkeypatch.setenv(URL_ENV, "postgresql://lab:hunter2-pw@127.0.0.1:9/lab")  # port 9: nothing listens there
    store = TelemetryStore()
    assert store.path is None
    assert store.record(event()) is None and store.set_outcome(1, "accepted") is False
    health = store.health()
    assert health.failed == 2 and "cannot connect" in health.last_error and "127.0.0.1:9" in health.last_error
    assert "hunter2-pw" not in health.last_error and "hunter2-pw" not in health.path
    with pytest.raises(StoreError, match="cannot connect"):
        store.rows()


def test_a_database_url_without_a_scheme_is_refused_never_taken_for_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv(URL_ENV, "lab:s3cretPW@db-host:5432/lab")  # issue 35: the scheme forgotten
    monkeypatch.chdir(tmp_path)
    for store in (TelemetryStore(), TelemetryStore(telemetry_location())):  # as the pages and the CLI make it
        assert store.path is None and "s3cretPW" not in store.health().path
        assert store.record(event()) is None  # counted, never raised
        said = store.health().last_error
        assert URL_ENV in said and "no scheme" in said and "s3cretPW" not in said, said
        with pytest.raises(StoreError, match="no scheme") as caught:
            store.rows()
        assert "s3cretPW" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # nothing made on disk


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, a folder no file can be made in")
def test_a_telemetry_path_in_a_folder_that_cannot_hold_a_database_fails_at_once(monkeypatch):
    """Issue 35: LAB_TELEMETRY_DB=/proc/x waited on the first use's lock (which could not be made there) and then
    blamed another session. Now the first write says what is wrong, and no lock is waited on."""
    import core.files

    def no_waiting(*args, **kw):
        raise AssertionError("the lock was waited on")

    monkeypatch.delenv(URL_ENV, raising=False)
    monkeypatch.setenv(ENV, "/proc/x")
    monkeypatch.setattr(core.files, "FileLock", no_waiting)
    store = TelemetryStore()
    assert store.record(event()) is None  # counted, never raised
    said = store.health().last_error
    assert "'/proc/x'" in said and "its folder '/proc' cannot hold files" in said and f"set {ENV}" in said, said
    assert "another session" not in said


def test_the_default_path_comes_from_lab_telemetry_db_and_reading_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(URL_ENV, raising=False)
    monkeypatch.setenv(ENV, str(tmp_path / "from-env.db"))
    assert telemetry_path() == tmp_path / "from-env.db" == TelemetryStore().path
    monkeypatch.delenv(ENV)
    monkeypatch.chdir(tmp_path)
    store = TelemetryStore()
    assert store.rows() == [] and store.count() == 0 and not (tmp_path / "telemetry.db").exists()
    store.record(event())
    assert (tmp_path / "telemetry.db").is_file()


def test_the_stamp_changes_with_every_new_event_and_every_matured_outcome_only(engine):
    where = engine.db("t.db")
    store = TelemetryStore(where)
    assert store.stamp() == (0, 0, 0)  # nothing recorded yet (on SQLite: no file is made by reading)
    first = store.record(event())
    after_first = store.stamp()
    assert after_first[1:] == (first, 0) and after_first[0] != 0  # the file's inode, or the table's oid
    assert store.stamp() == after_first  # nothing written: the same stamp
    store.record(event())
    after_second = store.stamp()
    assert after_second != after_first
    assert store.set_outcome(first, "accepted")
    matured = store.stamp()
    assert matured != after_second and matured[1:] == (after_second[1], 1)
    assert store.set_outcome(first, "typed_other")  # already matured: nothing changes
    assert store.stamp() == matured
    assert engine.sql(where, "SELECT count(*), count(outcome) FROM events") == [(2, 1)]


def test_the_stamp_changes_when_the_tables_are_made_anew(engine):
    where = engine.db("t.db")
    store = TelemetryStore(where)
    store.record(event())
    before = store.stamp()
    if engine.kind == "sqlite":  # a damaged file set aside and a fresh one started: a new inode
        store.close()
        where.rename(where.with_name("kept.db"))
        for suffix in ("-wal", "-shm"):
            where.with_name(where.name + suffix).unlink(missing_ok=True)
    else:
        execute(engine, where, "DROP TABLE events, meta; DELETE FROM lab_schema")
    fresh = TelemetryStore(where)
    fresh.record(event())
    assert fresh.stamp()[1:] == before[1:] and fresh.stamp() != before  # same id and outcomes, other tables
