"""core.release.evaluation.latency: p50 / p95 of a suggestion's time are the nearest-rank percentiles (the lab's one
rule, core.numbers), counted here by hand from durations set on a fake clock: each is a time one request took."""

import math
import types

from core.release.evaluation import latency
from core.release.evaluation.eval_report import EvalConfig
from core.release.serving.policy import DEFAULT_POLICY
from tests.stubs import TOK, Bigram


def fake_clock(durations_ms):
    """perf_counter's (start, end) pair for each timed call (the warm-up call is not timed), `durations_ms` apart."""
    ticks = []
    for i, ms in enumerate(durations_ms):
        start = 10.0 * (i + 1)
        ticks += [start, start + ms / 1000]
    it = iter(ticks)
    return types.SimpleNamespace(perf_counter=lambda: next(it))


def test_p50_and_p95_are_the_nearest_rank_of_the_measured_times(monkeypatch):
    durations = [float(d) for d in (7, 3, 19, 11, 5, 2, 13, 17, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71)]
    config = EvalConfig(latency_samples=len(durations))
    monkeypatch.setattr(latency, "time", fake_clock(durations))
    got = latency.measure_suggestion_latency(Bigram(), TOK.encode("ab ab ab ab"), config, DEFAULT_POLICY)
    ordered = sorted(durations)  # n = 20: p50 is the 10th smallest, p95 the 19th
    assert got is not None and got.samples == 20
    assert math.isclose(got.p50_ms, ordered[9], rel_tol=1e-9) and math.isclose(got.p95_ms, ordered[18], rel_tol=1e-9)
    assert math.isclose(got.mean_ms, sum(durations) / 20, rel_tol=1e-9)
    # an interpolated p50 (numpy's default) would be (ordered[9] + ordered[10]) / 2 = 30.0, a time no request took
    assert got.p50_ms != (ordered[9] + ordered[10]) / 2


def test_no_samples_is_no_latency():
    got = latency.measure_suggestion_latency(
        Bigram(), TOK.encode("ab ab"), EvalConfig(latency_samples=0), DEFAULT_POLICY
    )
    assert got is None
