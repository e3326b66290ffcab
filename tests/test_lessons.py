"""core.lessons against independent references: closed forms, core.handcheck (pure Python) and PyTorch's SDPA."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from core import handcheck, lessons
from core.attention import causal_mask, scaled_dot_product_attention

ATOL32 = 1e-5  # fp32 attention against a float64 reference (STYLE.md)


def exact_softmax(xs, allowed=None):
    """Softmax in plain math.exp, float64, forbidden entries 0: a reference written without torch."""
    allowed = [True] * len(xs) if allowed is None else list(allowed)
    top = max(x for x, ok in zip(xs, allowed) if ok)
    exps = [math.exp(x - top) if ok else 0.0 for x, ok in zip(xs, allowed)]
    total = math.fsum(exps)
    return [e / total for e in exps]


rows_with_mask = st.integers(2, 6).flatmap(
    lambda S: st.tuples(
        st.lists(st.floats(-8, 8, allow_nan=False), min_size=S, max_size=S),
        st.lists(st.booleans(), min_size=S, max_size=S).filter(any),
    )
)


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


def test_worked_example_equals_the_hand_oracle():
    ex = lessons.worked_example()
    trace = handcheck.scaled_dot_product_attention(ex.q[0].tolist(), ex.k[0].tolist(), ex.v[0].tolist(),
                                                   handcheck.causal_mask(4))
    r = ex.result
    torch.testing.assert_close(r.scores[0], torch.tensor(trace.scores, dtype=torch.float32), atol=ATOL32, rtol=0)
    torch.testing.assert_close(r.weights[0], torch.tensor(trace.weights, dtype=torch.float32), atol=ATOL32, rtol=0)
    torch.testing.assert_close(r.out[0], torch.tensor(trace.out, dtype=torch.float32), atol=ATOL32, rtol=0)
    assert r.weights[0, 0].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert r.out.shape == (1, 4, 2)


# --- score_variance --------------------------------------------------------------------------------

def test_score_variance_matches_the_closed_forms_within_sampling_error():
    rows = lessons.score_variance(list(lessons.VARIANCE_WIDTHS), samples=4096, seed=0)
    assert [r.width for r in rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    for r in rows:
        assert (r.expected_unscaled, r.expected_scaled, r.samples) == (r.width, 1.0, 4096)
        assert abs(r.var_unscaled - r.width) <= 5 * r.std_error_unscaled, r
        assert abs(r.var_scaled - 1.0) <= 5 * r.std_error_scaled, r
        assert r.var_unscaled == pytest.approx(r.var_scaled * r.width, rel=1e-9)


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


# --- zero_after_softmax ----------------------------------------------------------------------------

@given(rows_with_mask)
def test_zero_after_softmax_against_math_exp(row):
    xs, allowed = row
    cmp = lessons.zero_after_softmax(torch.tensor(xs, dtype=torch.float64), torch.tensor(allowed))
    unmasked = exact_softmax(xs)
    missing = 1.0 - math.fsum(p for p, ok in zip(unmasked, allowed) if ok)
    assert cmp.missing_mass.item() == pytest.approx(missing, abs=1e-12)
    assert cmp.after.tolist() == pytest.approx([p if ok else 0.0 for p, ok in zip(unmasked, allowed)], abs=1e-12)
    masked = exact_softmax(xs, allowed)
    assert cmp.before.tolist() == pytest.approx(masked, abs=1e-12)
    assert cmp.renormalised.tolist() == pytest.approx(masked, abs=1e-9)  # well conditioned: logits within ±8
    assert cmp.before_sum.item() == pytest.approx(1.0) and cmp.after_sum.item() == pytest.approx(1.0 - missing)


def test_zero_after_softmax_on_a_row_with_no_allowed_key():
    cmp = lessons.zero_after_softmax(torch.tensor([[0.5, -1.0], [0.2, 0.3]]), torch.tensor([[False, False], [True, False]]))
    assert cmp.before[0].tolist() == [0.0, 0.0] and cmp.renormalised[0].tolist() == [0.0, 0.0]
    assert cmp.missing_mass[0].item() == 1.0
    assert torch.isfinite(cmp.renormalised).all()


# --- row_entropy_bits, softmax_jacobian_norm, saturation, scaling_experiment ------------------------

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


@given(rows_with_mask)
def test_softmax_jacobian_norm_equals_the_closed_form(row):
    xs, allowed = row
    scores = torch.tensor([xs], dtype=torch.float64)  # (T=1, S)
    mask = torch.tensor([allowed])
    got = lessons.softmax_jacobian_norm(scores, mask).item()
    # Forbidden entries have weight 0, so their rows and columns of diag(p) - p pᵀ vanish.
    assert got == pytest.approx(frobenius_of_softmax_jacobian(exact_softmax(xs, allowed)), abs=1e-9)
    assert lessons.softmax_jacobian_norm(scores).item() == pytest.approx(frobenius_of_softmax_jacobian(exact_softmax(xs)), abs=1e-9)


def test_saturation_reports_the_rows_it_was_given():
    weights = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])
    result = scaled_dot_product_attention(torch.zeros(1, 2, 1), torch.zeros(1, 2, 1), torch.zeros(1, 2, 1))
    result = type(result)(scores=torch.tensor([[[60.0, 0.0], [0.0, 0.0]]]), weights=weights, out=result.out)
    stats = lessons.saturation(result)
    assert stats.max_weight.tolist() == [[1.0, 0.5]]
    assert stats.share_one_hot == 0.5
    torch.testing.assert_close(stats.entropy_bits, torch.tensor([[0.0, 1.0]]))
    assert stats.mean_jacobian_norm == pytest.approx((frobenius_of_softmax_jacobian(exact_softmax([60.0, 0.0]))
                                                      + frobenius_of_softmax_jacobian([0.5, 0.5])) / 2)


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

def test_temperature_distribution_reproduces_the_lesson_at_temperature_one():
    result = lessons.temperature_distribution(lessons.TEMPERATURE_SCORES, 1.0)
    assert [round(p, 4) for p in result.probs] == [0.2915, 0.1185, 0.0589, 0.5311]
    assert result.uniform_entropy_bits == 2.0


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


@pytest.mark.parametrize("text, message", [
    ("", "at least one score"),
    (" , ", "at least one score"),
    ("1, two", "'two' is not a number"),
    ("__import__('os')", "is not a number"),
    ("1e5", "out of range"),
    ("nan", "out of range"),
    ("inf", "out of range"),
    (", ".join(["1"] * 13), "at most 12"),
])
def test_parse_scores_errors(text, message):
    with pytest.raises(ValueError, match=message):
        lessons.parse_scores(text)


@given(st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=12))
def test_parse_scores_round_trips(scores):
    assert lessons.parse_scores(", ".join(repr(s) for s in scores)) == tuple(scores)


# --- score_geometry ----------------------------------------------------------------------------------

@pytest.mark.parametrize("scaled", [True, False])
def test_score_geometry_against_an_independent_computation(scaled):
    B, H, T, D = 2, 3, 5, 8
    geo = lessons.score_geometry(B, H, T, D, seed=4, scaled=scaled)
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(B, H, T, D, generator=g) for _ in range(3))
    scale = 1 / math.sqrt(D) if scaled else 1.0
    scores = torch.einsum("bhtd,bhsd->bhts", q.double(), k.double()) * scale  # (B, H, T, S)
    torch.testing.assert_close(geo.result.scores.double(), scores, atol=ATOL32, rtol=0)
    torch.testing.assert_close(geo.result.out, F.scaled_dot_product_attention(q, k, v, scale=scale), atol=ATOL32, rtol=0)
    assert geo.scale == scale and geo.expected_variance == pytest.approx(scale**2 * D)
    assert geo.score_variance == pytest.approx(scores.var(unbiased=False).item(), rel=1e-5)
    torch.testing.assert_close(geo.max_abs_score.double(), scores.abs().amax((-2, -1)), atol=ATOL32, rtol=0)
    assert geo.max_weight.shape == (B, H, T)
    assert {s.name: s.shape for s in geo.steps} == {
        "Q": (B, H, T, D), "K": (B, H, T, D), "Kᵀ": (B, H, D, T), "scores": (B, H, T, T),
        "weights": (B, H, T, T), "V": (B, H, T, D), "out": (B, H, T, D)}


# --- masks -------------------------------------------------------------------------------------------

def test_word_tokens():
    assert lessons.word_tokens("the cat  sat down ") == ("the", "cat", "sat", "down")
    with pytest.raises(ValueError, match="type a few words"):
        lessons.word_tokens("   ")
    with pytest.raises(ValueError, match="at most 8 words"):
        lessons.word_tokens("a b c d e f g h i")


@given(st.lists(st.integers(0, 8), min_size=1, max_size=4).filter(lambda ns: max(ns) >= 1),
       st.sampled_from(["right", "left"]), st.booleans(), st.booleans())
def test_ragged_masks_against_the_hand_masks(lengths, side, causal, padding):
    m = lessons.ragged_masks(lengths, side=side, causal=causal, padding=padding)
    T = max(lengths)
    real = handcheck.padding_mask(lengths, T, side=side)
    future_ok = handcheck.causal_mask(T)
    expected = [[[(future_ok[t][s] or not causal) and (real[b][s] or not padding) for s in range(T)]
                 for t in range(T)] for b in range(len(lengths))]
    assert m.real.tolist() == [list(r) for r in real]
    assert m.combined.tolist() == expected
    assert m.allowed_keys.tolist() == [[sum(row) for row in seq] for seq in expected]
    assert m.no_allowed_key.tolist() == [[not any(row) for row in seq] for seq in expected]


def test_ragged_masks_rejects_batches_without_tokens():
    for bad in ([], [0, 0], [3, -1]):
        with pytest.raises(ValueError, match="lengths must be"):
            lessons.ragged_masks(bad)
    with pytest.raises(ValueError, match="side"):
        lessons.ragged_masks([2, 1], side="middle")


def test_fully_masked_rows_are_zero_with_finite_gradients_where_naive_softmax_is_nan():
    masks = lessons.ragged_masks([4, 2], side="left")  # sequence 1: rows 0 and 1 see only padding
    q, k, v = (x[:, 0] for x in lessons.random_qkv(2, 1, 4, 3, seed=1))
    empty = lessons.fully_masked_rows(q, k, v, masks.combined)
    assert empty.rows.tolist() == [[False] * 4, [True, True, False, False]]
    assert empty.weights[1, :2].tolist() == [[0.0] * 4] * 2
    assert empty.out[1, :2].tolist() == [[0.0] * 3] * 2
    assert empty.grad_q[1, :2].tolist() == [[0.0] * 3] * 2
    assert empty.grads_finite and empty.grad_entries == 3 * 2 * 4 * 3
    assert empty.naive_nan_rows.tolist() == empty.rows.tolist()
    assert empty.naive_nan_grads == 4 * 3  # every value row of sequence 1
    # The lab's rows agree with PyTorch's own safe SDPA, empty rows included.
    torch.testing.assert_close(empty.out, F.scaled_dot_product_attention(q, k, v, attn_mask=masks.combined), atol=ATOL32, rtol=0)


def test_mask_experiment_uses_the_combined_mask():
    masks = lessons.ragged_masks([5, 3, 0], side="right")
    exp = lessons.mask_experiment(masks, seed=3, D=4)
    q, k, v = (x[:, 0] for x in lessons.random_qkv(3, 1, 5, 4, seed=3))
    assert torch.equal(exp.q, q)
    torch.testing.assert_close(exp.result.out, F.scaled_dot_product_attention(q, k, v, attn_mask=masks.combined),
                               atol=ATOL32, rtol=0)
    assert exp.comparison.missing_mass[2].tolist() == [1.0] * 5  # length 0: everything is forbidden
    assert exp.empty.rows[2].all() and not exp.empty.rows[:2].any()


# --- renormalise_after_softmax ------------------------------------------------------------------------

@given(rows_with_mask.filter(lambda r: not all(r[1])), st.floats(-20, 20))
def test_renormalising_restores_the_masked_softmax_when_well_conditioned(row, spike):
    xs, allowed = row
    case = lessons.renormalise_after_softmax(torch.tensor(xs), torch.tensor(allowed), forbidden_logit=spike)
    assert case.key == max(s for s, ok in enumerate(allowed) if not ok)
    expected = exact_softmax(xs, allowed)  # the forbidden logit plays no part in the formula
    assert not case.undefined
    assert case.masked.tolist() == pytest.approx(expected, abs=1e-6)
    assert case.renormalised.tolist() == pytest.approx(expected, abs=1e-5)
    assert case.max_error <= 1e-5


def test_renormalising_breaks_when_a_forbidden_logit_dominates():
    ex = lessons.worked_example()
    scores, allowed = ex.result.scores[0, 2], ex.mask[2]
    case = lessons.renormalise_after_softmax(scores, allowed, forbidden_logit=1000.0)
    expected = exact_softmax(scores.tolist(), allowed.tolist())
    # The plain division is 0/0, checked without the lab's code.
    zeroed = torch.softmax(case.logits, -1) * allowed
    assert zeroed.sum().item() == 0.0 and torch.isnan(zeroed / zeroed.sum()).all()
    assert case.undefined and case.kept_mass == 0.0
    assert case.renormalised.tolist() == [0.0] * 4
    assert case.masked.tolist() == pytest.approx(expected, abs=1e-6)
    assert case.max_error == pytest.approx(max(expected), abs=1e-6)
    sweep = [lessons.renormalise_after_softmax(scores, allowed, forbidden_logit=x) for x in lessons.RENORMALISE_SWEEP]
    assert not sweep[0].undefined and sweep[-1].undefined  # the sweep crosses float32 underflow


def test_renormalise_after_softmax_rejects_bad_rows():
    s = torch.tensor([0.1, 0.2])
    with pytest.raises(ValueError, match="at least one allowed and one forbidden"):
        lessons.renormalise_after_softmax(s, torch.tensor([True, True]), forbidden_logit=5.0)
    with pytest.raises(ValueError, match="not forbidden"):
        lessons.renormalise_after_softmax(s, torch.tensor([True, False]), forbidden_logit=5.0, key=0)
    with pytest.raises(ValueError, match="finite"):
        lessons.renormalise_after_softmax(s, torch.tensor([True, False]), forbidden_logit=math.inf)


# --- read_row ------------------------------------------------------------------------------------------

def test_row_inputs():
    ex = lessons.worked_example()
    q, k, v = lessons.row_inputs(worked=True)
    assert torch.equal(q, ex.q[0]) and torch.equal(k, ex.k[0]) and torch.equal(v, ex.v[0])
    q, k, v = lessons.row_inputs(worked=False, seed=5, T=6, D=4, Dv=2)
    rq, rk, rv = lessons.random_qkv(1, 1, 6, 4, seed=5, Dv=2)
    assert torch.equal(q, rq[0, 0]) and torch.equal(v, rv[0, 0]) and v.shape == (6, 2)


@given(st.integers(0, 9999), st.integers(2, 8), st.integers(1, 8), st.data())
def test_read_row_hand_sum_equals_pytorch_sdpa(seed, T, D, data):
    t = data.draw(st.integers(0, T - 1))
    q, k, v = lessons.row_inputs(worked=False, seed=seed, T=T, D=D)
    reading = lessons.read_row(q, k, v, t)
    reference = F.scaled_dot_product_attention(q[None].double(), k[None].double(), v[None].double(), is_causal=True)[0, t]
    assert list(reading.trace.out) == pytest.approx(reference.tolist(), abs=1e-12)  # float64 against float64
    assert list(reading.out) == pytest.approx(reference.tolist(), abs=reading.atol)  # float32 against float64
    assert reading.passed and reading.max_difference <= reading.atol
    assert reading.allowed == tuple(s <= t for s in range(T))
    assert all(w == 0.0 for w, ok in zip(reading.weights, reading.allowed) if not ok)
    assert reading.weight_sum == pytest.approx(1.0, abs=1e-6) and reading.hand_weight_sum == pytest.approx(1.0, abs=1e-12)


def test_read_row_zero_has_a_single_weight_of_exactly_one():
    reading = lessons.read_row(*lessons.row_inputs(worked=True), 0)
    assert reading.weights == (1.0, 0.0, 0.0, 0.0)
    assert reading.weight_sum == 1.0 and reading.sum_error == 0.0
    assert reading.out == tuple(lessons.worked_example().v[0, 0].tolist())


def test_read_row_fails_when_the_tolerance_is_tighter_than_float32():
    q, k, v = lessons.row_inputs(worked=True)
    reading = lessons.read_row(q, k, v, 3, atol=1e-12)
    assert reading.max_difference > 1e-12 and not reading.passed


def test_read_row_rejects_bad_input():
    q, k, v = lessons.row_inputs(worked=True)
    with pytest.raises(ValueError, match=r"row t must be an integer in 0..3"):
        lessons.read_row(q, k, v, 4)
    with pytest.raises(ValueError, match="read_row needs"):
        lessons.read_row(q[None], k, v, 0)
    assert causal_mask(4).tolist() == [[s <= t for s in range(4)] for t in range(4)]
