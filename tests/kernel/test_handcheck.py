"""The hand-check's traces: each intermediate agrees with its definition, computed here a third way."""

import math

import pytest

from core import handcheck


def test_dot_terms_and_total():
    t = handcheck.dot([1.0, -2.0, 0.5], [3.0, 4.0, 2.0])
    assert t.terms == (3.0, -8.0, 1.0)
    assert t.total == -4.0


def test_softmax_trace_intermediates():
    t = handcheck.softmax([2.0, 1.0, 0.0], temperature=0.5, allowed=[True, True, False])
    assert t.logits == (4.0, 2.0, 0.0)
    assert t.masked == (4.0, 2.0, float("-inf"))
    assert t.row_max == 4.0
    assert t.exps == (1.0, math.exp(-2.0), 0.0)
    assert t.normaliser == pytest.approx(1.0 + math.exp(-2.0))
    assert t.weights[0] == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert t.weights[2] == 0.0
    assert sum(t.weights) == pytest.approx(1.0)


def test_softmax_with_nothing_allowed_returns_zeros():
    t = handcheck.softmax([1.0, 2.0], allowed=[False, False])
    assert t.weights == (0.0, 0.0) and t.normaliser == 0.0


def test_attention_row_is_weighted_sum_of_value_rows():
    q = [1.0, 0.0]
    k = [[1.0, 0.0], [0.0, 1.0]]
    v = [[10.0, 0.0], [0.0, 10.0]]
    row = handcheck.attention_row(q, k, v)
    assert row.scale == pytest.approx(1 / math.sqrt(2))
    assert row.scores == pytest.approx((1 / math.sqrt(2), 0.0))
    w0 = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1.0)
    assert row.softmax.weights == pytest.approx((w0, 1 - w0))
    assert row.weighted_values[0] == pytest.approx((10 * w0, 0.0))
    assert row.out == pytest.approx((10 * w0, 10 * (1 - w0)))


def test_row_zero_of_causal_attention_has_single_weight_one():
    mask = handcheck.causal_mask(3)
    trace = handcheck.scaled_dot_product_attention(
        [[0.3, 1.0]] * 3, [[1.0, 2.0], [3.0, 1.0], [0.0, 1.0]], [[1.0], [2.0], [3.0]], mask
    )
    assert trace.weights[0] == (1.0, 0.0, 0.0)
    assert trace.out[0] == (1.0,)


def test_entropy_bits():
    assert handcheck.entropy_bits([0.25] * 4) == pytest.approx(2.0)
    assert handcheck.entropy_bits([1.0, 0.0]) == 0.0


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        handcheck.dot([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        handcheck.softmax([1.0], temperature=0.0)
    with pytest.raises(ValueError):
        handcheck.attention_row([1.0], [[1.0]], [[1.0], [2.0]])
