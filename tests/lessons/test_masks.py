"""core.lessons.masks against independent references: math.exp softmax, core.handcheck masks and PyTorch's SDPA."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from references import ATOL32, exact_softmax, rows_with_mask

from core import handcheck
from core.lessons import masks as masking
from core.lessons import scores as lessons

# --- zero_after_softmax ----------------------------------------------------------------------------


@pytest.mark.numerics
@given(rows_with_mask)
def test_zero_after_softmax_against_math_exp(row):
    xs, allowed = row
    cmp = masking.zero_after_softmax(torch.tensor(xs, dtype=torch.float64), torch.tensor(allowed))
    unmasked = exact_softmax(xs)
    missing = 1.0 - math.fsum(p for p, ok in zip(unmasked, allowed) if ok)
    assert cmp.missing_mass.item() == pytest.approx(missing, abs=1e-12)
    assert cmp.after.tolist() == pytest.approx([p if ok else 0.0 for p, ok in zip(unmasked, allowed)], abs=1e-12)
    masked = exact_softmax(xs, allowed)
    assert cmp.before.tolist() == pytest.approx(masked, abs=1e-12)
    assert cmp.renormalised.tolist() == pytest.approx(masked, abs=1e-9)  # well conditioned: logits within ±8
    assert cmp.before_sum.item() == pytest.approx(1.0) and cmp.after_sum.item() == pytest.approx(1.0 - missing)


def test_zero_after_softmax_on_a_row_with_no_allowed_key():
    cmp = masking.zero_after_softmax(
        torch.tensor([[0.5, -1.0], [0.2, 0.3]]), torch.tensor([[False, False], [True, False]])
    )
    assert cmp.before[0].tolist() == [0.0, 0.0] and cmp.renormalised[0].tolist() == [0.0, 0.0]
    assert cmp.missing_mass[0].item() == 1.0
    assert torch.isfinite(cmp.renormalised).all()


def test_first_partly_masked_row_is_the_first_row_that_loses_weight_when_zeroing():
    # Left-padded length 4 in T = 6 under the causal mask: rows 0, 1 see only padding, row 2 sees key 2 alone.
    left = masking.ragged_masks([6, 4], side="left").combined[1]
    assert masking.first_partly_masked_row(left) == 2
    assert masking.first_partly_masked_row(torch.ones(3, 3, dtype=torch.bool).tril()) == 0
    assert masking.first_partly_masked_row(torch.ones(3, 4, dtype=torch.bool)) == 0  # nothing forbidden
    assert masking.first_partly_masked_row(torch.zeros(3, 4, dtype=torch.bool)) == 0  # nothing allowed
    assert masking.first_partly_masked_row(torch.tensor([[True, True], [False, False], [True, False]])) == 2
    with pytest.raises(ValueError, match="bool mask"):
        masking.first_partly_masked_row(torch.ones(3))


# --- masks -------------------------------------------------------------------------------------------


def test_word_tokens():
    assert masking.word_tokens("the cat  sat down ") == ("the", "cat", "sat", "down")
    with pytest.raises(ValueError, match="type a few words"):
        masking.word_tokens("   ")
    with pytest.raises(ValueError, match="at most 8 words"):
        masking.word_tokens("a b c d e f g h i")


@given(
    st.lists(st.integers(0, 8), min_size=1, max_size=4).filter(lambda ns: max(ns) >= 1),
    st.sampled_from(["right", "left"]),
    st.booleans(),
    st.booleans(),
)
def test_ragged_masks_against_the_hand_masks(lengths, side, causal, padding):
    m = masking.ragged_masks(lengths, side=side, causal=causal, padding=padding)
    T = max(lengths)
    real = handcheck.padding_mask(lengths, T, side=side)
    future_ok = handcheck.causal_mask(T)
    expected = [
        [[(future_ok[t][s] or not causal) and (real[b][s] or not padding) for s in range(T)] for t in range(T)]
        for b in range(len(lengths))
    ]
    assert m.real.tolist() == [list(r) for r in real]
    assert m.combined.tolist() == expected
    assert m.allowed_keys.tolist() == [[sum(row) for row in seq] for seq in expected]
    assert m.no_allowed_key.tolist() == [[not any(row) for row in seq] for seq in expected]


def test_ragged_masks_rejects_batches_without_tokens():
    for bad in ([], [0, 0], [3, -1]):
        with pytest.raises(ValueError, match="lengths must be"):
            masking.ragged_masks(bad)
    with pytest.raises(ValueError, match="side"):
        masking.ragged_masks([2, 1], side="middle")


@pytest.mark.numerics
def test_fully_masked_rows_are_zero_with_finite_gradients_where_naive_softmax_is_nan():
    masks = masking.ragged_masks([4, 2], side="left")  # sequence 1: rows 0 and 1 see only padding
    q, k, v = (x[:, 0] for x in lessons.random_qkv(2, 1, 4, 3, seed=1))
    empty = masking.fully_masked_rows(q, k, v, masks.combined)
    assert empty.rows.tolist() == [[False] * 4, [True, True, False, False]]
    assert empty.weights[1, :2].tolist() == [[0.0] * 4] * 2
    assert empty.out[1, :2].tolist() == [[0.0] * 3] * 2
    assert empty.grad_q[1, :2].tolist() == [[0.0] * 3] * 2
    assert empty.grads_finite and empty.grad_entries == 3 * 2 * 4 * 3
    assert empty.naive_nan_rows.tolist() == empty.rows.tolist()
    assert empty.naive_nan_grads == 4 * 3  # every value row of sequence 1
    # The lab's rows agree with PyTorch's own safe SDPA, empty rows included.
    torch.testing.assert_close(
        empty.out, F.scaled_dot_product_attention(q, k, v, attn_mask=masks.combined), atol=ATOL32, rtol=0
    )


@pytest.mark.numerics
def test_mask_experiment_uses_the_combined_mask():
    masks = masking.ragged_masks([5, 3, 0], side="right")
    exp = masking.mask_experiment(masks, seed=3, D=4)
    q, k, v = (x[:, 0] for x in lessons.random_qkv(3, 1, 5, 4, seed=3))
    assert torch.equal(exp.q, q)
    torch.testing.assert_close(
        exp.result.out, F.scaled_dot_product_attention(q, k, v, attn_mask=masks.combined), atol=ATOL32, rtol=0
    )
    assert exp.comparison.missing_mass[2].tolist() == [1.0] * 5  # length 0: everything is forbidden
    assert exp.empty.rows[2].all() and not exp.empty.rows[:2].any()


# --- renormalise_after_softmax ------------------------------------------------------------------------


@pytest.mark.numerics
@given(rows_with_mask.filter(lambda r: not all(r[1])), st.floats(-20, 20))
def test_renormalising_restores_the_masked_softmax_when_well_conditioned(row, spike):
    xs, allowed = row
    case = masking.renormalise_after_softmax(torch.tensor(xs), torch.tensor(allowed), forbidden_logit=spike)
    assert case.key == max(s for s, ok in enumerate(allowed) if not ok)
    expected = exact_softmax(xs, allowed)  # the forbidden logit plays no part in the formula
    assert not case.undefined
    assert case.masked.tolist() == pytest.approx(expected, abs=1e-6)
    assert case.renormalised.tolist() == pytest.approx(expected, abs=1e-5)
    assert case.max_error <= 1e-5


@pytest.mark.numerics
def test_renormalising_breaks_when_a_forbidden_logit_dominates():
    ex = lessons.worked_example()
    scores, allowed = ex.result.scores[0, 2], ex.mask[2]
    case = masking.renormalise_after_softmax(scores, allowed, forbidden_logit=1000.0)
    expected = exact_softmax(scores.tolist(), allowed.tolist())
    # The plain division is 0/0, checked without the lab's code.
    zeroed = torch.softmax(case.logits, -1) * allowed
    assert zeroed.sum().item() == 0.0 and torch.isnan(zeroed / zeroed.sum()).all()
    assert case.undefined and case.kept_mass == 0.0
    assert case.renormalised.tolist() == [0.0] * 4
    assert case.masked.tolist() == pytest.approx(expected, abs=1e-6)
    assert case.max_error == pytest.approx(max(expected), abs=1e-6)
    sweep = [masking.renormalise_after_softmax(scores, allowed, forbidden_logit=x) for x in masking.RENORMALISE_SWEEP]
    assert not sweep[0].undefined and sweep[-1].undefined  # the sweep crosses float32 underflow


def test_renormalise_after_softmax_rejects_bad_rows():
    s = torch.tensor([0.1, 0.2])
    with pytest.raises(ValueError, match="at least one allowed and one forbidden"):
        masking.renormalise_after_softmax(s, torch.tensor([True, True]), forbidden_logit=5.0)
    with pytest.raises(ValueError, match="not forbidden"):
        masking.renormalise_after_softmax(s, torch.tensor([True, False]), forbidden_logit=5.0, key=0)
    with pytest.raises(ValueError, match="finite"):
        masking.renormalise_after_softmax(s, torch.tensor([True, False]), forbidden_logit=math.inf)
