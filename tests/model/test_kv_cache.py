"""core.model.kv_cache: storage (append, the one write), rotated keys, bottom-right mask, cached == uncached. The
sliding window and cache_parity are the engine's (test_engine.py), the context window the prompt's (test_prompt.py)."""

import pytest
import torch

from core.agreement import agreement, model_terms
from core.model.gpt import GPT, preset
from core.model.kv_cache import KVCache
from core.model.rope import apply_rope

V = 20


def spread_model(seed=0):
    """The tiny preset with larger random weights, so greedy decoding does not repeat one token; float64,
    because these tests decide parity (core.agreement: the same verdict on every CPU)."""
    torch.manual_seed(seed)
    model = GPT(preset("tiny", V))
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.normal_(0.0, 0.3)
    return model.double().eval()


def assert_agree(cached, full, model):
    """Cached and full results agree within rounding (core.agreement), not within a tuned constant."""
    a = agreement(cached, full, terms=model_terms(model.config))
    assert a.passed and a.dtype == "float64", a.describe()


def random_ids(B, T, seed=0):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


# ---- the cache as storage ----------------------------------------------------------------------


def test_append_returns_everything_stored_so_far():
    cache = KVCache(n_layer=2, batch_size=2, n_head=3, head_dim=4, capacity=10)
    g = torch.Generator().manual_seed(0)
    chunks = [(torch.randn(2, 3, T, 4, generator=g), torch.randn(2, 3, T, 4, generator=g)) for T in (4, 1, 3)]
    for k_new, v_new in chunks:
        for layer in range(2):
            k_all, v_all = cache.append(layer, k_new + layer, v_new - layer)
    assert cache.length == 8 and cache.remaining == 2
    assert k_all.shape == v_all.shape == (2, 3, 8, 4)
    torch.testing.assert_close(k_all, torch.cat([k for k, _ in chunks], dim=2) + 1, atol=0, rtol=0)
    torch.testing.assert_close(v_all, torch.cat([v for _, v in chunks], dim=2) - 1, atol=0, rtol=0)
    cache.reset()
    assert cache.length == 0


