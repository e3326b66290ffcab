"""core.model.sampling: the sampling distribution, its filters, reproducibility and its bounds (generation's tests are
test_engine.py's)."""

import math

import pytest
import torch

from core.model.engine import generate
from core.model.gpt import GPT, preset
from core.model.sampling import (
    MAX_NEW_TOKENS,
    MAX_TOP_K,
    MIN_TEMPERATURE,
    NEVER_SAMPLED,
    SEED_LIMIT,
    SampleConfig,
    next_token_distribution,
    sample_next_token,
)
from core.model.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID

V = 20


def random_logits(*shape, seed=0, scale=2.0):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def gen(seed):
    return torch.Generator().manual_seed(seed)


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return GPT(preset("tiny", V))


# ---- configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(temperature=-0.1),
        dict(temperature=-1e-40),
        dict(temperature=float("nan")),
        dict(temperature=float("inf")),
        dict(top_k=0),
        dict(top_k=2.5),
        dict(top_p=0.0),
        dict(top_p=1.5),
        dict(top_p=-0.2),
        dict(top_k=MAX_TOP_K + 1),
        dict(top_p=float("nan")),
        dict(max_new_tokens=-1),
        dict(max_new_tokens=MAX_NEW_TOKENS + 1),
        dict(max_new_tokens=10**12),
        dict(max_new_tokens=1e12),
    ],
)
def test_invalid_sample_config_raises(kwargs):
    with pytest.raises(ValueError):
        SampleConfig(**kwargs)
    filters = {k: v for k, v in kwargs.items() if k != "max_new_tokens"}
    if filters:
        with pytest.raises(ValueError):
            next_token_distribution(random_logits(V), **{"temperature": 1.0, **filters})


def test_invalid_logits_raise():
    with pytest.raises(ValueError, match=r"\(2, 3, 4\)"):
        next_token_distribution(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="NaN"):
        next_token_distribution(torch.tensor([0.0, float("nan")]))
    with pytest.raises(ValueError, match="Generator"):
        sample_next_token(random_logits(V), None, temperature=1.0)


# ---- the distribution --------------------------------------------------------------------------


@pytest.mark.numerics
def test_temperature_lab_values_from_the_lesson():
    probs = next_token_distribution(torch.tensor([1.2, 0.3, -0.4, 1.8]), temperature=1.0)
    torch.testing.assert_close(probs, torch.tensor([0.2915, 0.1185, 0.0589, 0.5311]), atol=5e-5, rtol=0)


@pytest.mark.numerics
@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_temperature_divides_the_logits(temperature):
    logits = [1.2, 0.3, -0.4, 1.8]
    exps = [math.exp(x / temperature) for x in logits]
    expected = torch.tensor([e / sum(exps) for e in exps])
    probs = next_token_distribution(torch.tensor(logits), temperature=temperature)
    torch.testing.assert_close(probs, expected, atol=1e-6, rtol=0)


def test_temperature_zero_is_argmax():
    logits = random_logits(8, V)
    probs = next_token_distribution(logits, temperature=0.0)
    assert torch.equal(probs, torch.nn.functional.one_hot(logits.argmax(-1), V).float())
    assert torch.equal(sample_next_token(logits, None, temperature=0.0), logits.argmax(-1))
    assert sample_next_token(logits[0], None, temperature=0.0).item() == logits[0].argmax().item()


def test_top_k_one_is_greedy_even_when_sampling():
    logits = random_logits(500, V, seed=1)
    tokens = sample_next_token(logits, gen(0), temperature=1.5, top_k=1)
    assert torch.equal(tokens, logits.argmax(-1))


@pytest.mark.numerics
@pytest.mark.parametrize("k", [1, 2, 5, V - 1, V])
def test_top_k_keeps_exactly_the_k_largest(k):
    logits = random_logits(4, V, seed=2)
    probs = next_token_distribution(logits, temperature=0.8, top_k=k)
    for row_logits, row in zip(logits, probs):
        ranked = sorted(range(V), key=lambda i: -row_logits[i].item())
        kept = set(ranked[:k])
        assert {i for i in range(V) if row[i] > 0} == kept
        expected = torch.softmax(row_logits[ranked[:k]] / 0.8, dim=0)
        torch.testing.assert_close(row[ranked[:k]], expected, atol=1e-6, rtol=0)


@pytest.mark.numerics
def test_top_k_above_the_vocabulary_is_clamped():
    logits = random_logits(3, V, seed=3)
    torch.testing.assert_close(next_token_distribution(logits, top_k=10 * V), torch.softmax(logits, -1))
    SampleConfig(top_k=10_000)  # not an error


