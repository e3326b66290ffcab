"""core.model.engine: generation (streamed steps, reproducible with a seed, the window past the context, the
special tokens never drawn), the next-token window and eval_mode, and the KV cache's parity measured once
(cache_parity)."""

import copy

import pytest
import torch
from bundles import tiny_model
from hypothesis import given
from hypothesis import strategies as st

from core.agreement import agreement, model_terms
from core.model.architecture import architecture
from core.model.batches import evaluate_loss
from core.model.engine import (
    GenerationStep,
    cache_parity,
    default_keep,
    eval_mode,
    generate,
    next_token_logits,
    next_window_start,
    window,
)
from core.model.gpt import GPT, ModelOutput, preset
from core.model.kv_cache import KVCache
from core.model.sampling import NEVER_SAMPLED, SEED_LIMIT, SampleConfig, check_seed, next_token_distribution
from core.model.tokenizer import EOS_ID

V = 20


def gen(seed):
    return torch.Generator().manual_seed(seed)


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return GPT(preset("tiny", V))


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


# ---- the next-token window and eval_mode ---------------------------------------------------------------


def test_window_is_the_last_context_length_ids_or_eos():
    model, _ = tiny_model()
    L = model.config.context_length  # 32
    ids = [4 + i % 5 for i in range(50)]
    assert window(model, ids) == ids[50 - L :] and len(window(model, ids)) == 32
    assert window(model, ids[:7]) == ids[:7]
    assert window(model, []) == [EOS_ID]
    with pytest.raises(ValueError, match="ids must lie"):
        window(model, [model.config.vocab_size])


