"""core.model.introspect: the q, k, v it reports are the ones the model attends with, checked against the model's
own weights and against a reference written without the model's modules (raw weight matrices, the
pure-Python RoPE trace, an explicit layer norm)."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from bundles import TEXT, tiny_model
from references import reference_qkv, reference_weights

from core import handcheck
from core.agreement import allowance, model_terms
from core.attention import scaled_dot_product_attention
from core.model.gpt import GPT, PRESETS
from core.model.introspect import (
    attention_grid,
    check_row,
    head_summaries,
    heaviest_keys,
    projections,
    weight_allowance,
)
from core.model.prompt import encode_for_model
from core.model.rope import apply_rope
from core.model.tokenizer import EOS_ID, UNK_ID, CharTokenizer


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(seed=0, spread=20.0)


@pytest.mark.numerics
def test_reported_qkv_reproduce_the_models_own_weights(tiny):
    model, tok = tiny
    ids = tok.encode(TEXT)
    grid = attention_grid(model, ids)  # from forward(return_weights=True)
    for layer in range(model.config.n_layer):
        for head in range(model.config.n_head):
            p = projections(model, ids, layer, head)
            got = scaled_dot_product_attention(p.q[None], p.k[None], p.v[None], p.mask).weights[0]  # (T, T)
            torch.testing.assert_close(got, grid[layer, head], atol=1e-5, rtol=0)
            torch.testing.assert_close(p.scores, (p.q @ p.k.T) / math.sqrt(p.head_dim), atol=1e-6, rtol=0)
    # the weights are far from uniform, so agreeing with them says something
    assert grid[:, :, -1].max() > 0.5


@pytest.mark.numerics
def test_projections_equal_a_reference_built_from_the_raw_weight_matrices(tiny):
    model, tok = tiny
    ids = tok.encode(TEXT)
    for layer, head in [(0, 1), (1, 0)]:
        p = projections(model, ids, layer, head)
        q, k, v, normed = reference_qkv(model, ids, layer, head)
        torch.testing.assert_close(p.q.double(), q, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(p.k.double(), k, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(p.v.double(), v, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(p.normed.double(), normed, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(
            attention_grid(model, ids)[layer, head].double(),
            reference_weights(model, ids, layer, head),
            atol=1e-5,
            rtol=0,
        )
    p = projections(model, ids, 0, 0)
    assert torch.equal(p.embeddings, model.token_embedding.weight[torch.tensor(ids)])
    assert torch.equal(p.block_input, p.embeddings)  # block 0 reads the embeddings (no learned positions)
    C, D = model.config.d_model, model.config.head_dim
    assert p.embeddings.shape == p.normed.shape == (len(ids), C)
    assert p.q.shape == p.k.shape == p.v.shape == p.q_raw.shape == (len(ids), D)


def test_q_and_k_after_rope_are_apply_rope_of_before(tiny):
    model, tok = tiny
    ids = tok.encode(TEXT)
    p = projections(model, ids, 1, 1)
    positions = torch.arange(len(ids))
    assert torch.equal(p.q, apply_rope(p.q_raw, positions, model.config.rope_base))
    assert torch.equal(p.k, apply_rope(p.k_raw, positions, model.config.rope_base))
    assert torch.equal(p.q[0], p.q_raw[0])  # position 0 is rotated by angle 0
    assert not torch.allclose(p.q[5], p.q_raw[5])  # later positions really turn


@pytest.mark.numerics
def test_grid_rows_sum_to_one_and_are_exactly_zero_above_the_diagonal(tiny):
    model, tok = tiny
    ids = tok.encode(TEXT)
    grid = attention_grid(model, ids)
    L, H, T = model.config.n_layer, model.config.n_head, len(ids)
    assert grid.shape == (L, H, T, T)
    torch.testing.assert_close(grid.sum(-1), torch.ones(L, H, T), atol=1e-6, rtol=0)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    assert (grid[:, :, future] == 0).all()
    assert (grid[:, :, 0, 0] == 1).all()  # row 0 sees only key 0


def test_text_longer_than_the_context_keeps_its_last_tokens():
    _, tok = tiny_model()
    text = "abdefr" * 10  # 60 characters, all in the vocabulary
    enc = encode_for_model(tok, text, 32)
    assert enc.truncated and enc.n_tokens == 60 and enc.dropped == 28
    assert list(enc.ids) == tok.encode(text[-32:])
    assert tok.decode(enc.ids) == enc.kept_text == text[-32:]
    short = encode_for_model(tok, "abd", 32)
    assert not short.truncated and short.dropped == 0 and short.ids == tuple(tok.encode("abd"))


def test_unknown_characters_are_reported_with_their_positions():
    _, tok = tiny_model()
    enc = encode_for_model(tok, "ab€z€ d", 32)  # '€' and 'z' are not in TEXT
    assert enc.unknown_chars == ("€", "z")
    assert enc.unknown_positions == (2, 3, 4)
    assert [enc.ids[t] for t in enc.unknown_positions] == [UNK_ID] * 3
    assert enc.pieces[2] == "<unk>" and enc.pieces[5] == "␣"
    assert enc.labels()[5] == "5 ␣"
    # an unseen character that was cut off is not reported
    assert encode_for_model(tok, "z" + "a" * 32, 32).unknown_chars == ()


def test_empty_text_is_empty_and_no_ids_are_refused_by_the_model_functions(tiny):
    """An empty text is flagged empty (the pages stop there) and reads only <eos>; no ids at all are refused."""
    model, tok = tiny
    enc = encode_for_model(tok, "", 32)
    assert enc.empty and enc.ids == (EOS_ID,) and enc.kept_text == "" and not enc.truncated
    with pytest.raises(ValueError, match="no tokens"):
        projections(model, [], 0, 0)
    with pytest.raises(ValueError, match="no tokens"):
        attention_grid(model, [])


def test_bad_arguments_name_what_was_wrong(tiny):
    model, tok = tiny
    ids = tok.encode("abc")
    with pytest.raises(ValueError, match="layer must be an integer in 0..1"):
        projections(model, ids, 2, 0)
    with pytest.raises(ValueError, match="head"):
        projections(model, ids, 0, -1)
    with pytest.raises(ValueError, match="context_length=32"):
        attention_grid(model, [4] * 33)
    with pytest.raises(ValueError, match=f"0..{tok.vocab_size - 1}"):
        attention_grid(model, [tok.vocab_size])
    with pytest.raises(ValueError, match="context_length"):
        encode_for_model(tok, "abc", 0)


@pytest.mark.numerics
def test_check_row_agrees_with_the_model_within_the_declared_tolerance(tiny):
    model, tok = tiny
    ids = tok.encode(TEXT)
    grid = attention_grid(model, ids)
    p = projections(model, ids, 1, 0)
    for t in (0, 7, len(ids) - 1):
        row = check_row(p, grid[1, 0], t)
        assert len(row.k_rows) == len(row.model_weights) == t + 1  # the causal prefix only
        assert row.future_weight == 0.0
        # the verdict: float64 on both sides, within an allowance derived from eps (about 1e-13 here)
        assert row.within_tolerance and row.decided.dtype == "float64" and row.decided.allowed < 1e-11
        # the model's own float32 weights: a figure, within float32's allowance
        assert row.model_float32.passed and row.model_float32.dtype == "float32"
        assert row.weight_sum == pytest.approx(1.0, abs=1e-12)
        # the hand trace's output is the head's output row (PyTorch's own kernel, float64 on the same numbers)
        q, k, v = (x.double()[None] for x in (p.q, p.k, p.v))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)[0, t]
        torch.testing.assert_close(torch.tensor(row.trace.out, dtype=torch.float64), out, atol=1e-12, rtol=0)
    assert check_row(p, grid[1, 0], 0).trace.softmax.weights == (1.0,)
    # a wrong head's weights are caught by the shown float32 figure
    wrong = check_row(p, grid[1, 1], len(ids) - 1)
    assert not wrong.model_float32.passed


@pytest.mark.numerics
def test_a_broken_attention_kernel_fails_the_hand_check_by_orders_of_magnitude(tiny, monkeypatch):
    """The deliberately broken variant: a kernel that forgets the 1/sqrt(D) scaling. The hand check must
    catch it far above its allowance on every CPU (a rounding difference is ~1e-16, this is ~1e-2)."""
    import core.model.introspect as inspect_module
    from core.attention import scaled_dot_product_attention as real

    model, tok = tiny
    ids = tok.encode(TEXT)
    grid = attention_grid(model, ids)
    p = projections(model, ids, 1, 0)
    monkeypatch.setattr(
        inspect_module, "scaled_dot_product_attention", lambda q, k, v, mask, *, scale: real(q, k, v, mask, scale=1.0)
    )
    row = check_row(p, grid[1, 0], len(ids) - 1)
    assert not row.within_tolerance and row.decided.ratio > 1e6
    with pytest.raises(ValueError, match="query row t"):
        check_row(p, grid[1, 0], len(ids))
    assert isinstance(row.trace, handcheck.RowTrace)


@pytest.mark.numerics
def test_forward_weights_and_attention_grid_agree_for_a_longer_text_cut_to_the_context(tiny):
    model, tok = tiny
    enc = encode_for_model(tok, TEXT * 3, model.config.context_length)
    assert enc.truncated and enc.T == model.config.context_length
    grid = attention_grid(model, enc.ids)
    weights = model(torch.tensor([enc.ids]), return_weights=True).weights
    for layer in range(model.config.n_layer):
        assert torch.equal(grid[layer], weights[layer][0])
    p = projections(model, enc.ids, 1, 1)
    got = F.softmax(p.scores.masked_fill(~p.mask, float("-inf")), dim=-1)  # PyTorch's own softmax
    torch.testing.assert_close(got, grid[1, 1], atol=1e-5, rtol=0)


@pytest.mark.numerics
def test_head_summaries_match_loops_over_the_weights(tiny):
    model, tok = tiny
    ids = tok.encode(TEXT)
    grid = attention_grid(model, ids)
    T = len(ids)
    summaries = head_summaries(grid)
    assert [(s.layer, s.head) for s in summaries] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for s in summaries:
        w = grid[s.layer, s.head].tolist()
        assert s.self_weight == pytest.approx(math.fsum(w[t][t] for t in range(T)) / T, abs=1e-9)
        assert s.previous_weight == pytest.approx(math.fsum(w[t][t - 1] for t in range(1, T)) / (T - 1), abs=1e-9)
        assert s.first_weight == pytest.approx(math.fsum(w[t][0] for t in range(1, T)) / (T - 1), abs=1e-9)
        assert s.max_weight == pytest.approx(math.fsum(max(row) for row in w) / T, abs=1e-9)
    one = head_summaries(attention_grid(model, ids[:1]))
    assert all(s.self_weight == 1.0 and s.max_weight == 1.0 and math.isnan(s.previous_weight) for s in one)
    with pytest.raises(ValueError, match="grid"):
        head_summaries(grid[0])


@pytest.mark.numerics
def test_a_model_without_the_causal_mask_is_reproduced_over_every_key():
    tok = CharTokenizer.from_text(TEXT)
    torch.manual_seed(1)
    model = GPT(dataclasses.replace(PRESETS["tiny"], vocab_size=tok.vocab_size, causal=False)).eval()
    ids = tok.encode(TEXT[:12])
    grid = attention_grid(model, ids)
    p = projections(model, ids, 1, 0)
    assert p.mask.all()
    got = scaled_dot_product_attention(p.q[None], p.k[None], p.v[None]).weights[0]  # no mask at all
    torch.testing.assert_close(got, grid[1, 0], atol=1e-5, rtol=0)
    row = check_row(p, grid[1, 0], 3)
    assert len(row.model_weights) == len(ids) and row.future_weight == 0.0 and row.within_tolerance


@pytest.mark.numerics
def test_heaviest_keys_is_the_largest_weight_and_every_weight_within_float32_rounding_of_it(tiny):
    model, tok = tiny
    config = model.config
    near = weight_allowance(config)  # the margin the inspector's question uses
    assert near == allowance(torch.float32, model_terms(config), 1.0) and 1e-6 < near < 1e-2
    assert heaviest_keys([0.2, 0.5, 0.3], config) == (1,)
    assert heaviest_keys([1.0], config) == (0,)
    assert heaviest_keys([0.4, 0.4 + near / 2, 0.2], config) == (0, 1)  # too close to order: both
    assert heaviest_keys([0.4, 0.4 + 2 * near, 0.2], config) == (1,)
    weights = attention_grid(model, tok.encode(TEXT))[1, 0, -1].tolist()  # (T,) the last query of layer 1, head 0
    assert heaviest_keys(weights, config)[0] == max(range(len(weights)), key=lambda s: weights[s])
    for bad in ([], [0.5, float("nan")]):
        with pytest.raises(ValueError, match="non-empty row of finite weights"):
            heaviest_keys(bad, config)
