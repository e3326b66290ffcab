"""core.model.rope: closed forms, a complex-number reference, relative positions, the split-half layout."""

import math

import pytest
import torch

from core.model.rope import (
    apply_rope,
    apply_rope_split_half,
    from_split_half,
    rope_angles,
    rope_frequencies,
    rope_trace,
    split_half_permutation,
    to_split_half,
)


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def complex_rope_reference(x, positions, base=10000.0):
    """meta-llama's formulation: pairs as complex numbers, multiplied by e^{i m theta_i}."""
    D = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    angles = torch.outer(positions.to(torch.float64), inv_freq)
    rotation = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], D // 2, 2).contiguous())
    return torch.view_as_real(pairs * rotation).flatten(-2)


def hf_split_half_reference(x, positions, base=10000.0):
    """Hugging Face's rotate_half formulation on split-half features."""
    D = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    freqs = torch.outer(positions.to(torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


@pytest.mark.numerics
def test_frequencies_closed_form():
    # D = 8, base 10000: base^(-2i/8) = 10000^(-i/4) = 1, 0.1, 0.01, 0.001
    torch.testing.assert_close(
        rope_frequencies(8), torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64), atol=1e-15, rtol=1e-12
    )
    angles = rope_angles(torch.tensor([0, 3]), 8)
    torch.testing.assert_close(
        angles, torch.tensor([[0.0, 0.0, 0.0, 0.0], [3.0, 0.3, 0.03, 0.003]], dtype=torch.float64)
    )


@pytest.mark.numerics
def test_single_pair_by_hand():
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)  # positions 0 and 1, D = 2
    out = apply_rope(x, torch.tensor([0, 1]))
    expected = torch.tensor([[1.0, 0.0], [-2.0 * math.sin(1.0), 2.0 * math.cos(1.0)]], dtype=torch.float64)
    torch.testing.assert_close(out, expected, atol=1e-15, rtol=0)


@pytest.mark.numerics
def test_matches_complex_number_reference():
    x = _randn(2, 3, 7, 16)
    positions = torch.arange(5, 12)
    torch.testing.assert_close(apply_rope(x, positions), complex_rope_reference(x, positions), atol=1e-12, rtol=0)
    torch.testing.assert_close(
        apply_rope(x, positions, base=500.0), complex_rope_reference(x, positions, base=500.0), atol=1e-12, rtol=0
    )


def test_position_zero_is_the_identity():
    x = _randn(4, 8)
    torch.testing.assert_close(apply_rope(x, torch.zeros(4, dtype=torch.long)), x, atol=0, rtol=0)


@pytest.mark.numerics
def test_norms_of_vectors_and_pairs_are_preserved():
    x = _randn(2, 10, 12)
    out = apply_rope(x, torch.arange(100, 110))
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), atol=1e-12, rtol=0)
    pair_norms = lambda y: y.reshape(2, 10, 6, 2).norm(dim=-1)  # noqa: E731
    torch.testing.assert_close(pair_norms(out), pair_norms(x), atol=1e-12, rtol=0)
    assert not torch.allclose(out, x)  # it did rotate


@pytest.mark.numerics
@pytest.mark.parametrize("offset", [0, 1, 5, -3])
def test_scores_depend_only_on_the_offset(offset):
    D = 16
    q, k = _randn(1, D, seed=1), _randn(1, D, seed=2)
    scores = []
    for m in (7, 20, 33, 90):
        n = m - offset
        q_m = apply_rope(q, torch.tensor([m]))
        k_n = apply_rope(k, torch.tensor([n]))
        scores.append((q_m @ k_n.T).item())
    assert max(scores) - min(scores) < 1e-10
    # and a different offset gives a different score (the position information is really there)
    other = (apply_rope(q, torch.tensor([7])) @ apply_rope(k, torch.tensor([7 - offset - 1])).T).item()
    assert abs(other - scores[0]) > 1e-6


@pytest.mark.numerics
def test_split_half_layout_is_a_permutation_of_adjacent_pairs():
    D = 10
    assert split_half_permutation(D).tolist() == [0, 2, 4, 6, 8, 1, 3, 5, 7, 9]
    x = _randn(3, 6, D)
    positions = torch.arange(2, 8)
    adjacent = apply_rope(x, positions)
    split = hf_split_half_reference(to_split_half(x), positions)
    torch.testing.assert_close(to_split_half(adjacent), split, atol=1e-12, rtol=0)
    torch.testing.assert_close(apply_rope_split_half(to_split_half(x), positions), split, atol=1e-12, rtol=0)
    torch.testing.assert_close(from_split_half(to_split_half(x)), x, atol=0, rtol=0)
    # without the permutation the two layouts disagree
    assert not torch.allclose(hf_split_half_reference(x, positions), adjacent)


@pytest.mark.numerics
def test_trace_matches_the_tensor_code():
    vec = [0.5, -1.0, 2.0, 0.25, -0.75, 1.5]
    trace = rope_trace(vec, position=9, base=100.0)
    tensor = apply_rope(torch.tensor([vec], dtype=torch.float64), torch.tensor([9]), base=100.0)[0]
    assert trace.rotated == pytest.approx(tensor.tolist(), abs=1e-12)
    assert trace.before == ((0.5, -1.0), (2.0, 0.25), (-0.75, 1.5))
    assert trace.angles == pytest.approx([9.0, 9.0 * 100 ** (-1 / 3), 9.0 * 100 ** (-2 / 3)], rel=1e-12)
    (c, minus_s), (s, c2) = trace.rotations[0]
    assert (c, minus_s, s, c2) == pytest.approx((math.cos(9), -math.sin(9), math.sin(9), math.cos(9)))


@pytest.mark.parametrize("D", [1, 3, 7])
def test_odd_width_raises(D):
    with pytest.raises(ValueError, match="even"):
        apply_rope(torch.zeros(2, D), torch.arange(2))
    with pytest.raises(ValueError, match="even"):
        rope_frequencies(D)


def test_bad_positions_raise():
    x = torch.zeros(3, 4)
    with pytest.raises(ValueError, match="3"):
        apply_rope(x, torch.arange(4))  # 4 positions for T = 3
    with pytest.raises(ValueError, match="integer"):
        apply_rope(x, torch.arange(3.0))
    with pytest.raises(ValueError, match=">= 0"):
        apply_rope(x, torch.tensor([-1, 0, 1]))
