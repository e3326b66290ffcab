"""core.release.evaluation.bootstrap: the document bootstrap against a loop written out here with the same seeded draws,
and closed forms (equal ratios, two documents, one document)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.release.evaluation.bootstrap import MIN_DOCUMENTS, RESAMPLES, document_interval


def quantile_by_hand(values, q):
    """numpy's default (linear) quantile, by hand: position (n - 1) q between the sorted neighbours."""
    s = sorted(values)
    h = (len(s) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (h - lo) * (s[hi] - s[lo])


def interval_by_loops(num, den, scale, confidence, seed, resamples):
    """Drop documents with nothing in the denominator; draw D documents with replacement `resamples` times
    (numpy's seeded multinomial, the one random source the two share); each draw's ratio of sums by fsum."""
    docs = [(n, d) for n, d in zip(num, den) if d > 0]
    D = len(docs)
    if D < 2:
        return None
    draws = np.random.default_rng(seed).multinomial(D, [1.0 / D] * D, size=resamples)  # (R, D) times drawn
    ratios = []
    for times in draws.tolist():
        top = math.fsum(t * n for t, (n, _) in zip(times, docs))
        bottom = math.fsum(t * d for t, (_, d) in zip(times, docs))
        ratios.append(scale * top / bottom)
    alpha = (1 - confidence) / 2
    return quantile_by_hand(ratios, alpha), quantile_by_hand(ratios, 1 - alpha)


@given(
    docs=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 80)), min_size=1, max_size=12),
    seed=st.integers(0, 2**32 - 1),
    confidence=st.sampled_from([0.5, 0.9, 0.95]),
    scale=st.sampled_from([1.0, 100.0]),
)
def test_interval_equals_the_loop_with_the_same_draws(docs, seed, confidence, scale):
    num = np.array([n for n, _ in docs], dtype=float)
    den = np.array([d for _, d in docs], dtype=float)
    got = document_interval(num, den, scale=scale, confidence=confidence, seed=seed, resamples=300)
    want = interval_by_loops(num.tolist(), den.tolist(), scale, confidence, seed, 300)
    if want is None:
        assert got is None
    else:
        assert (got.low, got.high) == pytest.approx(want, rel=1e-12, abs=1e-12)
        assert got.low <= got.high


def test_documents_with_one_ratio_give_a_zero_width_interval_at_it():
    den = np.array([3.0, 10.0, 1.0, 7.0, 40.0])
    ci = document_interval(0.25 * den, den, scale=100.0, seed=4)
    assert ci.low == pytest.approx(25.0, rel=1e-14) and ci.high == pytest.approx(25.0, rel=1e-14)


def test_two_documents_span_their_two_ratios():
    # A draw holds the first document twice (1/4), both (1/2) or the second twice (1/4): the 2.5% and 97.5%
    # quantiles of 2000 draws lie inside the outer quarters, so they are the two documents' own ratios.
    ci = document_interval([1.0, 3.0], [2.0, 2.0], seed=0)
    assert (ci.low, ci.high) == (0.5, 1.5)
    half = document_interval([1.0, 3.0], [2.0, 2.0], confidence=0.4, seed=0)  # 30% and 70%: both drawn
    assert (half.low, half.high) == (1.0, 1.0)  # (1 + 3) / (2 + 2)


def test_one_document_has_no_interval():
    assert MIN_DOCUMENTS == 2
    assert document_interval([3.0], [4.0]) is None
    assert document_interval([3.0, 0.0], [4.0, 0.0]) is None  # the second document has nothing to count
    assert document_interval([], []) is None


def test_seeded_reproducible_and_wider_with_more_confidence():
    rng = np.random.default_rng(1)
    den = rng.integers(20, 200, size=30).astype(float)
    num = den * rng.uniform(0.1, 0.4, size=30)
    a = document_interval(num, den, seed=3)
    assert a == document_interval(num, den, seed=3) and a != document_interval(num, den, seed=4)
    narrow = document_interval(num, den, confidence=0.5, seed=3)
    assert a.low < narrow.low <= narrow.high < a.high
    point = num.sum() / den.sum()
    assert a.low < point < a.high
    assert RESAMPLES == 2000
