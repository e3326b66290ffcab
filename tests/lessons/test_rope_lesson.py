"""core.lessons.rope against references written without it: the single-pair closed form
|q||k| cos(φ_q - φ_k + (m - n)θ) with math, θ_i = base^(-2i/D) with math, Hugging Face's rotate_half written
out by hand, and a tiny model's q, k taken from its raw weight matrices."""

import math

import pytest
import torch
from bundles import TEXT, tiny_model
from references import closed_form_score, head_inputs, reference_scores

from core.lessons.rope import (
    arc_points,
    layout_equivalence,
    offset_scores,
    pair_frequencies,
    rope_on_off_scores,
    rotate_pair,
    seeded_qk,
)
from core.model.rope import apply_rope, rope_trace


@pytest.mark.numerics
def test_single_pair_score_is_the_closed_form_of_the_offset_alone():
    q, k = seeded_qk(2, seed=3)  # one pair: θ = 1
    offsets, positions = list(range(-20, 21)), [0, 7, 300]
    result = offset_scores(q, k, offsets, positions, base=10000.0)
    for row in result.scores:  # every absolute position gives the same curve, the closed form
        assert row == pytest.approx(
            [closed_form_score(q.tolist(), k.tolist(), r, 10000.0) for r in offsets], abs=1e-12, rel=0
        )
    assert max(result.spreads) <= 1e-12 and result.passed
    assert max(result.scores[0]) - min(result.scores[0]) > 0.5  # the score does move with the offset


@pytest.mark.numerics
@pytest.mark.parametrize("D, base", [(8, 10000.0), (16, 500.0), (64, 2.0)])
def test_offset_scores_match_the_sum_of_pair_closed_forms_and_pass_the_check(D, base):
    q, k = seeded_qk(D)
    offsets, positions = list(range(-40, 41, 5)), [0, 13, 1000]
    result = offset_scores(q, k, offsets, positions, base)
    expected = [closed_form_score(q.tolist(), k.tolist(), r, base) for r in offsets]
    norm = math.sqrt(math.fsum(x * x for x in q.tolist())) * math.sqrt(math.fsum(x * x for x in k.tolist()))
    assert result.norm_product == pytest.approx(norm, rel=1e-14)
    for row in result.scores:
        assert row == pytest.approx(expected, abs=1e-10 * norm, rel=0)
    # the allowance is derived: 16 eps(float64) x (D products + the largest position) x |q||k|
    largest = max(positions) + max(abs(r) for r in offsets)
    assert result.tolerance == pytest.approx(16 * 2.0**-52 * (D + largest) * norm)
    assert result.passed and result.max_spread <= result.tolerance


@pytest.mark.numerics
def test_offset_positions_put_the_earlier_token_at_the_given_position():
    """offset r >= 0: key at a, query at a + r; r < 0: query at a, key at a - r (checked with rope_trace)."""
    q, k = seeded_qk(4, seed=1)
    result = offset_scores(q, k, [-3, 0, 2], [5], base=100.0)
    for r, got in zip([-3, 0, 2], result.scores[0]):
        m, n = (5 + r, 5) if r >= 0 else (5, 5 - r)
        qr, kr = rope_trace(q.tolist(), m, 100.0).rotated, rope_trace(k.tolist(), n, 100.0).rotated
        assert got == pytest.approx(math.fsum(a * b for a, b in zip(qr, kr)), abs=1e-12)


@pytest.mark.numerics
def test_rotate_pair_turns_by_m_theta_and_n_theta_and_keeps_lengths():
    q, k = seeded_qk(8, seed=4)
    m, n, i, base = 9, 4, 2, 10000.0
    rot = rotate_pair(q, k, m, n, i, base)
    theta = base ** (-2.0 * i / 8)
    assert rot.dims == (4, 5) and rot.theta == pytest.approx(theta, rel=1e-15)
    for before, after, angle in ((rot.q_before, rot.q_after, m * theta), (rot.k_before, rot.k_after, n * theta)):
        x, y = before
        assert after == pytest.approx(
            (x * math.cos(angle) - y * math.sin(angle), x * math.sin(angle) + y * math.cos(angle)), abs=1e-14
        )
        assert math.hypot(*after) == pytest.approx(math.hypot(*before), rel=1e-14)
    assert rot.q_before == (q[4].item(), q[5].item())
    assert rot.score_after == pytest.approx(closed_form_score(q.tolist(), k.tolist(), m - n, base), abs=1e-12)
    assert rot.score_before == pytest.approx(math.fsum(a * b for a, b in zip(q.tolist(), k.tolist())), abs=1e-12)
    same_offset = rotate_pair(q, k, m + 100, n + 100, i, base)
    assert same_offset.score_after == pytest.approx(rot.score_after, abs=1e-12)
    assert same_offset.pair_score_after == pytest.approx(rot.pair_score_after, abs=1e-12)
    assert abs(rotate_pair(q, k, m + 1, n, i, base).score_after - rot.score_after) > 1e-3


def test_arc_ends_where_the_rotation_ends():
    points = arc_points(0.5, 7.0, 2.0)  # more than one turn: drawn as 7 - 2π
    assert points[0] == pytest.approx((2 * math.cos(0.5), 2 * math.sin(0.5)))
    assert points[-1] == pytest.approx((2 * math.cos(7.5), 2 * math.sin(7.5)), abs=1e-12)
    assert all(math.hypot(*p) == pytest.approx(2.0) for p in points)


