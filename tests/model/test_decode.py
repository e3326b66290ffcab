"""core.model.decode, generation's fast path (GPT.forward with a cache and fast_attention=True), held to parity
with the teaching forward pass: logits, the cache it fills, and the tokens generated; every comparison in
float64 by core.agreement's rule."""

import dataclasses

import pytest
import torch

from core.agreement import agreement, model_terms
from core.model.gpt import GPT, preset
from core.model.sampling import SampleConfig, generate

pytestmark = pytest.mark.numerics

V = 20


def spread_model(seed=0, **changes):
    """The tiny preset with larger random weights (greedy decoding then varies its tokens), float64, eval."""
    torch.manual_seed(seed)
    model = GPT(dataclasses.replace(preset("tiny", V), **changes))
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.3)  # LayerNorm gains and biases too: a wrong norm argument shows
    return model.double().eval()


def random_ids(B, T, seed=1):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def decode(model, idx, cache):
    """The cached fast path as its callers reach it: GPT.forward with a cache and fast_attention=True."""
    return model(idx, cache=cache, fast_attention=True).logits  # (B, T, V)


def assert_agree(fast, teaching, model):
    a = agreement(fast, teaching, terms=model_terms(model.config))
    assert a.passed and a.dtype == "float64", a.describe()


def fast_and_teaching(model, idx, prefills):
    """Logits of idx through decode (chunks of the given lengths, then one token at a time) and the same chunks
    through GPT.forward with its own cache; both caches are returned."""
    L = idx.shape[1]
    fast_cache, teaching_cache = model.new_cache(idx.shape[0]), model.new_cache(idx.shape[0])
    bounds = [0]
    for n in prefills:
        bounds.append(bounds[-1] + n)
    bounds += range(bounds[-1] + 1, L + 1)
    fast, teaching = [], []
    with torch.no_grad():
        for a, b in zip(bounds, bounds[1:]):
            fast.append(decode(model, idx[:, a:b], fast_cache))
            teaching.append(model(idx[:, a:b], cache=teaching_cache).logits)
    return torch.cat(fast, 1), torch.cat(teaching, 1), fast_cache, teaching_cache


@pytest.mark.parametrize("prefills", [[1], [5], [5, 7]], ids=["token by token", "prefill", "prefill after a prefill"])
def test_decode_logits_equal_the_teaching_forward_pass(prefills):
    """[5, 7]: a chunk of 7 after 5 cached positions takes decode's bottom-right mask branch."""
    model = spread_model()
    idx = random_ids(3, model.config.context_length)
    fast, teaching, _, _ = fast_and_teaching(model, idx, prefills)
    assert_agree(fast, teaching, model)
    with torch.no_grad():
        assert_agree(fast, model(idx).logits, model)  # and the uncached pass over the whole sequence


def test_decode_fills_the_cache_with_the_rotated_keys_and_values_of_the_teaching_path():
    model = spread_model()
    idx = random_ids(2, 20)
    _, _, fast_cache, teaching_cache = fast_and_teaching(model, idx, [6])
    assert fast_cache.length == teaching_cache.length == 20
    assert_agree(fast_cache.k[:, :, :, :20], teaching_cache.k[:, :, :, :20], model)
    assert_agree(fast_cache.v[:, :, :, :20], teaching_cache.v[:, :, :, :20], model)


def test_decode_of_the_model_without_a_causal_mask_matches_its_forward_pass():
    model = spread_model(causal=False)  # the leakage lesson's model: a prefill sees every key
    idx = random_ids(1, 12)
    cache = model.new_cache()
    with torch.no_grad():
        assert_agree(decode(model, idx, cache), model(idx).logits, model)


def test_decode_reads_the_weights_as_they_are_now():
    """Its per-model plan holds the Parameters, not copies: an in-place update or load_state_dict shows."""
    model = spread_model()
    idx = random_ids(1, 8)
    decode(model, idx, model.new_cache())
    other = spread_model(seed=5)
    model.load_state_dict(other.state_dict())
    with torch.no_grad():
        model.blocks[0].mlp.fc.weight.mul_(2.0)
        other.blocks[0].mlp.fc.weight.mul_(2.0)
        assert_agree(decode(model, idx, model.new_cache()), other(idx).logits, model)


def test_decode_follows_a_model_converted_after_its_first_call():
    """model.float() swaps every Parameter's data in place: decode must read the new float32 tensors."""
    model = spread_model()
    idx = random_ids(1, 8)
    decode(model, idx, model.new_cache())  # float64: builds the per-model plan
    model.float()
    fast = decode(model, idx, model.new_cache())
    assert fast.dtype == torch.float32
    with torch.no_grad():
        a = agreement(fast, model(idx).logits, terms=model_terms(model.config))  # float32's own allowance
    assert a.passed and a.dtype == "float32", a.describe()  # stale float64 weights would be off by whole units


def test_greedy_generation_with_decode_matches_the_teaching_recompute_across_window_slides():
    model = spread_model()
    greedy = SampleConfig(temperature=0.0, max_new_tokens=70)  # 70 tokens through a 32-token context
    cached = list(generate(model, [3, 1, 4], greedy, use_cache=True))
    uncached = list(generate(model, [3, 1, 4], greedy, use_cache=False))
    assert sum(s.reencoded for s in cached) >= 2
    assert [s.token for s in cached] == [s.token for s in uncached]
    assert_agree(torch.stack([s.logits for s in cached]), torch.stack([s.logits for s in uncached]), model)


def test_training_after_decode_still_has_gradients():
    """The RoPE tables decode first asks for inside inference_mode are shared with training: plain tensors."""
    model = GPT(dataclasses.replace(preset("tiny", V), rope_base=12345.0)).eval()  # a fresh table shape
    decode(model, random_ids(1, 4), model.new_cache())
    model.train()
    loss = model(random_ids(2, 8)).logits.square().mean()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_decode_refuses_bad_ids_a_full_cache_and_dropout_in_training_mode():
    model = spread_model()
    cache = model.new_cache()
    with pytest.raises(ValueError, match="token ids must lie"):
        decode(model, torch.tensor([[V]]), cache)
    with pytest.raises(ValueError, match="exceed context_length"):
        decode(model, random_ids(1, model.config.context_length + 1), cache)
    assert cache.length == 0  # a refused call claims no position
    dropping = GPT(dataclasses.replace(preset("tiny", V), dropout=0.1))  # training mode by default
    with pytest.raises(ValueError, match="model.eval"):
        decode(dropping, random_ids(1, 3), dropping.new_cache())
