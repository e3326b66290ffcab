"""core.attention against two independent references: the pure-Python hand-check and PyTorch's SDPA."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from core import handcheck
from core.attention import causal_mask, padding_mask, scaled_dot_product_attention, softmax

FP32 = dict(atol=1e-5, rtol=1.3e-6)  # PyTorch's own SDPA tolerances, fp32 against a float64 reference
FP64 = dict(atol=1e-12, rtol=1e-12)


def draw(shape_q, shape_k, Dv, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*shape_q, generator=g, dtype=dtype)
    k = torch.randn(*shape_k, generator=g, dtype=dtype)
    v = torch.randn(*shape_k[:-1], Dv, generator=g, dtype=dtype)
    return q, k, v


def hand_out(q, k, v, mask):
    """Run the hand-check head by head: returns weights and out as float64 tensors."""
    *lead, T, _ = q.shape
    S = k.shape[-2]
    full = torch.ones(T, S, dtype=torch.bool) if mask is None else mask.expand(*lead, T, S)
    ws, outs = torch.zeros(*lead, T, S, dtype=torch.float64), torch.zeros(*lead, T, v.shape[-1], dtype=torch.float64)
    for idx in torch.cartesian_prod(*[torch.arange(n) for n in lead]).reshape(-1, len(lead)).tolist():
        idx = tuple(idx)
        m = full if mask is None else full[idx]
        trace = handcheck.scaled_dot_product_attention(q[idx].tolist(), k[idx].tolist(), v[idx].tolist(), m.tolist())
        ws[idx] = torch.tensor(trace.weights, dtype=torch.float64)
        outs[idx] = torch.tensor(trace.out, dtype=torch.float64)
    return ws, outs


@pytest.mark.smoke
@pytest.mark.numerics
@given(
    B=st.integers(1, 2),
    H=st.integers(1, 3),
    T=st.integers(1, 5),
    extra=st.integers(0, 3),
    D=st.integers(1, 6),
    Dv=st.integers(1, 4),
    seed=st.integers(0, 10_000),
    use_causal=st.booleans(),
)
def test_vectorised_equals_hand_check_and_pytorch(B, H, T, extra, D, Dv, seed, use_causal):
    S = T + extra
    q, k, v = draw((B, H, T, D), (B, H, S, D), Dv, seed)
    mask = causal_mask(T, S) if use_causal else None
    result = scaled_dot_product_attention(q, k, v, mask)
    ws, outs = hand_out(q, k, v, mask)
    torch.testing.assert_close(result.weights, ws, **FP64)
    torch.testing.assert_close(result.out, outs, **FP64)
    torch.testing.assert_close(result.out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **FP64)


@pytest.mark.numerics
@given(T=st.integers(1, 6), D=st.integers(1, 8), seed=st.integers(0, 10_000))
def test_fp32_matches_float64_reference_within_sdpa_tolerance(T, D, seed):
    q, k, v = draw((2, 2, T, D), (2, 2, T, D), 3, seed)
    mask = causal_mask(T)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # float64
    out32 = scaled_dot_product_attention(q.float(), k.float(), v.float(), mask).out
    torch.testing.assert_close(out32.double(), reference, **FP32)


@pytest.mark.numerics
@given(
    lengths=st.lists(st.integers(0, 6), min_size=1, max_size=4),
    side=st.sampled_from(["right", "left"]),
    causal=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_masks_rows_sum_to_one_masked_entries_exactly_zero(lengths, side, causal, seed):
    B, T, D = len(lengths), 6, 4
    q, k, v = draw((B, T, D), (B, T, D), 2, seed)
    mask = padding_mask(lengths, T, side=side)  # (B, 1, S)
    if causal:
        mask = mask & causal_mask(T)
    result = scaled_dot_product_attention(q, k, v, mask)
    allowed = mask.expand(B, T, T)
    assert (result.weights[~allowed] == 0).all()
    has_key = allowed.any(-1)
    torch.testing.assert_close(result.weights.sum(-1)[has_key], torch.ones_like(result.weights.sum(-1)[has_key]))
    assert torch.isfinite(result.out).all()
    # Rows with no allowed key: zero weights and zero output, as PyTorch's safe softmax returns.
    assert (result.weights[~has_key] == 0).all() and (result.out[~has_key] == 0).all()
    torch.testing.assert_close(result.out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **FP64)


def test_fully_masked_row_has_finite_gradients_where_naive_softmax_gives_nan():
    q, k, v = draw((1, 4, 3), (1, 4, 3), 2, seed=0)
    mask = padding_mask([2], 4, side="left") & causal_mask(4)  # rows 0, 1 see only padding
    q.requires_grad_(True)
    k.requires_grad_(True)
    result = scaled_dot_product_attention(q, k, v, mask)
    result.out.sum().backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all()
    assert (result.out[0, :2] == 0).all()
    naive = torch.softmax(result.scores.detach().masked_fill(~mask, float("-inf")), dim=-1)
    assert torch.isnan(naive[0, :2]).all(), "the naive softmax is the failure this guards against"


def test_causal_mask_bottom_right_aligned_against_hand_check():
    for T, S in [(1, 1), (3, 3), (2, 5), (1, 7), (4, 6)]:
        assert causal_mask(T, S).tolist() == [list(r) for r in handcheck.causal_mask(T, S)]
    # With a cache, the last query sees every key; the first new query sees the cache and itself.
    m = causal_mask(2, 5)
    assert m[-1].all() and m[0].tolist() == [True, True, True, True, False]


def test_causal_mask_with_cache_equals_the_last_rows_of_the_full_mask():
    full = causal_mask(7)
    for T in range(1, 8):
        assert torch.equal(causal_mask(T, 7), full[7 - T :])


def test_padding_mask_matches_hand_check():
    for side in ("right", "left"):
        got = padding_mask([0, 2, 5], 5, side=side).squeeze(1).tolist()
        assert got == [list(r) for r in handcheck.padding_mask([0, 2, 5], 5, side=side)]


@pytest.mark.numerics
def test_softmax_temperature_is_division_of_logits():
    x = torch.tensor([1.2, 0.3, -0.4, 1.8], dtype=torch.float64)
    for tau in (0.1, 0.5, 1.0, 3.0):
        expected = [math.exp(s / tau) for s in x.tolist()]
        total = math.fsum(expected)
        torch.testing.assert_close(
            softmax(x, temperature=tau), torch.tensor([e / total for e in expected], dtype=torch.float64)
        )


@pytest.mark.numerics
def test_softmax_survives_huge_logits():
    x = torch.tensor([1000.0, 999.0, -1000.0])
    p = softmax(x)
    assert torch.isfinite(p).all()
    torch.testing.assert_close(p, torch.softmax(x, -1))


@pytest.mark.numerics
def test_temperature_and_scale_reach_the_scores():
    q, k, v = draw((1, 3, 2), (1, 3, 2), 2, seed=1)
    r = scaled_dot_product_attention(q, k, v, scale=1.0, temperature=2.0)
    torch.testing.assert_close(r.scores, q @ k.transpose(-2, -1))
    torch.testing.assert_close(r.weights, torch.softmax(q @ k.transpose(-2, -1) / 2.0, -1))


@pytest.mark.parametrize(
    "args, message",
    [
        ((torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 3)), "(B, T, D) or (B, H, T, D)"),
        ((torch.ones(1, 3, 4), torch.ones(1, 3, 5), torch.ones(1, 3, 2)), "same head width"),
        ((torch.ones(1, 3, 4), torch.ones(1, 3, 4), torch.ones(1, 2, 2)), "same number of keys"),
        ((torch.ones(1, 3, 4), torch.ones(2, 3, 4), torch.ones(2, 3, 2)), "leading"),
        ((torch.ones(1, 3, 4, dtype=torch.long),) * 3, "floating point"),
    ],
)
def test_bad_shapes_raise_value_error_naming_them(args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        scaled_dot_product_attention(*args)


@pytest.mark.parametrize("tau", [0, -1.0, float("nan"), float("inf")])
def test_bad_temperature_raises(tau):
    with pytest.raises(ValueError, match="temperature"):
        softmax(torch.zeros(3), temperature=tau)


def test_bad_masks_raise():
    q = torch.ones(1, 3, 4)
    with pytest.raises(ValueError, match="bool"):
        scaled_dot_product_attention(q, q, q, torch.ones(3, 3))
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(q, q, q, torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="1 <= T <= S"):
        causal_mask(4, 2)
    with pytest.raises(ValueError, match="0..3"):
        padding_mask([4], 3)