def test_append_rejects_overflow_bad_shapes_and_out_of_order_layers():
    cache = KVCache(n_layer=2, batch_size=1, n_head=2, head_dim=4, capacity=5)
    with pytest.raises(ValueError, match="cannot take 6 more"):
        cache.append(0, torch.zeros(1, 2, 6, 4), torch.zeros(1, 2, 6, 4))
    with pytest.raises(ValueError, match=r"\(1, 2, 3, 8\)"):
        cache.append(0, torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 3, 8))
    with pytest.raises(ValueError, match="layer"):
        cache.append(2, torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
    cache.append(0, torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
    with pytest.raises(ValueError, match="in order"):
        cache.append(0, torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))  # layer 0 twice


@pytest.mark.numerics
def test_keys_are_stored_after_rope():
    model = spread_model()
    idx = random_ids(1, 6)
    cache = model.new_cache()
    model(idx, cache=cache)
    block = model.blocks[0]
    C, H = model.config.d_model, model.config.n_head
    with torch.no_grad():
        _, k, v = block.attn.qkv(block.norm_attn(model.token_embedding(idx))).split(C, dim=2)
    k = k.view(1, 6, H, C // H).transpose(1, 2)  # (B, H, T, D)
    v = v.view(1, 6, H, C // H).transpose(1, 2)  # (B, H, T, D)
    assert_agree(cache.k[0, :, :, :6], apply_rope(k, torch.arange(6)), model)
    assert_agree(cache.v[0, :, :, :6], v, model)


# ---- cached forward passes == full forward passes ----------------------------------------------


@pytest.mark.numerics
def test_cached_logits_equal_full_logits():
    model = spread_model()
    L = model.config.context_length
    idx = random_ids(2, L, seed=1)
    with torch.no_grad():
        full = model(idx).logits  # (B, L, V)
        cache = model.new_cache(batch_size=2)
        pieces = [model(idx[:, :5], cache=cache).logits]  # prefill 5 tokens at once
        pieces += [model(idx[:, t : t + 1], cache=cache).logits for t in range(5, L)]  # then one at a time
    assert_agree(torch.cat(pieces, dim=1), full, model)
    assert cache.length == L
    with pytest.raises(ValueError, match="context_length"):
        model(idx[:, :1], cache=cache)  # a full cache takes no more


def test_a_cache_of_selected_rows_continues_as_those_rows_of_the_whole_batch():
    model = spread_model()
    idx = random_ids(3, 12, seed=2)  # (3, 12): a prefill of 10 tokens, then two steps
    with torch.no_grad():
        full = model(idx).logits  # (3, 12, V)
        cache = model.new_cache(batch_size=3)
        model(idx[:, :10], cache=cache)
        kept = cache.select(torch.tensor([0, 2]))  # row 1 finished
        assert kept.length == 10 and kept.k.shape[1] == 2
        steps = [model(idx[[0, 2], t : t + 1], cache=kept).logits for t in (10, 11)]  # (2, 1, V) each
    assert_agree(torch.cat(steps, dim=1), full[[0, 2], 10:], model)
    assert cache.length == 10  # the original is untouched


@pytest.mark.numerics
def test_mask_with_a_cache_is_bottom_right_aligned():
    model = spread_model()
    idx = random_ids(1, 7, seed=2)
    cache = model.new_cache()
    with torch.no_grad():
        model(idx[:, :4], cache=cache)
        out = model(idx[:, 4:], cache=cache, return_weights=True)  # T = 3 new, S = 7
        full = model(idx, return_weights=True)
    for w, w_full in zip(out.weights, full.weights):
        assert w.shape == (1, model.config.n_head, 3, 7)
        for t in range(3):  # query t is the token at absolute position 4 + t
            assert torch.all(w[..., t, 4 + t + 1 :] == 0)
            assert torch.all(w[..., t, : 4 + t + 1] > 0)
        assert_agree(w, w_full[..., 4:, :], model)


def test_the_forward_pass_writes_the_cache_only_through_append():
    """Every write to the cache's buffers is KVCache's own: a forward pass calls append once per layer."""
    model = spread_model()
    calls = []
    real = KVCache.append

    def counted(self, layer, k_new, v_new):
        calls.append((layer, k_new.shape[2]))
        return real(self, layer, k_new, v_new)

    cache = model.new_cache()
    with torch.no_grad(), pytest.MonkeyPatch.context() as m:
        m.setattr(KVCache, "append", counted)
        model(random_ids(1, 5), cache)
        model(random_ids(1, 1, seed=1), cache)
    n = model.config.n_layer
    assert calls == [(layer, 5) for layer in range(n)] + [(layer, 1) for layer in range(n)]
    assert cache.length == 6


@pytest.mark.numerics
@pytest.mark.parametrize("bug", ["position", "stale"])
def test_a_broken_cache_fails_parity_by_orders_of_magnitude(bug, monkeypatch):
    """The deliberately broken variants: a cache that returns keys one position off, or forgets the newest
    key. Rounding moves float64 logits by ~1e-15; these bugs move them by whole units, far above the allowance."""
    real_append = KVCache.append

    def broken(self, layer, k_new, v_new):
        k, v = real_append(self, layer, k_new, v_new)  # (B, H, S, D) each
        if bug == "position" and k.shape[2] > 1:
            k = torch.roll(k, shifts=1, dims=2)  # every key read at its neighbour's position
        if bug == "stale" and k.shape[2] > 1:
            k, v = torch.cat([k[:, :, :-1], k[:, :, -2:-1]], 2), torch.cat([v[:, :, :-1], v[:, :, -2:-1]], 2)
        return k, v

    model = spread_model()
    L = model.config.context_length
    idx = random_ids(1, L, seed=1)
    with torch.no_grad():
        full = model(idx).logits  # (B, L, V)
        monkeypatch.setattr(KVCache, "append", broken)
        cache = model.new_cache()
        pieces = [model(idx[:, :5], cache=cache).logits]
        pieces += [model(idx[:, t : t + 1], cache=cache).logits for t in range(5, L)]
    a = agreement(torch.cat(pieces, dim=1), full, terms=model_terms(model.config))
    assert not a.passed and a.ratio > 1e6, a.describe()
