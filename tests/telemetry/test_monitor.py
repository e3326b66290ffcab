"""core.telemetry.monitor: histograms and PSI against independent references, and every per-version figure (its
latency percentiles counted by hand, nearest rank) against counts made directly from the database with sqlite3."""

import math
import random
import sqlite3

import pytest

from core.release.baselines.baseline_bundle import load_baseline
from core.telemetry import monitor
from core.telemetry.store import TelemetryStore
from core.telemetry.traffic import replay

from .helpers import held_out_documents, ngram_bundle, toy_corpus


def test_the_histogram_puts_each_value_in_its_tenth():
    values = [0.0, 0.05, 0.1, 0.1999, 0.2, 0.55, 0.9, 0.95, 1.0]
    expected = [0] * 10
    for v in values:
        expected[min(9, int(v * 10))] += 1  # [i/10, (i+1)/10), with 1.0 in the last bin
    assert list(monitor.histogram(values)) == expected == [2, 2, 1, 0, 0, 1, 0, 0, 0, 3]


def test_psi_by_hand_and_the_drift_rule():
    live, ref = [30, 10], [10, 30]
    a = [(30 + 0.5) / 41, (10 + 0.5) / 41]
    e = [(10 + 0.5) / 41, (30 + 0.5) / 41]
    assert monitor.psi(live, ref) == pytest.approx(math.fsum((x - y) * math.log(x / y) for x, y in zip(a, e)))
    assert monitor.psi(ref, ref) == 0.0
    rng = random.Random(0)
    reference = [rng.betavariate(8, 2) for _ in range(300)]  # confident at release time
    same = [rng.betavariate(8, 2) for _ in range(200)]
    shifted = [rng.betavariate(2, 8) for _ in range(200)]  # unsure now
    assert monitor.drift(same, reference).verdict == "stable"
    drifted = monitor.drift(shifted, reference)
    assert drifted.verdict == "warning" and drifted.psi > monitor.PSI_WARN and "Warning" in drifted.message
    few = monitor.drift(shifted[: monitor.MIN_DRIFT_EVENTS - 1], reference)
    assert few.verdict == "not enough traffic" and few.psi > monitor.PSI_WARN  # the figure, but no verdict
    assert monitor.drift(shifted, None).verdict == "no reference"
    assert monitor.drift([], reference).verdict == "not enough traffic"


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    """Synthetic traffic from two versions (the n-gram under two version names, seeded differently), with
    one error and one page event without slices, so every branch is met."""
    root = tmp_path_factory.mktemp("monitor")
    corpus = toy_corpus(root)
    bundle, documents = load_baseline(ngram_bundle(root, corpus)), held_out_documents(corpus)
    store = TelemetryStore(root / "t.db")
    replay(bundle, documents, seed=1, sessions=2, store=store, max_events=120, version="aaaa000000000001")
    replay(bundle.predictor, documents, seed=2, sessions=3, store=store, max_events=90, version="bbbb000000000002")
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE events SET error = 'RuntimeError: x', char_class = NULL WHERE id IN (5, 150)")
    return store


def sql(store, query, params=()):
    with sqlite3.connect(store.path) as conn:
        return conn.execute(query, params).fetchall()


def nearest_rank(values, q):
    values = sorted(values)
    return values[math.ceil(q / 100 * len(values)) - 1]


def test_every_figure_per_version_is_the_databases_own_count(database):
    rows = monitor.load(database)
    assert monitor.versions(rows) == ["aaaa000000000001", "bbbb000000000002"]
    for h, q, p, o in zip(
        monitor.health(rows), monitor.input_quality(rows), monitor.predictions(rows), monitor.outcomes(rows)
    ):
        v = (h.version,)
        [(requests, errors)] = sql(database, "SELECT count(*), count(error) FROM events WHERE version = ?", v)
        latencies = [r[0] for r in sql(database, "SELECT latency_ms FROM events WHERE version = ?", v)]
        assert (h.requests, h.errors) == (requests, errors) and errors == 1
        assert (h.latency_p50_ms, h.latency_p95_ms) == (nearest_rank(latencies, 50), nearest_rank(latencies, 95))
        [(mean_chars, unseen, cut)] = sql(
            database,
            "SELECT avg(prompt_chars), avg(unseen_chars > 0), avg(truncated) FROM events WHERE version = ?",
            v,
        )
        assert q.mean_prompt_chars == pytest.approx(mean_chars, rel=1e-12) and (q.share_unseen, q.share_truncated) == (
            unseen,
            cut,
        )
        [(shown, accepted, other)] = sql(
            database,
            "SELECT sum(shown), sum(outcome = 'accepted'), sum(outcome = 'typed_other') FROM events "
            "WHERE version = ? AND shown = 1",
            v,
        )
        assert (o.shown, o.accepted, o.typed_other) == (shown, accepted, other) and accepted > 0
        assert o.acceptance_rate == accepted / (accepted + other)
        bins = sql(
            database,
            "SELECT min(CAST(top1_prob * 10 AS INTEGER), 9), count(*) FROM events WHERE version = ? "
            "AND top1_prob IS NOT NULL GROUP BY 1",
            v,
        )
        expected = [0] * 10
        for b, n in bins:
            expected[b] = n
        assert list(p.histogram) == expected and p.shown == shown


