"""core.model.gpt: config validation, shapes, causality, attention maps, the SDPA reference, loss sanity."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

import core.model.gpt
from core.agreement import agreement, model_terms
from core.model.gpt import GPT, PRESETS, preset
from core.model.rope import apply_rope, rope_cos_sin

V = 23


def tiny_model(seed=0, **changes):
    torch.manual_seed(seed)
    return GPT(dataclasses.replace(preset("tiny", V), **changes))


def random_ids(B, T, seed=0, vocab=V):
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


# ---- configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(d_model=30, n_head=4), "divisible"),
        (dict(d_model=10, n_head=2), "even"),  # head width 5
        (dict(n_layer=0), "n_layer"),
        (dict(context_length=-1), "context_length"),
        (dict(vocab_size=-5), "vocab_size"),
        (dict(dropout=1.0), "dropout"),
        (dict(rope_base=1.0), "rope_base"),
        (dict(n_head=2.0), "n_head"),
    ],
)
def test_invalid_configs_raise(changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(preset("tiny", V), **changes)


def test_presets_need_a_vocabulary_size():
    assert all(config.vocab_size == 0 for config in PRESETS.values())
    with pytest.raises(ValueError, match="vocab_size"):
        GPT(PRESETS["tiny"])
    with pytest.raises(ValueError, match="unknown preset"):
        preset("huge", V)
    assert preset("baby", V) == dataclasses.replace(PRESETS["baby"], vocab_size=V)


def test_required_preset_shapes():
    baby, large = PRESETS["baby"], PRESETS["large"]
    assert (baby.n_layer, baby.n_head, baby.d_model, baby.context_length) == (4, 4, 128, 64)
    assert large.context_length == 256


def test_default_preset_fits_in_8_megabytes_of_fp32_weights():
    model = GPT(preset("default", 256))  # a generous character vocabulary
    assert model.num_parameters() * 4 <= 8 * 1024 * 1024


def test_parameter_count_closed_form():
    C, L, r = 32, 2, 4
    per_block = 2 * (2 * C) + 3 * C * C + C * C + 2 * r * C * C  # two LayerNorms, qkv, proj, MLP
    expected = V * C + L * per_block + 2 * C  # tied embedding/head counted once, final LayerNorm
    model = tiny_model()
    assert model.num_parameters() == expected
    assert model.lm_head.weight is model.token_embedding.weight


@pytest.mark.numerics
def test_residual_projections_use_the_scaled_init():
    model = tiny_model()
    std = model.blocks[0].attn.proj.weight.std().item()
    expected = 0.02 / math.sqrt(2 * model.config.n_layer)
    assert abs(std - expected) / expected < 0.15
    assert abs(model.blocks[0].attn.qkv.weight.std().item() - 0.02) / 0.02 < 0.15


# ---- forward pass ------------------------------------------------------------------------------


def test_shapes_of_logits_and_attention_weights():
    model = tiny_model()
    cfg = model.config
    out = model(random_ids(3, 11), return_weights=True)
    assert out.logits.shape == (3, 11, V)
    assert len(out.weights) == cfg.n_layer
    assert all(w.shape == (3, cfg.n_head, 11, 11) for w in out.weights)
    assert model(random_ids(3, 11)).weights is None


@pytest.mark.parametrize(
    "idx, message",
    [
        (torch.zeros(5, dtype=torch.long), "2-D"),
        (torch.zeros(1, 5), "long"),
        (torch.zeros(1, 33, dtype=torch.long), "context_length=32"),
        (torch.full((1, 4), V, dtype=torch.long), f"0..{V - 1}"),
        (torch.full((1, 4), -1, dtype=torch.long), "min -1"),
    ],
)
def test_invalid_idx_raises(idx, message):
    with pytest.raises(ValueError, match=message):
        tiny_model()(idx)


@pytest.mark.numerics
def test_attention_rows_sum_to_one_and_nothing_above_the_diagonal():
    model = tiny_model()
    weights = model(random_ids(2, 16), return_weights=True).weights
    future = torch.triu(torch.ones(16, 16, dtype=torch.bool), diagonal=1)
    for w in weights:
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-6, rtol=0)
        assert torch.all(w[..., future] == 0)
        assert torch.all(w[..., 0, 0] == 1)  # row 0 sees only key 0


@pytest.mark.numerics
@pytest.mark.parametrize("j", [0, 5, 31])
def test_editing_a_token_leaves_earlier_logits_unchanged(j):
    model = tiny_model().eval()
    idx = random_ids(2, 32)
    edited = idx.clone()
    edited[:, j] = (edited[:, j] + 1) % V
    with torch.no_grad():
        before, after = model(idx).logits, model(edited).logits
    torch.testing.assert_close(after[:, :j], before[:, :j], atol=1e-6, rtol=0)
    assert (after[:, j] - before[:, j]).abs().max() > 1e-4  # position j itself does see the edit


@pytest.mark.numerics
def test_without_the_causal_mask_earlier_positions_see_the_future():
    model = tiny_model(causal=False).eval()
    idx = random_ids(1, 16)
    edited = idx.clone()
    edited[0, 10] = (edited[0, 10] + 1) % V
    with torch.no_grad():
        before, after = model(idx).logits, model(edited).logits
    assert (after[0, :10] - before[0, :10]).abs().max() > 1e-4


@pytest.mark.numerics
def test_block_attention_equals_pytorch_sdpa():
    model = tiny_model(seed=3)
    attn = model.blocks[0].attn
    B, T, C, H = 2, 9, model.config.d_model, model.config.n_head
    D = C // H
    x = torch.randn(B, T, C, generator=torch.Generator().manual_seed(4))
    positions = torch.arange(T)
    cos, sin = rope_cos_sin(positions, D)
    mask = core.model.gpt.causal_mask(T, T)  # (T, T)
    out, weights = attn(x, cos, sin, mask, False, None, 0, True)  # the lessons' kernel, with weights
    fused, none = attn(x, cos, sin, None, True, None, 0, False)  # PyTorch's fused kernel, no weights
    assert none is None
    torch.testing.assert_close(fused, out, atol=1e-5, rtol=1.3e-6)

    q, k, v = attn.qkv(x).split(C, dim=2)
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
    q, k = apply_rope(q, positions), apply_rope(k, positions)
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    reference = attn.proj(reference.transpose(1, 2).reshape(B, T, C))
    torch.testing.assert_close(out, reference, atol=1e-5, rtol=1.3e-6)
    # and the weights are softmax(q kᵀ / √D) with the future masked, computed the textbook way
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
    scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    torch.testing.assert_close(weights, torch.softmax(scores, dim=-1), atol=1e-6, rtol=0)


def test_every_block_calls_core_attention_when_the_weights_are_asked_for_and_only_then(monkeypatch):
    calls = []
    original = core.model.gpt.scaled_dot_product_attention

    def spy(q, k, v, mask=None, **kwargs):
        calls.append((tuple(q.shape), None if mask is None else tuple(mask.shape)))
        return original(q, k, v, mask, **kwargs)

    monkeypatch.setattr(core.model.gpt, "scaled_dot_product_attention", spy)
    model = tiny_model()
    model(random_ids(1, 7), return_weights=True)
    assert calls == [((1, 2, 7, 16), (7, 7))] * model.config.n_layer
    model(random_ids(1, 7))  # no weights: PyTorch's fused kernel
    assert len(calls) == model.config.n_layer


# ---- training sanity ---------------------------------------------------------------------------


@pytest.mark.numerics
def test_initial_loss_is_close_to_ln_v():
    model = tiny_model(seed=0)
    idx = random_ids(8, 33, seed=1)
    logits = model(idx[:, :-1]).logits
    loss = F.cross_entropy(logits.reshape(-1, V), idx[:, 1:].reshape(-1))
    assert abs(loss.item() - math.log(V)) < 0.1


@pytest.mark.numerics
def test_a_tiny_batch_overfits():
    model = tiny_model(seed=0)
    idx = random_ids(4, 33, seed=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    for _ in range(300):
        logits = model(idx[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, V), idx[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.05:
            break
    assert loss.item() < 0.05


@pytest.mark.numerics
def test_sdpa_path_matches_core_attention_in_logits_and_gradients():
    """Without weights asked for, attention is PyTorch's fused kernel; it is held to parity with the lessons' kernel
    (return_weights=True), in float64 by core.agreement's rule: a gradient entry sums over every one of the B * T
    positions on top of the forward chain."""
    torch.manual_seed(0)
    cfg = dataclasses.replace(preset("tiny", 23), n_layer=2)
    model = GPT(cfg).double()
    idx = torch.randint(0, 23, (3, cfg.context_length))
    targets = torch.randint(0, 23, (3, cfg.context_length))
    grads = []
    for return_weights in (True, False):
        model.zero_grad()
        logits = model(idx, return_weights=return_weights).logits
        F.cross_entropy(logits.reshape(-1, 23), targets.reshape(-1)).backward()
        grads.append((logits.detach(), [p.grad.clone() for p in model.parameters()]))
    terms = model_terms(cfg)
    a = agreement(grads[1][0], grads[0][0], terms=terms)
    assert a.passed and a.dtype == "float64", a.describe()
    for (name, _), fast_grad, core_grad in zip(model.named_parameters(), grads[1][1], grads[0][1]):
        a = agreement(fast_grad, core_grad, terms=terms + idx.numel())
        assert a.passed, f"{name}: {a.describe()}"


# ---- the cache through both kernels (was the fast decode path's parity) -----------------------------------


def spread_model(seed=0, **changes):
    """The tiny preset with larger random weights (greedy decoding then varies its tokens), float64, eval."""
    torch.manual_seed(seed)
    model = GPT(dataclasses.replace(preset("tiny", 20), **changes))
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.3)  # LayerNorm gains and biases too: a wrong norm argument shows
    return model.double().eval()


def assert_agree(fast, teaching, model):
    a = agreement(fast, teaching, terms=model_terms(model.config))
    assert a.passed and a.dtype == "float64", a.describe()


def sdpa_and_kernel(model, idx, prefills):
    """Logits of idx through the fused kernel (chunks of the given lengths, then one token at a time) and the same
    chunks through the lessons' kernel, each with its own cache; both caches are returned."""
    L = idx.shape[1]
    fast_cache, teaching_cache = model.new_cache(idx.shape[0]), model.new_cache(idx.shape[0])
    bounds = [0]
    for n in prefills:
        bounds.append(bounds[-1] + n)
    bounds += range(bounds[-1] + 1, L + 1)
    fast, teaching = [], []
    with torch.no_grad():
        for a, b in zip(bounds, bounds[1:]):
            fast.append(model(idx[:, a:b], fast_cache).logits)
            teaching.append(model(idx[:, a:b], teaching_cache, return_weights=True).logits)
    return torch.cat(fast, 1), torch.cat(teaching, 1), fast_cache, teaching_cache