@pytest.mark.numerics
def test_next_token_logits_read_the_window_only():
    model, _ = tiny_model()
    ids = [4 + i % 5 for i in range(50)]
    with torch.no_grad():
        reference = model(torch.tensor([ids[-32:]])).logits[0, -1]  # (V,) the last 32 by hand, no cache
    torch.testing.assert_close(next_token_logits(model, ids), reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("no_grad", [True, False])
def test_eval_mode_restores_the_training_flag_even_after_an_error(no_grad):
    model, _ = tiny_model()
    model.train()
    with pytest.raises(RuntimeError, match="inside"):
        with eval_mode(model, no_grad=no_grad):
            assert not model.training and torch.is_grad_enabled() is not no_grad
            raise RuntimeError("inside")
    assert model.training and torch.is_grad_enabled()
    model.eval()
    with eval_mode(model):
        pass
    assert not model.training  # restored to eval, not forced to train


def test_every_user_of_eval_mode_leaves_the_model_as_it_found_it():
    model, _ = tiny_model()
    model.train()
    architecture(model, 4)
    assert model.training and torch.is_grad_enabled()
    stream = torch.arange(4, 9).repeat(20)  # (100,)
    evaluate_loss(model, stream, batch_size=2, iters=2, seed=0)
    assert model.training and torch.is_grad_enabled()
    steps = generate(model, [4], SampleConfig(temperature=0.0, max_new_tokens=3))
    for _ in steps:
        assert not model.training and torch.is_grad_enabled()  # eval for the whole generation, autograd kept
    assert model.training


# ---- generate ----------------------------------------------------------------------------------


def test_generate_is_reproducible_with_a_seed():
    model = tiny_gpt()
    config = SampleConfig(temperature=1.0, top_k=10, max_new_tokens=20)
    run = lambda seed: [s.token for s in generate(model, [4, 5, 6], config, seed=seed)]  # noqa: E731
    assert run(3) == run(3)
    assert run(3) != run(4)
    by_generator = [s.token for s in generate(model, [4, 5, 6], config, generator=gen(3))]
    assert by_generator == run(3)


def test_generate_streams_steps_with_their_distribution():
    model = tiny_gpt()
    steps = list(generate(model, [4, 5], SampleConfig(temperature=0.9, top_p=0.9, max_new_tokens=6), seed=0))
    assert len(steps) == 6 and all(isinstance(s, GenerationStep) for s in steps)
    assert [s.position for s in steps] == [2, 3, 4, 5, 6, 7]
    for s in steps:
        assert s.probs.shape == s.logits.shape == (V,)
        assert s.probs[s.token] > 0
        torch.testing.assert_close(s.probs, next_token_distribution(s.logits, 0.9, None, 0.9, suppress=NEVER_SAMPLED))
        assert s.probs[list(NEVER_SAMPLED)].sum() == 0
        assert s.seconds > 0
    assert list(generate(model, [4], SampleConfig(max_new_tokens=0), seed=0)) == []


@pytest.mark.numerics
def test_empty_prompt_starts_from_eos_and_long_prompts_keep_the_last_context():
    model = tiny_gpt().eval()
    greedy = SampleConfig(temperature=0.0, max_new_tokens=1)
    with torch.no_grad():
        from_eos = model(torch.tensor([[EOS_ID]])).logits[0, -1]  # training puts <eos> before every document
    torch.testing.assert_close(next(iter(generate(model, [], greedy))).logits, from_eos, atol=1e-6, rtol=0)

    L = model.config.context_length
    prompt = torch.randint(0, V, (L + 9,), generator=gen(1)).tolist()
    with torch.no_grad():
        last_window = model(torch.tensor([prompt[-L:]])).logits[0, -1]
    for use_cache in (True, False):
        step = next(iter(generate(model, prompt, greedy, use_cache=use_cache)))
        torch.testing.assert_close(step.logits, last_window, atol=1e-5, rtol=0)
        assert step.context == L


def test_generate_restores_training_mode_and_never_leaves_gradients_disabled():
    model = tiny_gpt().train()
    for _ in generate(model, [4], SampleConfig(max_new_tokens=3), seed=0):
        assert torch.is_grad_enabled()  # the caller's code between steps keeps autograd
        assert not model.training
    assert model.training


def test_generate_rejects_bad_arguments():
    model = tiny_gpt()
    with pytest.raises(ValueError, match="seed"):
        generate(model, [4], SampleConfig(temperature=1.0))
    with pytest.raises(ValueError, match="either"):
        generate(model, [4], SampleConfig(), seed=1, generator=gen(1))
    with pytest.raises(ValueError, match="keep"):
        generate(model, [4], SampleConfig(temperature=0.0), keep=model.config.context_length + 1)
    with pytest.raises(ValueError, match="prompt ids"):
        generate(model, [V], SampleConfig(temperature=0.0))


@pytest.mark.parametrize("seed", [-1, SEED_LIMIT, 2**64, 2**64 + 1, True, 1.5, "3"])
def test_seeds_outside_the_limit_are_refused_before_generation(seed):
    model = tiny_gpt()
    with pytest.raises(ValueError, match="seed must be an integer from 0 to 2"):
        generate(model, [4], SampleConfig(temperature=1.0), seed=seed)  # raised by the call, not the first step
    with pytest.raises(ValueError, match="seed"):
        check_seed(seed)


def test_the_largest_seed_works():
    model = tiny_gpt()
    tokens = [s.token for s in generate(model, [4], SampleConfig(max_new_tokens=3), seed=SEED_LIMIT - 1)]
    assert len(tokens) == 3 and check_seed(SEED_LIMIT - 1) == SEED_LIMIT - 1


# ---- special tokens ------------------------------------------------------------------------------


class SpecialLovingGPT(GPT):
    """A GPT that pushes <pad>, <bos> and <unk> far up (and <eos> a little): without suppression they win."""

    def forward(self, idx, cache=None, *, return_weights=False):
        out = super().forward(idx, cache, return_weights=return_weights)
        logits = out.logits.clone()
        logits[..., list(NEVER_SAMPLED)] += 6.0
        logits[..., EOS_ID] += 2.0
        return ModelOutput(logits=logits, weights=out.weights)


@given(
    prompt=st.lists(st.integers(0, V - 1), max_size=40),
    seed=st.integers(0, SEED_LIMIT - 1),
    temperature=st.sampled_from([0.0, 0.7, 1.5]),
    use_cache=st.booleans(),
)
def test_generation_never_yields_pad_bos_or_unk(prompt, seed, temperature, use_cache):
    torch.manual_seed(0)
    model = SpecialLovingGPT(preset("tiny", V)).eval()
    sample = SampleConfig(temperature=temperature, max_new_tokens=12)
    tokens = [s.token for s in generate(model, prompt, sample, seed=seed, use_cache=use_cache)]
    assert len(tokens) == 12 and not set(tokens) & set(NEVER_SAMPLED)


@pytest.mark.numerics
def test_without_suppression_the_special_loving_model_does_emit_them():
    """The control for the property above: the stub really prefers the special tokens."""
    torch.manual_seed(0)
    model = SpecialLovingGPT(preset("tiny", V)).eval()
    tokens = [s.token for s in generate(model, [4, 5], SampleConfig(max_new_tokens=20), seed=0, suppress=())]
    assert set(tokens) & set(NEVER_SAMPLED)


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


# ---- parity, measured once (cache_parity) -----------------------------------


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
