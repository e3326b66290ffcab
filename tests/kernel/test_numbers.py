"""core.numbers: the integer check and the nearest-rank percentile, against hand counts and numpy's inverted CDF."""

import math

import numpy as np
import pytest

from core.numbers import integer, is_int, percentile


@pytest.mark.parametrize("x, expected", [(0, True), (-3, True), (10**30, True), (True, False), (False, False),
                                         (1.0, False), ("1", False), (None, False), (np.int64(3), False)])  # fmt: skip
def test_is_int_refuses_bools_and_everything_but_int(x, expected):
    assert is_int(x) is expected


def test_integer_returns_the_value_in_range_and_names_it_otherwise():
    assert integer("n", 5, 1, 5) == 5
    assert integer("n", 1, 1, None) == 1
    for bad, want in [(0, "n must be an integer in 1..5, got 0"), (6, "got 6"), (True, "got True"), (2.0, "got 2.0")]:
        with pytest.raises(ValueError, match=want.replace(".", r"\.")):
            integer("n", bad, 1, 5)
    with pytest.raises(ValueError, match=r"k must be an integer >= 1, got -1"):
        integer("k", -1, 1)


def test_percentile_is_the_nearest_rank_counted_by_hand():
    values = [15, 20, 35, 40, 50]  # the textbook example: p30 = 20, p40 = 20, p50 = 35, p100 = 50
    assert [percentile(values, q) for q in (5, 30, 40, 50, 100)] == [15, 20, 20, 35, 50]
    assert percentile([], 50) is None
    assert percentile([7.0], 95) == 7.0
    for q in (0, -1, 101, math.nan, True):
        with pytest.raises(ValueError):
            percentile(values, q)


@pytest.mark.parametrize("n", [1, 2, 3, 19, 20, 21, 100, 101])
@pytest.mark.parametrize("q", [1, 50, 95, 99, 100])
def test_percentile_is_numpys_inverted_cdf_and_always_a_measured_value(n, q):
    values = np.random.default_rng(n).exponential(size=n).tolist()
    got = percentile(values, q)
    assert got == float(np.percentile(values, q, method="inverted_cdf"))
    assert got in values
