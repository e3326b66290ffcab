"""The Monitoring page: synthetic traffic replayed against two versions, and the page's figures (requests, errors,
latency p50 / p95, acceptance rate, a slice) checked against counts and percentiles made directly from the
database with sqlite3; an empty, a damaged and a newer database give a message and no traceback; text from the
database is never rendered as markdown or HTML; filling is the teacher's."""

import math
import re
import sqlite3

import pytest
from apptest import all_text, figure, figures, open_page, table, unescaped
from telemetry.helpers import held_out_documents, ngram_bundle, toy_corpus, transformer_bundle

from core.model.bundle import load_bundle
from core.release.baselines.baseline_bundle import load_baseline
from core.settings import PASSCODE_ENV
from core.telemetry.schema import Event
from core.telemetry.store import ENV, STORE_TEXT_ENV, TelemetryStore
from core.telemetry.traffic import replay

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")
PASSCODE = "monitor-7c1e-teacher"
EVENT = dict(
    surface="cli", kind="suggestion", version="", text="x = ", prompt_chars=4, unseen_chars=0, truncated=False,
    latency_ms=2.0, predictor="ngram", top1_prob=0.9, shown=True, suggestion_chars=3,
)  # fmt: skip
HOSTILE = "<img src=x onerror=alert(1)> **bold** [link](http://evil.example/p.png)"


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    root = tmp_path_factory.mktemp("monitoring")
    corpus = toy_corpus(root)
    # 300 steps: the tiny transformer learns the text well enough to suggest (about 5 s)
    return ngram_bundle(root, corpus), transformer_bundle(root, corpus, iters=300), held_out_documents(corpus)


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "telemetry.db"
    monkeypatch.setenv(ENV, str(path))
    return path


def page(transformer):
    return open_page("monitoring", bundle=("toy transformer", transformer))


def sql(path, query, params=()):
    with sqlite3.connect(path) as conn:
        return conn.execute(query, params).fetchall()


def nearest_rank(values, q):
    values = sorted(values)
    return values[math.ceil(q / 100 * len(values)) - 1]


def test_the_pages_figures_are_the_databases_own_counts_for_two_versions(versions, db):
    ngram, transformer, documents = versions
    store = TelemetryStore(db)
    first = replay(load_baseline(ngram), documents, seed=1, sessions=2, store=store, max_events=80)
    second = replay(load_bundle(transformer), documents, seed=2, sessions=3, store=store, max_events=60)
    at = page(transformer)
    shown = all_text(at)
    health = table(at, "latency p50 ms")
    assert list(health["version"]) == [first.version, second.version]
    for _, row in health.iterrows():
        v = (row["version"],)
        [(requests, errors)] = sql(db, "SELECT count(*), count(error) FROM events WHERE version = ?", v)
        latencies = [r[0] for r in sql(db, "SELECT latency_ms FROM events WHERE version = ?", v)]
        assert (row["requests"], row["errors"]) == (requests, errors)
        assert row["latency p50 ms"] == nearest_rank(latencies, 50)
        assert row["latency p95 ms"] == nearest_rank(latencies, 95)
        assert f"{requests} requests, {errors} errors, latency p50 {nearest_rank(latencies, 50):.1f} ms" in shown
    outcomes = table(at, "acceptance rate")
    for _, row in outcomes.iterrows():
        [(accepted, matured)] = sql(
            db,
            "SELECT coalesce(sum(outcome = 'accepted'), 0), count(outcome) FROM events WHERE version = ? AND shown = 1",
            (row["version"],),
        )
        assert (row["accepted"], row["matured"]) == (accepted, matured)
        assert (row["acceptance rate"] == accepted / matured) if matured else math.isnan(row["acceptance rate"])
    assert outcomes["accepted"].iloc[0] > 0  # the n-gram's suggestions were taken: the rate is not vacuous
    slices = table(at, "mean top-1")
    row = slices[(slices["version"] == first.version) & (slices["slice"] == "char_class=whitespace")].iloc[0]
    [(requests, matured, accepted)] = sql(
        db,
        "SELECT count(*), coalesce(sum(shown = 1 AND outcome IS NOT NULL), 0), "
        "coalesce(sum(shown = 1 AND outcome = 'accepted'), 0) FROM events WHERE version = ? AND char_class = ?",
        (first.version, "whitespace"),
    )
    assert (row["requests"], row["matured"], row["accepted"]) == (requests, matured, accepted) and requests > 0
    # The drift section compares the selected transformer's live traffic with its release-time replay.
    drift = figure(at, "Top-1 probability: live against release time")
    assert len(drift["data"]) == 2
    assert any(word in shown for word in ("Stable: PSI", "Warning: the live", "Not enough traffic yet"))