@pytest.mark.numerics
@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9, 0.99])
def test_top_p_keeps_the_smallest_prefix_reaching_p(p):
    logits = random_logits(6, V, seed=4, scale=1.5)
    probs = next_token_distribution(logits, temperature=1.0, top_p=p)
    full = torch.softmax(logits.double(), -1)
    for row_full, row in zip(full.tolist(), probs):
        ranked = sorted(range(V), key=lambda i: -row_full[i])
        prefix, mass = [], 0.0
        for i in ranked:  # walk down the ranking until the kept mass reaches p
            prefix.append(i)
            mass += row_full[i]
            if mass >= p:
                break
        assert {i for i in range(V) if row[i] > 0} == set(prefix)
        expected = torch.tensor([row_full[i] / mass for i in prefix], dtype=torch.float32)
        torch.testing.assert_close(row[prefix], expected, atol=1e-6, rtol=0)


@pytest.mark.numerics
def test_top_p_applies_after_top_k():
    logits = torch.log(torch.tensor([0.4, 0.3, 0.2, 0.1]))
    # top-k 3 renormalises to 4/9, 3/9, 2/9; top-p 0.7 then needs 4/9 + 3/9 = 7/9 >= 0.7
    probs = next_token_distribution(logits, top_k=3, top_p=0.7)
    torch.testing.assert_close(probs, torch.tensor([4 / 7, 3 / 7, 0.0, 0.0]), atol=1e-6, rtol=0)


@pytest.mark.numerics
@pytest.mark.parametrize(
    "temperature, top_k, top_p", [(1.0, None, None), (0.3, None, None), (2.0, 7, None), (1.0, None, 0.8), (0.7, 5, 0.6)]
)
def test_probabilities_sum_to_one(temperature, top_k, top_p):
    probs = next_token_distribution(random_logits(5, V, seed=5, scale=4.0), temperature, top_k, top_p)
    torch.testing.assert_close(probs.sum(-1), torch.ones(5), atol=1e-6, rtol=0)
    assert torch.all(probs >= 0)


@pytest.mark.numerics
def test_samples_follow_the_reported_distribution():
    logits = torch.tensor([1.2, 0.3, -0.4, 1.8, -3.0])
    probs = next_token_distribution(logits, temperature=1.3, top_k=4)
    n = 20_000
    tokens = sample_next_token(logits.expand(n, -1), gen(11), temperature=1.3, top_k=4)
    frequencies = torch.bincount(tokens, minlength=5).float() / n
    torch.testing.assert_close(frequencies, probs, atol=0.015, rtol=0)  # ~4 standard errors
    assert frequencies[4] == 0  # the token top-k removed is never drawn


def test_same_generator_seed_same_tokens():
    logits = random_logits(64, V, seed=6)
    a = sample_next_token(logits, gen(7), temperature=1.0, top_p=0.9)
    b = sample_next_token(logits, gen(7), temperature=1.0, top_p=0.9)
    c = sample_next_token(logits, gen(8), temperature=1.0, top_p=0.9)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


# ---- hostile numbers -----------------------------------------------------------------------------


def test_the_bounds_are_what_the_docs_say():
    assert (MIN_TEMPERATURE, MAX_NEW_TOKENS, SEED_LIMIT) == (1e-3, 4096, 2**63)
    assert NEVER_SAMPLED == (PAD_ID, BOS_ID, UNK_ID) and EOS_ID not in NEVER_SAMPLED
    SampleConfig(max_new_tokens=MAX_NEW_TOKENS, top_k=MAX_TOP_K)  # the bounds themselves are allowed