@pytest.mark.numerics
def test_pair_frequencies_closed_form():
    f = pair_frequencies(8, 10000.0)
    assert f.thetas == pytest.approx((1.0, 0.1, 0.01, 0.001), rel=1e-12)
    assert f.dims == ((0, 1), (2, 3), (4, 5), (6, 7)) and f.pairs == (0, 1, 2, 3)
    f = pair_frequencies(16, 500.0)
    assert f.thetas == pytest.approx([500.0 ** (-2 * i / 16) for i in range(8)], rel=1e-14)
    assert f.wavelengths == pytest.approx([2 * math.pi * 500.0 ** (2 * i / 16) for i in range(8)], rel=1e-14)


@pytest.mark.numerics
def test_split_half_layout_equals_adjacent_after_the_permutation():
    D, base = 8, 10000.0
    x = torch.randn(3, D, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    positions = [0, 6, 250]
    result = layout_equivalence(x, torch.tensor(positions), base)
    # The move written out: first member of pair i -> slot i, second -> slot i + D/2.
    assert result.destination == tuple(d // 2 if d % 2 == 0 else D // 2 + d // 2 for d in range(D))
    assert all(result.permutation[result.destination[d]] == d for d in range(D))
    # Hugging Face's formula by hand on the split-half features: x*cos + rotate_half(x)*sin.
    for t, pos in enumerate(positions):
        split = [0.0] * D
        for d in range(D):
            split[result.destination[d]] = x[t, d].item()
        rotated = []
        for j in range(D):
            theta = pos * base ** (-2.0 * (j % (D // 2)) / D)
            partner = -split[j + D // 2] if j < D // 2 else split[j - D // 2]
            rotated.append(split[j] * math.cos(theta) + partner * math.sin(theta))
        assert result.split_half[t].tolist() == pytest.approx(rotated, abs=1e-13)
        assert result.adjacent[t].tolist() == pytest.approx(
            list(rope_trace(x[t].tolist(), pos, base).rotated), abs=1e-13
        )
    assert result.max_abs_diff <= 1e-12 and result.passed
    assert result.unpermuted_max_abs_diff > 0.1  # without the permutation the two are different rotations


def test_bad_inputs_are_refused_with_a_message():
    q, k = seeded_qk(4)
    with pytest.raises(ValueError, match="pair must be an integer in 0..1"):
        rotate_pair(q, k, 1, 0, 2)
    with pytest.raises(ValueError, match="m must be an integer position"):
        rotate_pair(q, k, -1, 0, 0)
    with pytest.raises(ValueError, match="base"):
        offset_scores(q, k, [0], [0], base=1.0)
    with pytest.raises(ValueError, match="even head width"):
        seeded_qk(3)


# ---- the model section ----------------------------------------------------------------------------


@pytest.mark.numerics
@pytest.mark.parametrize("layer, head", [(0, 0), (1, 1)])
def test_on_off_scores_equal_scores_from_the_heads_q_k_with_and_without_rope(layer, head):
    model, tok = tiny_model()
    ids = tok.encode(TEXT)
    T = len(ids)
    q_raw, k_raw, _, _ = head_inputs(model, ids, layer, head)
    positions = torch.arange(T)
    want_on = reference_scores(
        apply_rope(q_raw, positions, model.config.rope_base), apply_rope(k_raw, positions, model.config.rope_base)
    )
    want_off = reference_scores(q_raw, k_raw)
    result = rope_on_off_scores(model, ids, layer, head)
    assert result.T == T and result.mask.tolist() == [[s <= t for s in range(T)] for t in range(T)]
    changes = []
    for t in range(T):
        assert result.scores_on[t, : t + 1].tolist() == pytest.approx(want_on[t][: t + 1], abs=1e-4, rel=1e-5)
        assert result.scores_off[t, : t + 1].tolist() == pytest.approx(want_off[t][: t + 1], abs=1e-4, rel=1e-5)
        changes += [abs(a - b) for a, b in zip(want_on[t][: t + 1], want_off[t][: t + 1])]
        for weights in (result.weights_on, result.weights_off):
            assert weights[t, : t + 1].sum().item() == pytest.approx(1.0, abs=1e-6)
            assert weights[t, t + 1 :].eq(0).all()  # the future gets exactly zero
    assert result.max_abs_change == pytest.approx(max(changes), rel=1e-4)
    assert result.mean_abs_change == pytest.approx(math.fsum(changes) / len(changes), rel=1e-4)
    assert result.max_abs_change > 0.1  # positions matter in this head
    top_changed = sum(
        max(range(t + 1), key=lambda s: want_on[t][s]) != max(range(t + 1), key=lambda s: want_off[t][s])
        for t in range(T)
    )
    assert result.top_key_changed == top_changed
    assert result.scores_on[0, 0].item() == pytest.approx(
        result.scores_off[0, 0].item(), abs=1e-5
    )  # position 0: no turn


@pytest.mark.parametrize("base", [1, 0.5, float("inf"), float("nan"), True, "10000"])
def test_the_lesson_refuses_a_base_exactly_as_the_model_does(base):
    q, k = seeded_qk(4)
    messages = set()
    for call in (
        lambda: rotate_pair(q, k, 1, 0, pair=0, base=base),
        lambda: pair_frequencies(4, base),
        lambda: rope_trace([1.0, 0.0, 0.0, 1.0], 1, base),
        lambda: apply_rope(q.view(1, 4), torch.tensor([0]), base),
    ):
        with pytest.raises(ValueError, match="RoPE base must be a finite number > 1") as err:
            call()
        messages.add(str(err.value))
    assert len(messages) == 1  # one validator, one message


def test_a_position_is_refused_with_the_same_rule_in_the_lesson_and_the_model():
    q, k = seeded_qk(4)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="m must be an integer position >= 0"):
            rotate_pair(q, k, bad, 0, pair=0)
        with pytest.raises(ValueError, match="position must be an integer position >= 0"):
            rope_trace([1.0, 0.0], bad)
