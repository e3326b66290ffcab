"""core.telemetry.store: events kept in SQLite (WAL, versioned, migrated), the text kept only when turned on, and
every failure (a path that cannot be made, a full database, a newer or damaged file) reported, never raised."""

import hashlib
import math
import sqlite3
import threading

import pytest

from core.telemetry import schema
from core.telemetry.store import (
    DEFAULT_MAX_BYTES,
    ENV,
    MAX_BYTES_ENV,
    STORE_TEXT_ENV,
    Event,
    StoreError,
    TelemetryStore,
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
        return conn.execute(query, params).fetchall()


def test_an_event_is_kept_with_wal_the_schema_version_and_a_salted_hash_not_the_text(tmp_path):
    store = TelemetryStore(tmp_path / "sub" / "telemetry.db")  # the folder is made on first write
    event_id = store.record(event())
    assert event_id == 1
    [row] = store.rows()
    assert (row["surface"], row["version"], row["prompt_chars"], row["top1_prob"], row["shown"]) == (
        "cli", "0123456789abcdef", len(TEXT), 0.75, 1,
    )  # fmt: skip
    assert row["at"].endswith("+00:00") and row["outcome"] is None
    assert row["text"] is None  # by default the learner's text is not stored
    [(salt,)] = raw(store.path, "SELECT value FROM meta WHERE key = 'salt'")
    assert row["prompt_hash"] == hashlib.sha256(bytes.fromhex(salt) + TEXT.encode()).hexdigest()
    assert row["prompt_hash"] != hashlib.sha256(TEXT.encode()).hexdigest()  # unsalted would be guessable
    files = [p for p in store.path.parent.iterdir() if p.name.startswith("telemetry.db")]  # the file and its WAL
    assert all(TEXT.encode() not in p.read_bytes() for p in files) and row["session"] != "s1"
    assert raw(store.path, "PRAGMA user_version")[0][0] == len(schema.MIGRATIONS) == 1
    assert raw(store.path, "PRAGMA journal_mode")[0][0] == "wal"
    assert store.health().ok and store.health().recorded == 1


def test_the_text_is_stored_only_when_the_operator_turns_it_on(tmp_path, monkeypatch):
    monkeypatch.setenv(STORE_TEXT_ENV, "1")
    store = TelemetryStore(tmp_path / "t.db")
    store.record(event(text="x" * 5000))
    assert store.rows()[0]["text"] == "x" * schema.MAX_TEXT_CHARS  # bounded: the last MAX_TEXT_CHARS
    monkeypatch.setenv(STORE_TEXT_ENV, "yes")  # only "1" turns it on
    assert TelemetryStore(tmp_path / "t.db").store_text is False


def test_a_database_from_a_newer_lab_is_refused_reported_and_left_alone(tmp_path):
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {len(schema.MIGRATIONS) + 1}")
    store = TelemetryStore(path)
    assert store.record(event()) is None  # no exception into serving
    assert store.health().failed == 1 and "newer lab" in store.health().last_error
    with pytest.raises(StoreError, match="newer lab"):
        store.rows()
    assert raw(path, "PRAGMA user_version")[0][0] == len(schema.MIGRATIONS) + 1


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


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "t.db"
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
    assert raw(path, "SELECT count(*) FROM events")[0][0] == 400
    assert raw(path, "SELECT count(DISTINCT session) FROM events")[0][0] == 8


def test_an_outcome_matures_once_and_a_bad_one_is_refused(tmp_path):
    store = TelemetryStore(tmp_path / "t.db")
    first = store.record(event())
    assert store.set_outcome(first, "accepted", "letter") is True
    assert store.set_outcome(first, "typed_other", "digit") is True  # no failure, but nothing changes
    assert store.set_outcome(first, "maybe") is False and store.health().failed == 1
    row = store.rows()[0]
    assert (row["outcome"], row["char_class"]) == ("accepted", "letter")


def test_bad_values_are_bounded_or_refused_never_raised(tmp_path):
    store = TelemetryStore(tmp_path / "t.db")
    assert store.record(event(top1_prob=math.nan, entropy_nats=math.inf, error="E" * 999)) == 1
    row = store.rows()[0]
    assert row["top1_prob"] is None and row["entropy_nats"] is None and len(row["error"]) == schema.MAX_ERROR_CHARS
    assert store.record(event(surface="browser")) is None  # not a surface: refused, counted
    assert store.record("not an event") is None
    assert store.health().failed == 2 and store.count() == 1


def test_a_second_schema_is_one_more_migration_and_keeps_the_rows(tmp_path, monkeypatch):
    path = tmp_path / "t.db"
    TelemetryStore(path).record(event())
    v2 = ("ALTER TABLE events ADD COLUMN note TEXT", "CREATE INDEX events_by_outcome ON events (outcome)")
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS + (v2,))
    store = TelemetryStore(path)
    assert store.record(event()) == 2
    assert raw(path, "PRAGMA user_version")[0][0] == 2
    assert "note" in [c[1] for c in raw(path, "PRAGMA table_info(events)")]
    assert [r["id"] for r in store.rows()] == [1, 2]
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])  # an older lab now refuses it
    with pytest.raises(StoreError, match="newer lab"):
        TelemetryStore(path).rows()


def test_the_default_path_comes_from_lab_telemetry_db_and_reading_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path / "from-env.db"))
    assert telemetry_path() == tmp_path / "from-env.db" == TelemetryStore().path
    monkeypatch.delenv(ENV)
    monkeypatch.chdir(tmp_path)
    store = TelemetryStore()
    assert store.rows() == [] and store.count() == 0 and not (tmp_path / "telemetry.db").exists()
    store.record(event())
    assert (tmp_path / "telemetry.db").is_file()


def test_the_stamp_changes_with_every_new_event_and_every_matured_outcome_only(tmp_path):
    store = TelemetryStore(tmp_path / "t.db")
    assert store.stamp() == (0, 0, 0) and not store.path.exists()  # reading creates nothing
    first = store.record(event())
    after_first = store.stamp()
    assert after_first[1:] == (first, 0)
    assert store.stamp() == after_first  # nothing written: the same stamp
    store.record(event())
    after_second = store.stamp()
    assert after_second != after_first
    assert store.set_outcome(first, "accepted")
    matured = store.stamp()
    assert matured != after_second and matured[1:] == (after_second[1], 1)
    assert store.set_outcome(first, "typed_other")  # already matured: nothing changes
    assert store.stamp() == matured
    assert raw(store.path, "SELECT count(*), count(outcome) FROM events") == [(2, 1)]
