"""core.lessons.scores against independent references: closed forms, core.handcheck (pure Python) and PyTorch's SDPA."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from references import ATOL32, exact_softmax, rows_with_mask

from core import handcheck
from core.attention import scaled_dot_product_attention
from core.lessons import scores as lessons

# --- random_qkv ------------------------------------------------------------------------------------


def test_random_qkv_shapes_and_seed():
    q, k, v = lessons.random_qkv(2, 3, 4, 5, seed=7, Dv=6)
    assert (q.shape, k.shape, v.shape) == ((2, 3, 4, 5), (2, 3, 4, 5), (2, 3, 4, 6))
    again = lessons.random_qkv(2, 3, 4, 5, seed=7, Dv=6)
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), again))
    assert not torch.equal(q, lessons.random_qkv(2, 3, 4, 5, seed=8, Dv=6)[0])
    assert not torch.equal(q, k)  # drawn one after the other from one generator
    with pytest.raises(ValueError, match="must all be >= 1"):
        lessons.random_qkv(1, 0, 4, 5, seed=0)


# --- worked_example --------------------------------------------------------------------------------


def test_worked_example_draws_like_the_script():
    with torch.random.fork_rng():
        torch.manual_seed(2)
        q, k, v = torch.randn(1, 4, 3), torch.randn(1, 4, 3), torch.randn(1, 4, 2)
    ex = lessons.worked_example()
    assert torch.equal(ex.q, q) and torch.equal(ex.k, k) and torch.equal(ex.v, v)
    assert torch.equal(ex.mask, ~torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1))


@pytest.mark.numerics
def test_worked_example_equals_the_hand_oracle():
    ex = lessons.worked_example()
    trace = handcheck.scaled_dot_product_attention(
        ex.q[0].tolist(), ex.k[0].tolist(), ex.v[0].tolist(), handcheck.causal_mask(4)
    )
    r = ex.result
    torch.testing.assert_close(r.scores[0], torch.tensor(trace.scores, dtype=torch.float32), atol=ATOL32, rtol=0)
    torch.testing.assert_close(r.weights[0], torch.tensor(trace.weights, dtype=torch.float32), atol=ATOL32, rtol=0)
    torch.testing.assert_close(r.out[0], torch.tensor(trace.out, dtype=torch.float32), atol=ATOL32, rtol=0)
    assert r.weights[0, 0].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert r.out.shape == (1, 4, 2)


# --- score_variance --------------------------------------------------------------------------------


@pytest.mark.numerics
def test_score_variance_matches_the_closed_forms_within_sampling_error():
    rows = lessons.score_variance(list(lessons.VARIANCE_WIDTHS), samples=4096, seed=0)
    assert [r.width for r in rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    for r in rows:
        assert (r.expected_unscaled, r.expected_scaled, r.samples) == (r.width, 1.0, 4096)
        assert abs(r.var_unscaled - r.width) <= 5 * r.std_error_unscaled, r
        assert abs(r.var_scaled - 1.0) <= 5 * r.std_error_scaled, r
        assert r.var_unscaled == pytest.approx(r.var_scaled * r.width, rel=1e-9)


@pytest.mark.numerics
def test_score_variance_standard_error_matches_the_spread_of_repeated_measurements():
    D, N = 4, 256
    measured = [lessons.score_variance([D], samples=N, seed=s)[0] for s in range(300)]
    spread = torch.tensor([m.var_scaled for m in measured], dtype=torch.float64).std().item()
    assert spread == pytest.approx(measured[0].std_error_scaled, rel=0.2)
    assert measured[0].std_error_scaled == pytest.approx(math.sqrt((2 + 6 / D) / N))


def test_score_variance_rejects_bad_input():
    with pytest.raises(ValueError, match="widths >= 1"):
        lessons.score_variance([0, 4])
    with pytest.raises(ValueError, match="samples >= 2"):
        lessons.score_variance([4], samples=1)


# --- row_entropy_bits, softmax_jacobian_norm, saturation, scaling_experiment ------------------------


@pytest.mark.numerics
@given(rows_with_mask)
def test_row_entropy_bits_equals_the_hand_entropy(row):
    xs, allowed = row
    p = exact_softmax(xs, allowed)
    got = lessons.row_entropy_bits(torch.tensor(p, dtype=torch.float64)).item()
    assert got == pytest.approx(handcheck.entropy_bits(p), abs=1e-9)


def frobenius_of_softmax_jacobian(p):
    """Closed form: d softmax / d x = diag(p) - p pᵀ, its Frobenius norm summed entry by entry."""
    S = len(p)
    return math.sqrt(math.fsum(((p[i] if i == j else 0.0) - p[i] * p[j]) ** 2 for i in range(S) for j in range(S)))


@pytest.mark.numerics
@given(rows_with_mask)
def test_softmax_jacobian_norm_equals_the_closed_form(row):
    xs, allowed = row
    scores = torch.tensor([xs], dtype=torch.float64)  # (T=1, S)
    mask = torch.tensor([allowed])
    got = lessons.softmax_jacobian_norm(scores, mask).item()
    # Forbidden entries have weight 0, so their rows and columns of diag(p) - p pᵀ vanish.
    assert got == pytest.approx(frobenius_of_softmax_jacobian(exact_softmax(xs, allowed)), abs=1e-9)
    assert lessons.softmax_jacobian_norm(scores).item() == pytest.approx(
        frobenius_of_softmax_jacobian(exact_softmax(xs)), abs=1e-9
    )


@pytest.mark.numerics
def test_saturation_reports_the_rows_it_was_given():
    weights = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])
    result = scaled_dot_product_attention(torch.zeros(1, 2, 1), torch.zeros(1, 2, 1), torch.zeros(1, 2, 1))
    result = type(result)(scores=torch.tensor([[[60.0, 0.0], [0.0, 0.0]]]), weights=weights, out=result.out)
    stats = lessons.saturation(result)
    assert stats.max_weight.tolist() == [[1.0, 0.5]]
    assert stats.share_one_hot == 0.5
    torch.testing.assert_close(stats.entropy_bits, torch.tensor([[0.0, 1.0]]))
    assert stats.mean_jacobian_norm == pytest.approx(
        (frobenius_of_softmax_jacobian(exact_softmax([60.0, 0.0])) + frobenius_of_softmax_jacobian([0.5, 0.5])) / 2
    )


@pytest.mark.numerics
def test_scaling_experiment_saturates_the_rows():
    ex = lessons.worked_example()
    exp = lessons.scaling_experiment(ex.q, ex.k, ex.v, factor=10.0)
    assert exp.baseline_result.weights.tolist() == ex.result.weights.tolist()
    base, big = exp.baseline, exp.unscaled
    assert big.max_weight.mean() > 0.95 > base.max_weight.mean()
    assert big.share_one_hot >= 0.75 and base.share_one_hot <= 0.25  # row 0 is one-hot in both (causal)
    assert big.mean_entropy_bits < 0.2 * base.mean_entropy_bits
    assert big.mean_jacobian_norm < 0.1 * base.mean_jacobian_norm
    torch.testing.assert_close(exp.unscaled_result.scores, (ex.q * 10) @ (ex.k * 10).transpose(-2, -1))


# --- temperature_distribution and parse_scores -------------------------------------------------------


@pytest.mark.numerics
def test_temperature_distribution_reproduces_the_lesson_at_temperature_one():
    result = lessons.temperature_distribution(lessons.TEMPERATURE_SCORES, 1.0)
    assert [round(p, 4) for p in result.probs] == [0.2915, 0.1185, 0.0589, 0.5311]
    assert result.uniform_entropy_bits == 2.0


@pytest.mark.numerics
@given(st.floats(0.05, 20.0), st.lists(st.floats(-50, 50), min_size=1, max_size=8))
def test_temperature_distribution_equals_math_exp(temperature, scores):
    result = lessons.temperature_distribution(scores, temperature)
    expected = exact_softmax([s / temperature for s in scores])
    assert list(result.probs) == pytest.approx(expected, abs=1e-12)
    assert result.entropy_bits == pytest.approx(handcheck.entropy_bits(expected), abs=1e-9)


@pytest.mark.parametrize("scores, temperature", [([], 1.0), ([1.0, math.nan], 1.0), ([1.0], 0.0), ([1.0], math.inf)])
def test_temperature_distribution_rejects_bad_input(scores, temperature):
    with pytest.raises(ValueError):
        lessons.temperature_distribution(scores, temperature)


def test_parse_scores_reads_numbers_only():
    assert lessons.parse_scores("1.2, 0.3, -0.4, 1.8") == (1.2, 0.3, -0.4, 1.8)
    assert lessons.parse_scores("1;2  3") == (1.0, 2.0, 3.0)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "at least one score"),
        (" , ", "at least one score"),
        ("1, two", "'two' is not a number"),
        ("__import__('os')", "is not a number"),
        ("1e5", "out of range"),
        ("nan", "out of range"),
        ("inf", "out of range"),
        (", ".join(["1"] * 13), "at most 12"),
    ],
)
def test_parse_scores_errors(text, message):
    with pytest.raises(ValueError, match=message):
        lessons.parse_scores(text)


@given(st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=12))
def test_parse_scores_round_trips(scores):
    assert lessons.parse_scores(", ".join(repr(s) for s in scores)) == tuple(scores)


# --- score_geometry ----------------------------------------------------------------------------------


@pytest.mark.numerics
@pytest.mark.parametrize("scaled", [True, False])
def test_score_geometry_against_an_independent_computation(scaled):
    B, H, T, D = 2, 3, 5, 8
    geo = lessons.score_geometry(B, H, T, D, seed=4, scaled=scaled)
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(B, H, T, D, generator=g) for _ in range(3))
    scale = 1 / math.sqrt(D) if scaled else 1.0
    scores = torch.einsum("bhtd,bhsd->bhts", q.double(), k.double()) * scale  # (B, H, T, S)
    torch.testing.assert_close(geo.result.scores.double(), scores, atol=ATOL32, rtol=0)
    torch.testing.assert_close(
        geo.result.out, F.scaled_dot_product_attention(q, k, v, scale=scale), atol=ATOL32, rtol=0
    )
    assert geo.scale == scale and geo.expected_variance == pytest.approx(scale**2 * D)
    assert geo.score_variance == pytest.approx(scores.var(unbiased=False).item(), rel=1e-5)
    torch.testing.assert_close(geo.max_abs_score.double(), scores.abs().amax((-2, -1)), atol=ATOL32, rtol=0)
    assert geo.max_weight.shape == (B, H, T)
    assert {s.name: s.shape for s in geo.steps} == {
        "Q": (B, H, T, D),
        "K": (B, H, T, D),
        "Kᵀ": (B, H, D, T),
        "scores": (B, H, T, T),
        "weights": (B, H, T, T),
        "V": (B, H, T, D),
        "out": (B, H, T, D),
    }


@pytest.mark.numerics
def test_saturation_mean_max_weight_is_the_mean_of_each_rows_largest_weight():
    ex = lessons.worked_example()
    stats = lessons.saturation(ex.result, ex.mask)
    rows = ex.result.weights[0].tolist()
    assert stats.mean_max_weight == pytest.approx(sum(max(r) for r in rows) / len(rows), abs=1e-7)