@pytest.mark.numerics
@pytest.mark.parametrize("prefills", [[1], [5], [5, 7]], ids=["token by token", "prefill", "prefill after a prefill"])
def test_cached_logits_of_both_kernels_equal_the_uncached_pass(prefills):
    """[5, 7]: a chunk of 7 after 5 cached positions needs the explicit bottom-right mask."""
    model = spread_model()
    idx = random_ids(3, model.config.context_length, vocab=20)
    fast, teaching, _, _ = sdpa_and_kernel(model, idx, prefills)
    assert_agree(fast, teaching, model)
    with torch.no_grad():
        assert_agree(fast, model(idx, return_weights=True).logits, model)  # the uncached pass, whole sequence


@pytest.mark.numerics
def test_a_top_left_aligned_mask_with_a_non_empty_cache_is_caught(monkeypatch):
    """The broken variant: SDPA's own alignment (top-left) for a prefill after cached positions lets query t see
    only keys 0..t of the cache, not its own position; the parity check must fail."""
    model = spread_model()
    idx = random_ids(1, 12, vocab=20)

    def top_left(T, S, device=None):
        return torch.ones(T, S, dtype=torch.bool, device=device).tril()  # (T, S): row t sees keys 0..t

    monkeypatch.setattr(core.model.gpt, "causal_mask", top_left)
    fast, _, _, _ = sdpa_and_kernel(model, idx, [5, 7])
    with torch.no_grad():
        whole = model(idx).logits  # T == S: top-left is right here
    a = agreement(fast, whole, terms=model_terms(model.config))
    assert not a.passed, a.describe()