def test_a_rerun_reads_the_database_again_only_when_it_changed(versions, db, monkeypatch):
    """The figures are cached on the store's stamp: a rerun with nothing new reads nothing, and a new event or a
    matured outcome shows at the next rerun."""
    from core.telemetry import monitor

    ngram, transformer, documents = versions
    store = TelemetryStore(db)
    replay(load_baseline(ngram), documents, seed=1, sessions=2, store=store, max_events=40)
    reads = []
    real_load = monitor.load
    monkeypatch.setattr(monitor, "load", lambda *a, **k: reads.append(1) or real_load(*a, **k))
    at = page(transformer)
    assert len(reads) == 1
    at.run()
    assert len(reads) == 1, "nothing changed: the rerun used the cached figures"

    def requests_and_matured() -> tuple[int, int]:
        health, outcomes = table(at, "latency p50 ms"), table(at, "acceptance rate")
        return int(health["requests"].sum()), int(outcomes["matured"].sum())

    before = requests_and_matured()
    pending = store.record(Event(**{**EVENT, "version": sql(db, "SELECT version FROM events LIMIT 1")[0][0]}))
    at.run()
    assert len(reads) == 2 and requests_and_matured() == (before[0] + 1, before[1])
    store.set_outcome(pending, "accepted")
    at.run()
    assert len(reads) == 3 and requests_and_matured() == (before[0] + 1, before[1] + 1)


def test_an_empty_database_says_what_fills_it(versions, db):
    at = page(versions[1])
    assert "Nothing recorded yet" in all_text(at)
    [live] = figures(at)  # the live picture, empty: no bar until a suggestion is served
    assert not live.get("data") and [a["text"] for a in live["layout"]["annotations"]] == [
        "No suggestion requests recorded yet"
    ]


def test_two_requests_are_counted_in_whole_numbers_and_give_no_percentiles(versions, db):
    """A fresh server (issue 38): 2 requests are no basis for a p95, so the page says so in words instead of
    drawing one, and the requests axis has no tick between whole requests."""
    store = TelemetryStore(db)
    for latency in (2.0, 9.0):
        store.record(Event(**{**EVENT, "version": "v1", "latency_ms": latency}))
    at = page(versions[1])
    assert "only 2 requests so far" in all_text(at) and "percentiles need at least" in all_text(at)
    assert not any(f["layout"]["title"]["text"].startswith("Latency per request") for f in figures(at))
    health = table(at, "error rate")
    assert health["requests"].tolist() == [2] and health["latency p95 ms"].isna().all()
    live = figure(at, "Requests per")
    axis = live["layout"]["yaxis"]
    assert axis.get("tickformat") == "d" and axis.get("dtick") == 1
    low, high = live["layout"]["xaxis"]["range"]
    assert high - low > 2, "one minute's bar fills the whole chart"


def test_a_damaged_database_is_set_aside_with_a_message(versions, db):
    db.write_bytes(b"garbage, not sqlite " * 100)
    at = page(versions[1])
    assert "could not be read" in all_text(at) and "Nothing recorded yet" in all_text(at)


def test_a_database_from_a_newer_lab_is_refused_with_a_message(versions, db):
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    at = page(versions[1])
    assert [e.value for e in at.error if "newer lab" in e.value]


