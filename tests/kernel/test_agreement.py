"""core.agreement: the allowance is derived from the dtype's epsilon, rounding passes, a bug fails."""

import functools
import math
import operator
import random

import pytest
import torch

from core.agreement import agreement, allowance, float64_copy, model_terms, row_agreement
from core.handcheck import attention_row
from core.model.gpt import GPT, preset


def test_allowance_is_the_stated_formula():
    assert allowance(torch.float64, 100, 3.0) == 16 * 2.0**-52 * 100 * 3.0
    assert allowance(torch.float32, 10) == 16 * 2.0**-23 * 10  # scale below 1 counts as 1
    assert allowance(torch.float64, 1, 0.25) == allowance(torch.float64, 1, 1.0)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="terms"):
            allowance(torch.float64, bad)
    with pytest.raises(ValueError, match="scale"):
        allowance(torch.float64, 3, math.inf)
    with pytest.raises(ValueError, match="dtype"):
        allowance(torch.int64, 3)


def test_the_same_sum_in_another_order_agrees_and_an_off_by_one_term_does_not():
    rng = random.Random(0)
    xs = [rng.uniform(-10, 10) for _ in range(4096)]
    # plain left-to-right float64 sums, two orders (not sum(): since Python 3.12 it compensates its rounding)
    forward, backward = functools.reduce(operator.add, xs), functools.reduce(operator.add, reversed(xs))
    assert forward != backward  # the orders really round differently
    scale = math.fsum(abs(x) for x in xs)  # Higham: the bound is relative to sum |x|
    assert agreement([forward], [backward], terms=len(xs), scale=scale).passed
    dropped = functools.reduce(operator.add, xs[1:])  # a real bug: one term missing
    assert not agreement([dropped], [backward], terms=len(xs), scale=scale).passed


def test_non_finite_values_never_agree_and_shapes_must_match():
    a = agreement([1.0, math.nan], [1.0, 2.0], terms=2)
    assert a.max_abs_diff == math.inf and not a.passed
    assert not agreement([math.inf], [math.inf], terms=1).passed
    with pytest.raises(ValueError, match="cannot compare shapes"):
        agreement([1.0, 2.0], [1.0], terms=1)


@pytest.mark.numerics
def test_float32_results_compared_in_float64_are_held_to_float32s_own_allowance_only_when_asked():
    x = torch.randn(257, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = x.float()  # float32 rounding of every entry: ~1e-7 relative
    assert not torch.equal(y.double(), x)
    assert not agreement(y.double(), x, terms=1).passed  # float64's allowance does not cover float32 rounding
    assert agreement(y, x, terms=1, dtype=torch.float32).passed  # float32's does
    assert "float64" in agreement(y.double(), x, terms=1).rule


@pytest.mark.numerics
def test_row_agreement_holds_the_hand_check_to_the_tensor_code():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(6, 8, generator=g, dtype=torch.float64) for _ in range(3))  # (T, D) each
    t = 5
    trace = attention_row(q[t].tolist(), k.tolist(), v.tolist(), scale=1 / math.sqrt(8))
    out = torch.softmax(q[t] @ k.T / math.sqrt(8), -1) @ v  # (D,)
    a = row_agreement(trace.out, out, q_row=q[t].tolist(), k_rows=k.tolist(), v_rows=v.tolist(), scale=1 / math.sqrt(8))
    assert a.passed and a.terms == 8 + 2 * 6 and a.allowed < 1e-12
    unscaled = torch.softmax(q[t] @ k.T, -1) @ v  # a kernel that forgets 1/sqrt(D)
    b = row_agreement(
        trace.out, unscaled, q_row=q[t].tolist(), k_rows=k.tolist(), v_rows=v.tolist(), scale=1 / math.sqrt(8)
    )
    assert not b.passed and b.ratio > 1e6


def test_model_terms_and_the_float64_copy():
    # by hand: tiny has 2 layers, width 32, MLP 4 x 32 = 128 wide, context 32: 2 x 128 + the head's 32
    config = preset("tiny", 12)
    assert model_terms(config) == 288
    # default: 4 layers, width 128, MLP 512 wide, context 128: 4 x 512 + 128
    assert model_terms(preset("default", 12)) == 2176
    model = GPT(config)
    copy = float64_copy(model)
    assert next(model.parameters()).dtype == torch.float32  # the original is untouched
    assert all(p.dtype == torch.float64 for p in copy.parameters()) and not copy.training
    for a, b in zip(model.parameters(), copy.parameters()):
        assert torch.equal(a.double(), b)  # float32 -> float64 is exact
