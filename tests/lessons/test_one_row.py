"""core.lessons.one_row against independent references: core.handcheck inside read_row, PyTorch's SDPA in float64."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from core.attention import causal_mask
from core.lessons import one_row as row_reading
from core.lessons import scores as lessons

# --- read_row ------------------------------------------------------------------------------------------


def test_row_inputs():
    ex = lessons.worked_example()
    q, k, v = row_reading.row_inputs(worked=True)
    assert torch.equal(q, ex.q[0]) and torch.equal(k, ex.k[0]) and torch.equal(v, ex.v[0])
    q, k, v = row_reading.row_inputs(worked=False, seed=5, T=6, D=4, Dv=2)
    rq, rk, rv = lessons.random_qkv(1, 1, 6, 4, seed=5, Dv=2)
    assert torch.equal(q, rq[0, 0]) and torch.equal(v, rv[0, 0]) and v.shape == (6, 2)


@pytest.mark.numerics
@given(st.integers(0, 9999), st.integers(2, 8), st.integers(1, 8), st.data())
def test_read_row_hand_sum_equals_pytorch_sdpa(seed, T, D, data):
    t = data.draw(st.integers(0, T - 1))
    q, k, v = row_reading.row_inputs(worked=False, seed=seed, T=T, D=D)
    reading = row_reading.read_row(q, k, v, t)
    reference = F.scaled_dot_product_attention(q[None].double(), k[None].double(), v[None].double(), is_causal=True)[
        0, t
    ]
    assert list(reading.trace.out) == pytest.approx(reference.tolist(), abs=1e-12)  # float64 against float64
    assert list(reading.out) == pytest.approx(reference.tolist(), abs=reading.atol)  # float64 tensor, same numbers
    assert reading.passed and reading.max_difference <= reading.atol < 1e-12  # a float64 allowance
    assert reading.shown32.passed  # the float32 result, within float32's allowance (shown only)
    assert reading.allowed == tuple(s <= t for s in range(T))
    assert all(w == 0.0 for w, ok in zip(reading.weights, reading.allowed) if not ok)
    assert reading.weight_sum == pytest.approx(1.0, abs=1e-6) and reading.hand_weight_sum == pytest.approx(
        1.0, abs=1e-12
    )


def test_read_row_zero_has_a_single_weight_of_exactly_one():
    reading = row_reading.read_row(*row_reading.row_inputs(worked=True), 0)
    assert reading.weights == (1.0, 0.0, 0.0, 0.0)
    assert reading.weight_sum == 1.0 and reading.sum_error == 0.0
    assert reading.out == tuple(lessons.worked_example().v[0, 0].tolist())


@pytest.mark.numerics
def test_read_row_fails_when_the_tensor_code_is_broken(monkeypatch):
    """The deliberately broken variant: a kernel that forgets the 1/sqrt(D) scaling fails the hand check by
    orders of magnitude beyond its float64 allowance (rounding alone is ~1e-16)."""
    from core.attention import scaled_dot_product_attention as real

    monkeypatch.setattr(
        row_reading, "scaled_dot_product_attention", lambda q, k, v, mask: real(q, k, v, mask, scale=1.0)
    )
    reading = row_reading.read_row(*row_reading.row_inputs(worked=True), 3)
    assert not reading.passed and reading.decided.ratio > 1e6


def test_read_row_rejects_bad_input():
    q, k, v = row_reading.row_inputs(worked=True)
    with pytest.raises(ValueError, match=r"row t must be an integer in 0..3"):
        row_reading.read_row(q, k, v, 4)
    with pytest.raises(ValueError, match="read_row needs"):
        row_reading.read_row(q[None], k, v, 0)
    assert causal_mask(4).tolist() == [[s <= t for s in range(4)] for t in range(4)]