@pytest.mark.numerics
def test_why_a_tiny_temperature_must_be_greedy():
    """The derivation behind MIN_TEMPERATURE, checked with torch itself: at 1e-40 a plain float32 softmax
    of logits of size ~20 is NaN (what crashed multinomial); at 1e-3 a token 0.2 below the maximum already
    has probability exactly 0, so greedy below it changes nothing but near-ties."""
    logits = torch.tensor([20.0, 19.8, -20.0, 3.0])
    assert torch.isnan(torch.softmax(logits / 1e-40, dim=-1)).any()
    assert torch.softmax(logits / MIN_TEMPERATURE, dim=-1).tolist() == [1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("temperature", [1e-40, 5e-324, 1e-10, MIN_TEMPERATURE / 2])
def test_a_temperature_below_the_minimum_is_greedy(temperature):
    logits = random_logits(8, V, seed=9, scale=20.0)
    one_hot = torch.nn.functional.one_hot(logits.argmax(-1), V).float()
    probs = next_token_distribution(logits, temperature=temperature)
    assert torch.equal(probs, one_hot) and not torch.isnan(probs).any()
    # no generator needed: it is greedy
    assert torch.equal(sample_next_token(logits, None, temperature=temperature), logits.argmax(-1))
    config = SampleConfig(temperature=temperature)
    assert config.temperature == 0.0 and config.greedy
    model = tiny_model()
    tiny = [s.token for s in generate(model, [4, 5], SampleConfig(temperature=temperature, max_new_tokens=8))]
    assert tiny == [s.token for s in generate(model, [4, 5], SampleConfig(temperature=0.0, max_new_tokens=8))]


@pytest.mark.numerics
def test_the_minimum_temperature_itself_still_samples():
    config = SampleConfig(temperature=MIN_TEMPERATURE)
    assert config.temperature == MIN_TEMPERATURE and not config.greedy
    with pytest.raises(ValueError, match="Generator"):
        sample_next_token(random_logits(V), None, temperature=MIN_TEMPERATURE)
    # two logits 1e-4 apart are a near-tie even at 1e-3: both keep probability (ratio e^-0.1)
    probs = next_token_distribution(torch.tensor([5.0, 5.0 - 1e-4, 0.0]), temperature=MIN_TEMPERATURE)
    assert probs[1] / probs[0] == pytest.approx(math.exp(-0.1), rel=1e-3) and probs[2] == 0


def test_a_manifest_asking_for_endless_generation_is_refused_on_load(tmp_path):
    """core.model.bundle builds SampleConfig from the manifest's generation policy, so the bound refuses it there."""
    import json

    from core.model.bundle import load_bundle, manifest_version, save_bundle, write_manifest
    from core.model.bundle_checks import MANIFEST, BundleError
    from core.model.corpus import corpus_from_text
    from core.model.tokenizer import CharTokenizer

    text = "def f(x):\n    return x\n" * 4
    tok = CharTokenizer.from_text(text)
    torch.manual_seed(0)
    path = save_bundle(
        tmp_path / "b",
        GPT(preset("tiny", tok.vocab_size)).eval(),
        tok,
        metrics={},
        command=["test"],
        corpus=corpus_from_text("t.py", text),
    )

    def with_generation(**policy):
        m = json.loads((path / MANIFEST).read_text())
        m["generation"].update(policy)
        m["version"] = manifest_version(m)  # resealed, as a careless tool would: only the bound can refuse it
        write_manifest(path, m)

    with_generation(max_new_tokens=10**12)
    with pytest.raises(BundleError, match=f"max_new_tokens must be an integer from 0 to {MAX_NEW_TOKENS}"):
        load_bundle(path)
    with_generation(max_new_tokens=16, top_k=MAX_TOP_K + 1)
    with pytest.raises(BundleError, match="top_k"):
        load_bundle(path)
    with_generation(top_k=None, temperature=1e-40)  # not an error: the policy is greedy
    assert load_bundle(path).sample_config.temperature == 0.0


# ---- special tokens ------------------------------------------------------------------------------


@pytest.mark.numerics
def test_suppressed_ids_get_zero_and_the_rest_is_renormalised():
    logits = torch.tensor([3.0, 2.5, 1.0, 2.9, 0.5, -1.0])
    probs = next_token_distribution(logits, temperature=0.7, suppress=(0, 1, 3))
    kept = [1.0, 0.5, -1.0]  # ids 2, 4, 5
    exps = [math.exp(x / 0.7) for x in kept]
    expected = [0.0, 0.0, exps[0] / sum(exps), 0.0, exps[1] / sum(exps), exps[2] / sum(exps)]
    torch.testing.assert_close(probs, torch.tensor(expected), atol=1e-6, rtol=0)
    assert next_token_distribution(logits, temperature=0.0, suppress=(0, 1, 3)).argmax() == 2  # greedy skips them
    top2 = next_token_distribution(logits, temperature=1.0, top_k=2, suppress=(0, 1, 3))
    assert {i for i in range(6) if top2[i] > 0} == {2, 4}  # top-k keeps k of the allowed tokens
    with pytest.raises(ValueError, match="removes every token"):
        next_token_distribution(logits, suppress=range(6))
    with pytest.raises(ValueError, match="suppress"):
        next_token_distribution(logits, suppress=(6,))