@pytest.mark.numerics
def test_both_kernels_fill_the_cache_with_the_same_rotated_keys_and_values():
    model = spread_model()
    idx = random_ids(2, 20, vocab=20)
    _, _, fast_cache, teaching_cache = sdpa_and_kernel(model, idx, [6])
    assert fast_cache.length == teaching_cache.length == 20
    assert_agree(fast_cache.k[:, :, :, :20], teaching_cache.k[:, :, :, :20], model)
    assert_agree(fast_cache.v[:, :, :, :20], teaching_cache.v[:, :, :, :20], model)


@pytest.mark.numerics
def test_the_cached_pass_of_the_model_without_a_causal_mask_matches_its_forward_pass():
    model = spread_model(causal=False)  # the leakage lesson's model: a prefill sees every key
    idx = random_ids(1, 12, vocab=20)
    with torch.no_grad():
        assert_agree(model(idx, model.new_cache()).logits, model(idx, return_weights=True).logits, model)


@pytest.mark.numerics
def test_the_cached_pass_reads_the_weights_as_they_are_now():
    """An in-place update or load_state_dict after a cached call shows in the next one."""
    model = spread_model()
    idx = random_ids(1, 8, vocab=20)
    model(idx, model.new_cache())
    other = spread_model(seed=5)
    model.load_state_dict(other.state_dict())
    with torch.no_grad():
        model.blocks[0].mlp.fc.weight.mul_(2.0)
        other.blocks[0].mlp.fc.weight.mul_(2.0)
        assert_agree(model(idx, model.new_cache()).logits, other(idx, return_weights=True).logits, model)


