"""core.telemetry.traffic: seeded synthetic typing over held-out documents, bounded, the same events for the same
seed (but for latency and time), and outcomes that are the true ones of the text."""

import pytest

from core.release.baselines.baseline_bundle import load_baseline
from core.telemetry.record import outcome
from core.telemetry.store import TelemetryStore
from core.telemetry.traffic import replay

from .helpers import held_out_documents, ngram_bundle, toy_corpus

VARYING = ("id", "at", "latency_ms")  # what a replay does not fix


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("traffic")
    corpus = toy_corpus(root)
    return load_baseline(ngram_bundle(root, corpus)), held_out_documents(corpus)


def fixed(rows):
    return [tuple(v for k, v in r.items() if k not in VARYING) for r in rows]


def test_the_same_seed_gives_the_same_events_and_another_seed_others(served, tmp_path):
    bundle, documents = served
    store = TelemetryStore(tmp_path / "t.db")
    first = replay(bundle, documents, seed=5, sessions=3, store=store, max_events=60)
    again = replay(bundle, documents, seed=5, sessions=3, store=store, max_events=60)
    rows = store.rows()
    assert first.events == again.events == 60 == first.recorded and len(rows) == 120
    assert fixed(rows[:60]) == fixed(rows[60:])  # one store: the same salt, so even the hashes agree
    assert first.top1 == again.top1
    other = replay(bundle, documents, seed=6, sessions=3, store=store, max_events=60)
    assert fixed(store.rows()[120:]) != fixed(rows[:60]) and other.events == 60
    sessions = [{r["session"] for r in part} for part in (rows[:60], rows[60:])]
    assert sessions[0] == sessions[1] and len(sessions[0]) == 3


def test_outcomes_are_the_texts_own_and_the_counts_add_up(served, tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_TELEMETRY_STORE_TEXT", "1")  # to check each event against its document
    bundle, documents = served
    store = TelemetryStore(tmp_path / "t.db")
    result = replay(bundle, documents, seed=1, sessions=2, store=store, max_events=150)
    rows = store.rows()
    by_name = {d.name: d.text for d in documents}
    assert result.events == len(rows) <= 150 and result.errors == 0
    assert result.shown == sum(r["shown"] for r in rows) > 0
    assert result.accepted == sum(r["shown"] == 1 and r["outcome"] == "accepted" for r in rows) > 0
    for r in rows:
        doc = by_name[r["document"]]
        assert doc.startswith(r["text"]) and r["prompt_chars"] == len(r["text"])  # typed from the document start
        i = len(r["text"])
        assert r["char_class"] is not None and (i == len(doc) or r["char_class"] != "end of document")
        if r["suggestion_chars"]:
            # The outcome is the rule applied to the real next characters: with the suggestion's own length
            # (the text is not stored), accepted means the document goes on with some suggestion of that length.
            assert r["outcome"] in ("accepted", "typed_other", None)
            if r["outcome"] is None:
                assert i + r["suggestion_chars"] > len(doc)  # only the document's end leaves it undecided
        else:
            assert r["outcome"] is None
    assert outcome("ab", "x", "xab") == "accepted"  # the rule replay uses (tests/telemetry/test_record.py)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"max_events": 0}, "max_events"),
        ({"max_events": 10**6}, "max_events"),
        ({"sessions": 0}, "sessions"),
        ({"seed": -1}, "seed"),
        ({"surface": "browser"}, "surface"),
    ],
)
def test_bad_arguments_are_refused_with_a_message(served, changes, message):
    bundle, documents = served
    args = dict(seed=0, sessions=1, store=None, max_events=5) | changes
    with pytest.raises(ValueError, match=message):
        replay(bundle, documents, **args)


def test_without_a_store_nothing_is_written_and_a_bare_predictor_needs_its_version(served):
    bundle, documents = served
    result = replay(bundle.predictor, documents, seed=0, store=None, max_events=20, version="abc")
    assert result.recorded == 0 and result.events == 20 and len(result.top1) == 20
    with pytest.raises(ValueError, match="version"):
        replay(bundle.predictor, documents, seed=0, store=None, max_events=5)
    with pytest.raises(ValueError, match="no documents"):
        replay(bundle, [], seed=0, store=None)