@pytest.mark.parametrize("cost", [0.0, 1.0, 2.5])
def test_the_live_net_keystrokes_saved_are_the_databases_own_count(database, cost):
    """core.release.evaluation.utility's figure, live: the accepted suggestions' characters - 1, less the price of each
    shown suggestion typed over, per matured one; counted here by SQL."""
    rows = monitor.load(database)
    for o in monitor.figures(rows, attention_cost=cost).outcomes:
        [(saved, other, matured)] = sql(
            database,
            "SELECT coalesce(sum(CASE WHEN outcome = 'accepted' THEN suggestion_chars - 1 ELSE 0 END), 0), "
            "coalesce(sum(outcome = 'typed_other'), 0), count(outcome) FROM events WHERE version = ? AND shown = 1",
            (o.version,),
        )
        assert (o.saved, o.attention_cost) == (saved, cost) and saved > 0
        assert o.net_saved == pytest.approx(saved - cost * other, rel=1e-12)
        assert o.net_per_shown == pytest.approx((saved - cost * other) / matured, rel=1e-12)


def test_slice_figures_are_the_databases_own_count(database):
    rows = monitor.load(database)
    found = monitor.slices(rows, "char_class")
    assert {s.name for s in found} >= {"letter", "whitespace", monitor.UNLABELLED}
    for s in found:
        label = "char_class IS NULL" if s.name == monitor.UNLABELLED else "char_class = ?"
        params = (s.version,) if s.name == monitor.UNLABELLED else (s.version, s.name)
        [(requests, shown, matured, accepted)] = sql(
            database,
            "SELECT count(*), coalesce(sum(shown = 1), 0), coalesce(sum(shown = 1 AND outcome IS NOT NULL), 0), "
            f"coalesce(sum(shown = 1 AND outcome = 'accepted'), 0) FROM events WHERE version = ? AND {label}",
            params,
        )
        assert (s.requests, s.shown, s.matured, s.accepted) == (requests, shown, matured, accepted)
    names = [s.name for s in found if s.version == "aaaa000000000001"]
    assert names[-1] == monitor.UNLABELLED  # in the evaluation's order, the unknown last
    assert sum(s.requests for s in found) == len(rows)
    with pytest.raises(ValueError, match="family"):
        monitor.slices(rows, "colour")


def test_time_buckets_add_up_to_the_whole(database):
    rows = monitor.load(database)
    for width in ("minute", "hour", "day"):
        timeline = monitor.over_time(rows, width)
        for h in monitor.health(rows):
            assert sum(t.requests for t in timeline if t.version == h.version) == h.requests
        counted: dict = {}
        for r in rows:  # each row in the bucket its own time names, counted one by one
            key = (r["version"], monitor.bucket_of(r["at"], width))
            counted[key] = counted.get(key, 0) + 1
        assert {(t.version, t.bucket): t.requests for t in timeline} == counted
        for v in monitor.versions(rows):
            named = [t.bucket for t in timeline if t.version == v]
            assert named == sorted(named)  # in time order ('YYYY-MM-DD HH:MM' sorts as time)
    assert monitor.bucket_of("2026-01-02T03:04:59.5+00:00", "minute") == "2026-01-02 03:04"
    assert monitor.bucket_of("2026-01-02T03:04:59.5+00:00", "hour") == "2026-01-02 03:00"
    assert monitor.load(database, surfaces=["page"]) == [] and monitor.load(database, kind="completion") == []