@pytest.mark.numerics
def test_the_cached_pass_follows_a_model_converted_after_its_first_call():
    """model.float() swaps every Parameter's data in place: the next cached call reads the float32 tensors."""
    model = spread_model()
    idx = random_ids(1, 8, vocab=20)
    model(idx, model.new_cache())  # float64
    model.float()
    with torch.no_grad():
        fast = model(idx, model.new_cache()).logits
        a = agreement(fast, model(idx, return_weights=True).logits, terms=model_terms(model.config))
    assert fast.dtype == torch.float32
    assert a.passed and a.dtype == "float32", a.describe()  # stale float64 weights would be off by whole units


@pytest.mark.numerics
def test_greedy_cached_generation_matches_the_uncached_recompute_across_window_slides():
    from core.model.engine import generate
    from core.model.sampling import SampleConfig

    model = spread_model()
    greedy = SampleConfig(temperature=0.0, max_new_tokens=70)  # 70 tokens through a 32-token context
    cached = list(generate(model, [3, 1, 4], greedy, use_cache=True))
    uncached = list(generate(model, [3, 1, 4], greedy, use_cache=False))
    assert sum(s.reencoded for s in cached) >= 2
    assert [s.token for s in cached] == [s.token for s in uncached]
    assert_agree(torch.stack([s.logits for s in cached]), torch.stack([s.logits for s in uncached]), model)


def test_training_after_a_cached_generation_step_still_has_gradients():
    """The RoPE tables first asked for inside inference_mode are shared with training: plain tensors."""
    from core.model.engine import generate
    from core.model.sampling import SampleConfig

    model = GPT(dataclasses.replace(preset("tiny", 20), rope_base=12345.0)).eval()  # a fresh table shape
    list(generate(model, [1, 2, 3], SampleConfig(temperature=0.0, max_new_tokens=2), use_cache=True))
    model.train()
    loss = model(random_ids(2, 8, vocab=20)).logits.square().mean()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_a_cached_pass_refuses_bad_ids_and_a_full_cache_claiming_no_position():
    model = spread_model()
    cache = model.new_cache()
    with pytest.raises(ValueError, match="token ids must lie"):
        model(torch.tensor([[20]]), cache)
    with pytest.raises(ValueError, match="exceed context_length"):
        model(random_ids(1, model.config.context_length + 1, vocab=20), cache)
    assert cache.length == 0  # a refused call claims no position