def test_text_from_the_database_is_never_rendered(versions, db, monkeypatch):
    monkeypatch.setenv(STORE_TEXT_ENV, "1")
    store = TelemetryStore(db)
    for i in range(3):
        store.record(
            Event(surface="page", kind="suggestion", version=HOSTILE[:64], text=HOSTILE, prompt_chars=len(HOSTILE),
                  unseen_chars=0, truncated=False, latency_ms=1.0 + i, top1_prob=0.5, shown=True,
                  suggestion_chars=3, outcome="accepted", document=HOSTILE, char_class="letter")
        )  # fmt: skip
    at = page(versions[1])
    at.selectbox(key="mon_family").set_value("document").run()
    assert not at.exception
    rendered = all_text(at)
    # Shown as the text it is (every markup character escaped), never as an image, a link or bold type.
    assert HOSTILE[:40] in unescaped(rendered)
    assert not re.search(r"(?<!\\)<img|(?<!\\)\]\(http|(?<!\\)\*\*bold", rendered)
    for fig in figures(at):
        labels = [str(x) for trace in fig["data"] for x in (trace.get("x") or [])] + [
            str(trace.get("name")) for trace in fig["data"]
        ]
        assert not any("<" in label for label in labels), labels


def test_filling_is_the_teachers_and_writes_the_synthetic_events(versions, db, monkeypatch):
    at = page(versions[1])
    assert not [b for b in at.button if b.key == "mon_fill"]  # read-only without a passcode
    monkeypatch.setenv(PASSCODE_ENV, PASSCODE)
    at = page(versions[1])
    at.text_input(key="teacher_passcode_input").set_value(PASSCODE)
    at.button(key="teacher_unlock").click().run()
    at.number_input(key="mon_fill_count").set_value(30).run()
    at.button(key="mon_fill").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert sql(db, "SELECT count(*), min(surface), max(surface) FROM events") == [(30, "synthetic", "synthetic")]
    assert "Served 30 synthetic suggestions" in all_text(at)
    over_time = table(at, "latency p50 ms")  # per minute: a fill that crosses a minute's end is two rows
    assert over_time["requests"].sum() == 30 and over_time["version"].nunique() == 1  # the one version filled


def test_the_autocomplete_page_records_each_new_text_once_and_its_outcome_on_accept(versions, db):
    transformer = versions[1]
    at = open_page("autocomplete", {"ac_prompt": "def main("}, bundle=("toy transformer", transformer))
    at.text_area(key="ac_prompt").set_value("def add3(a, b):\n    ret").run()
    at.slider(key="ac_k").set_value(5).run()  # a rerun for another widget records nothing new
    suggestions = (
        "SELECT surface, prompt_chars, suggestion_chars, outcome FROM events WHERE kind = 'suggestion' ORDER BY id"
    )
    rows = sql(db, suggestions)
    assert rows[0][:2] == ("page", len("def main(")) and rows[1][:2] == ("page", len("def add3(a, b):\n    ret"))
    assert len(rows) == 2 and rows[1][2] > 0, rows  # the default text, then the typed one: it suggests
    shown = sql(db, "SELECT surface, prompt_chars, suggestion_chars FROM events WHERE kind = 'completion' ORDER BY id")
    completion = at.session_state["ac_completion_recorded"]  # the request the page last recorded
    assert [r[:2] for r in shown] == [("page", len("def main(")), ("page", len("def add3(a, b):\n    ret"))]
    assert completion[1] == "def add3(a, b):\n    ret"  # the same two texts, once each: the slider recorded nothing
    said = next(m.value for m in at.markdown if m.value.startswith("**Completion** ("))
    assert shown[1][2] == int(re.match(r"\*\*Completion\*\* \((\d+) characters", said).group(1))  # what was shown
    at.button(key="ac_accept").click().run()
    assert not at.exception, [e.value for e in at.exception]
    rows = sql(db, "SELECT outcome, char_class FROM events WHERE kind = 'suggestion' ORDER BY id")
    assert len(rows) == 3 and rows[1] == ("accepted", "letter")  # matured by the accepted text, "urn..."
