"""core.model.kv_cache: storage (append, the one write), rotated keys, bottom-right mask,
cached == uncached, the sliding window, and parity measured once
(core.model.sampling.cache_parity)."""

import copy

import pytest
import torch

from core.agreement import agreement, model_terms
from core.model.gpt import GPT, preset
from core.model.kv_cache import KVCache, default_keep, next_window_start
from core.model.rope import apply_rope
from core.model.sampling import SampleConfig, cache_parity, generate

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


# ---- the sliding-window policy -----------------------------------------------------------------


def test_window_policy_by_hand():
    assert default_keep(32) == 16 and default_keep(1) == 1
    assert next_window_start(n_tokens=32, start=0, context_length=32, keep=16) == 0  # exactly full: fits
    assert next_window_start(n_tokens=33, start=0, context_length=32, keep=16) == 17  # slides
    assert next_window_start(n_tokens=49, start=17, context_length=32, keep=16) == 17
    assert next_window_start(n_tokens=50, start=17, context_length=32, keep=16) == 34
    assert next_window_start(n_tokens=33, start=0, context_length=32, keep=31) == 2
    with pytest.raises(ValueError, match="keep"):
        next_window_start(n_tokens=3, start=0, context_length=32, keep=33)


def windowed_greedy_reference(model, prompt, n_new, keep):
    """Uncached greedy decoding written out: the model sees ids[start:]; when that would exceed the
    context, the window restarts `keep` tokens before the end (positions restart at 0). Like generate, it
    never picks <pad>, <bos> or <unk> (ids 0, 1, 3): they are not text."""
    L = model.config.context_length
    ids, start, tokens, logits_per_step, slid = list(prompt), max(0, len(prompt) - L), [], [], []
    for _ in range(n_new):
        slid.append(len(ids) - start > L)
        if slid[-1]:
            start = len(ids) - keep
        with torch.no_grad():
            logits = model(torch.tensor([ids[start:]])).logits[0, -1]
        tokens.append(max((i for i in range(V) if i not in (0, 1, 3)), key=lambda i: float(logits[i])))
        logits_per_step.append(logits)
        ids.append(tokens[-1])
    return tokens, logits_per_step, slid


@pytest.mark.numerics
@pytest.mark.parametrize("prompt_len, keep", [(10, None), (40, 1), (32, 31)])
def test_cached_generation_matches_uncached_across_the_context_boundary(prompt_len, keep):
    model = spread_model(seed=1)
    L = model.config.context_length
    prompt = random_ids(1, prompt_len, seed=3)[0].tolist()
    greedy = SampleConfig(temperature=0.0, max_new_tokens=50)
    cached = list(generate(model, prompt, greedy, use_cache=True, keep=keep))
    tokens, logits, slid = windowed_greedy_reference(model, prompt, 50, keep or L // 2)

    assert [s.token for s in cached] == tokens
    assert len(set(tokens)) > 2  # the comparison is not between two constant sequences
    assert any(slid)  # the 50 tokens really cross the context boundary
    assert [s.reencoded for s in cached] == slid
    assert all(s.context <= L for s in cached)
    for step, reference in zip(cached, logits):
        assert_agree(step.logits, reference, model)


@pytest.mark.numerics
def test_uncached_generation_follows_the_same_windows():
    model = spread_model(seed=1)
    prompt = random_ids(1, 10, seed=3)[0].tolist()
    greedy = SampleConfig(temperature=0.0, max_new_tokens=50)
    cached = list(generate(model, prompt, greedy, use_cache=True))
    uncached = list(generate(model, prompt, greedy, use_cache=False))
    assert [s.token for s in cached] == [s.token for s in uncached]
    assert [s.reencoded for s in cached] == [s.reencoded for s in uncached]
    assert sum(s.reencoded for s in cached) >= 2  # 60 tokens through a 32-token context, keep 16
    for step_cached, step_uncached in zip(cached, uncached):
        assert_agree(step_cached.logits, step_uncached.logits, model)


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


# ---- parity, measured once (core.model.sampling.cache_parity) -----------------------------------


@pytest.mark.numerics
def test_cache_parity_matches_the_written_out_uncached_reference_across_the_boundary():
    """cache_parity's uncached logits and tokens are the windowed reference written out above (float64), its cached
    logits agree with them by core.agreement's rule, and the model as given walks the same windows beside it."""
    model = spread_model().float()  # as served; cache_parity decides on its own float64 copy
    prompt = random_ids(1, 10, seed=4)[0].tolist()
    steps = cache_parity(model, prompt, 60, SampleConfig(temperature=0.0))
    reference = copy.deepcopy(model).double()
    tokens, logits, slid = windowed_greedy_reference(reference, prompt, 60, default_keep(32))
    assert [s.token for s in steps] == [s.uncached_token for s in steps] == tokens
    assert [s.reencoded for s in steps] == slid and sum(slid) >= 2  # 70 tokens through a 32-token context
    assert all(s.window_agrees for s in steps)
    for s, ref in zip(steps, logits):
        assert s.cached.dtype == s.uncached.dtype == torch.float64 and s.cached_as_given.dtype == torch.float32
        assert_agree(s.uncached, ref, model)
        assert_agree(s.cached, s.uncached, model)
        assert float((s.cached_as_given.double() - s.uncached).abs().max()) < 1e-3  # float32: close, not decided


@pytest.mark.numerics
def test_cache_parity_sees_a_broken_fast_path_write(monkeypatch):
    """A cache write that returns every key one position off: the measurement moves by whole units."""
    real = KVCache.append

    def broken(self, layer, k_new, v_new):
        k, v = real(self, layer, k_new, v_new)  # (B, H, S, D) each
        return (torch.roll(k, shifts=1, dims=2) if k.shape[2] > 1 else k), v

    model = spread_model().float()
    monkeypatch.setattr(KVCache, "append", broken)
    steps = cache_parity(model, random_ids(1, 6, seed=2)[0].tolist(), 5, SampleConfig(temperature=0.0))
    worst = max(float((s.cached - s.uncached).abs().max()) for s in steps)
    assert worst > 1e-3
    assert not agreement(
        torch.stack([s.cached for s in steps]),
        torch.stack([s.uncached for s in steps]),
        terms=model_terms(model.config),
    ).passed


def test_cache_parity_refuses_bad_arguments_before_any_work():
    model = spread_model()
    for kwargs, words in (
        (dict(n_steps=-1, sample=SampleConfig()), "n_steps"),
        (dict(n_steps=True, sample=SampleConfig()), "n_steps"),
        (dict(n_steps=3, sample="greedy"), "SampleConfig"),
        (dict(n_steps=10**9, sample=SampleConfig()), "max_new_tokens"),
        (dict(n_steps=3, sample=SampleConfig(temperature=1.0), seed=None), "seed"),
        (dict(n_steps=3, sample=SampleConfig(), seed=-1), "seed"),
    ):
        with pytest.raises(ValueError, match=words):
            cache_parity(model, [4], **kwargs)
