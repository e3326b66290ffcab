"""core.autocomplete: candidates are the sampling distribution, cached == uncached (parity trace and
completions, across the context boundary), suggestions end at a word, prompts report what was cut or lost."""
import dataclasses
import math
from types import SimpleNamespace

import pytest
import torch

from core.autocomplete import (
    PARITY_ATOL,
    PARITY_RTOL,
    code_point,
    compare_latency,
    complete,
    cut_suggestion,
    is_word_char,
    next_token_candidates,
    parity_trace,
    prepare_prompt,
    suggest,
)
from core.bundle import save_bundle
from core.corpus import corpus_from_text
from core.kv_cache import KVCache
from core.model import GPT, ModelConfig, ModelOutput, preset
from core.sampling import SampleConfig, generate
from core.tokenizer import BOS_ID, EOS_ID, UNK_ID, CharTokenizer

TEXT = "def main(x):\n    return x + 1\n\nimport os\nclass Point:\n    pass\n"
TOK = CharTokenizer.from_text(TEXT)
V = TOK.vocab_size


def spread_model(seed=0, cls=GPT):
    """The tiny preset (context 32) with larger random weights, so its choices are not all alike."""
    torch.manual_seed(seed)
    model = cls(preset("tiny", V))
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.normal_(0.0, 0.3)
    return model.eval()


def softmax_by_hand(logits, temperature):
    """Independent reference: float64 softmax of logits / temperature with math.exp."""
    scaled = [x / temperature for x in logits.tolist()]
    top = max(scaled)
    exps = [math.exp(x - top) for x in scaled]
    total = math.fsum(exps)
    return [e / total for e in exps]


def last_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1]


# ---- candidates ----------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.7])
def test_candidates_are_softmax_of_the_last_logits_over_temperature(temperature):
    model = spread_model()
    ids = TOK.encode("def ma")
    candidates = next_token_candidates(model, ids, SampleConfig(temperature=temperature), k=None, tokenizer=TOK)
    assert sorted(c.id for c in candidates) == list(range(V))  # the full distribution
    assert math.fsum(c.prob for c in candidates) == pytest.approx(1.0, abs=1e-6)
    want = softmax_by_hand(last_logits(model, ids), temperature)
    for c in candidates:
        assert c.prob == pytest.approx(want[c.id], abs=1e-6)
        assert c.piece == TOK.display_piece(c.id)
    probs = [c.prob for c in candidates]
    assert probs == sorted(probs, reverse=True)  # most likely first
    top3 = next_token_candidates(model, ids, SampleConfig(temperature=temperature), k=3, tokenizer=TOK)
    assert top3 == candidates[:3]


def test_candidates_are_what_generation_draws_from():
    model = spread_model()
    ids = TOK.encode("class P")
    sample = SampleConfig(temperature=0.8, top_k=6, top_p=0.9, max_new_tokens=1)
    step = next(iter(generate(model, ids, sample, seed=0)))
    candidates = next_token_candidates(model, ids, sample, k=None)
    drawn_from = step.probs.tolist()
    assert {c.id: c.prob for c in candidates} == {i: p for i, p in enumerate(drawn_from)}
    assert sum(c.prob > 0 for c in candidates) <= 6  # top-k then top-p leave at most 6 tokens


def test_top_k_is_clamped_to_the_vocabulary():
    model = spread_model()
    ids = TOK.encode("import")
    full = next_token_candidates(model, ids, SampleConfig(), k=None)
    assert next_token_candidates(model, ids, SampleConfig(), k=V + 50) == full  # k > V lists V tokens
    assert next_token_candidates(model, ids, SampleConfig(top_k=V + 50), k=None) == full  # top_k > V = no top-k
    three = next_token_candidates(model, ids, SampleConfig(top_k=3), k=None)
    logits = last_logits(model, ids)
    kept = logits.topk(3).indices.tolist()
    by_hand = softmax_by_hand(logits[kept], 1.0)
    assert [c.id for c in three[:3]] == kept and all(c.prob == 0 for c in three[3:])
    assert [c.prob for c in three[:3]] == pytest.approx(by_hand, abs=1e-6)


def test_bad_arguments_raise_value_errors_naming_them():
    model = spread_model()
    with pytest.raises(ValueError, match="k must be"):
        next_token_candidates(model, [4], SampleConfig(), k=0)
    with pytest.raises(ValueError, match=f"0..{V - 1}"):
        next_token_candidates(model, [V], SampleConfig())
    with pytest.raises(ValueError, match="ModelConfig"):
        prepare_prompt(TOK, "x")
    with pytest.raises(ValueError, match="seed"):
        parity_trace(model, [4], 3, SampleConfig(temperature=1.0), seed=None)
    with pytest.raises(ValueError, match="n_steps"):
        parity_trace(model, [4], -1, SampleConfig())


# ---- prompts -------------------------------------------------------------------------------------


def test_long_prompts_are_cut_to_the_context_and_unknown_characters_reported():
    L = preset("tiny", V).context_length
    config = preset("tiny", V)
    text = "é" + "x + 1 " * 8 + "€"  # 50 characters; é falls in the cut part, € stays
    prompt = prepare_prompt(TOK, text, config)
    assert prompt.truncated and prompt.n_tokens == len(text) and prompt.dropped == len(text) - L
    assert list(prompt.ids) == TOK.encode(text)[-L:]
    assert prompt.unknown_chars == ("€",)  # what the model sees; the é was cut before it
    assert prompt.ids[-1] == UNK_ID and prompt.pieces[-1] == "<unk>"
    assert prompt.pieces == tuple("␣" if c == " " else "<unk>" if c == "€" else c for c in text[-L:])
    assert [code_point(TOK, i) for i in TOK.encode(" x\n")] == ["U+0020", "U+0078", "U+000A"]
    assert code_point(TOK, UNK_ID) == "<unk>"

    short = prepare_prompt(TOK, "x€s€", config)
    assert not short.truncated and short.dropped == 0 and short.unknown_chars == ("€",)
    assert list(short.ids) == [TOK.encode("x")[0], UNK_ID, TOK.encode("s")[0], UNK_ID]


def test_empty_prompt_starts_from_eos_for_candidates_and_completion():
    model = spread_model()
    prompt = prepare_prompt(TOK, "", model.config)
    assert prompt.empty and prompt.ids == (EOS_ID,) and prompt.pieces == ("<eos>",)
    want = softmax_by_hand(last_logits(model, [EOS_ID]), 1.0)
    got = {c.id: c.prob for c in next_token_candidates(model, [], SampleConfig(), k=None)}
    assert [got[i] for i in range(V)] == pytest.approx(want, abs=1e-6)
    greedy = SampleConfig(temperature=0.0, max_new_tokens=5)
    assert complete(model, TOK, [], greedy).tokens == complete(model, TOK, prompt.ids, greedy).tokens


def test_a_bundle_brings_its_template_and_context(tmp_path):
    model = spread_model()
    path = save_bundle(tmp_path / "b", model, TOK, metrics={}, command=["test"],
                       corpus=corpus_from_text("t.py", TEXT), prompt_template="# {prompt}")
    from core.bundle import load_bundle

    prompt = prepare_prompt(load_bundle(path), "main")
    assert prompt.model_text == "# main" and list(prompt.ids) == TOK.encode("# main")
    assert prompt.context_length == model.config.context_length


# ---- completions and parity ----------------------------------------------------------------------


def test_greedy_completion_with_cache_equals_without_across_the_boundary():
    model = spread_model(seed=1)
    ids = TOK.encode("def main(x):\n    return x")  # 25 of 32 positions: 60 new tokens cross twice
    greedy = SampleConfig(temperature=0.0, max_new_tokens=60)
    cached = complete(model, TOK, ids, greedy, use_cache=True, stop_at_eos=False)
    uncached = complete(model, TOK, ids, greedy, use_cache=False, stop_at_eos=False)
    assert cached.tokens == uncached.tokens and len(cached.tokens) == 60
    assert len(set(cached.tokens)) > 2  # not two constant sequences
    assert cached.reencoded_steps == uncached.reencoded_steps and len(cached.reencoded_steps) >= 2
    assert cached.positions == tuple(range(len(ids), len(ids) + 60))
    assert cached.text == TOK.decode(cached.tokens)


def test_same_seed_same_completion():
    model = spread_model(seed=2)
    ids = TOK.encode("import ")
    sample = SampleConfig(temperature=1.0, max_new_tokens=30)
    first = complete(model, TOK, ids, sample, seed=7, stop_at_eos=False)
    assert complete(model, TOK, ids, sample, seed=7, stop_at_eos=False).tokens == first.tokens
    assert complete(model, TOK, ids, sample, seed=8, stop_at_eos=False).tokens != first.tokens


def test_completion_stops_before_eos():
    model = BigramStub({"m": "a", "a": "i", "i": EOS_ID})
    greedy = SampleConfig(temperature=0.0, max_new_tokens=10)
    completion = complete(model, TOK, TOK.encode("m"), greedy)
    assert (completion.text, completion.stop_reason) == ("ai", "eos")
    assert completion.tokens == tuple(TOK.encode("ai")) and len(completion.per_token_seconds) == 2
    assert len(complete(model, TOK, TOK.encode("m"), greedy, stop_at_eos=False).tokens) == 10


@pytest.mark.parametrize("temperature, prompt_text", [(0.0, "x"), (1.0, "def main(x):\n    return x + 1\n")])
def test_parity_trace_holds_the_tolerance_across_the_context_boundary(temperature, prompt_text):
    model = spread_model(seed=1)
    ids = TOK.encode(prompt_text)
    sample = SampleConfig(temperature=temperature)
    trace = parity_trace(model, ids, 50, sample, seed=3)
    assert len(trace.steps) == 50 and (trace.atol, trace.rtol) == (PARITY_ATOL, PARITY_RTOL) == (1e-5, 1.3e-6)
    assert trace.slid_steps  # 50 tokens after a prompt through a 32-token context must slide
    assert trace.max_abs_diff <= 1e-5
    assert trace.flagged_steps == () and trace.passed
    assert all(s.window_agrees and 1 <= s.context <= 32 for s in trace.steps)
    cached = complete(model, TOK, ids, dataclasses.replace(sample, max_new_tokens=50), seed=3, stop_at_eos=False)
    assert tuple(s.token for s in trace.steps) == cached.tokens  # the trace follows the cached generation


class BrokenCacheGPT(GPT):
    """A GPT whose one-token cached steps push token 4 up by 50: parity must catch it."""

    def forward(self, idx, cache=None, *, return_weights=False):
        out = super().forward(idx, cache, return_weights=return_weights)
        if cache is None or idx.shape[1] != 1:
            return out
        logits = out.logits.clone()
        logits[..., 4] += 50.0
        return ModelOutput(logits=logits, weights=out.weights)


def test_parity_trace_flags_a_cache_that_changes_the_logits():
    model = spread_model(seed=1, cls=BrokenCacheGPT)
    trace = parity_trace(model, TOK.encode("def"), 10, SampleConfig(temperature=0.0), seed=0)
    assert trace.max_abs_diff == pytest.approx(50.0, abs=1e-3)
    assert trace.steps[0].max_abs_diff <= 1e-5  # the prefill step has T > 1: untouched
    assert not trace.within_tolerance and not trace.passed
    assert trace.flagged_steps and all(trace.steps[i].token == 4 != trace.steps[i].uncached_token
                                       for i in trace.flagged_steps)


def test_compare_latency_aligns_steps_and_reports_the_measured_means():
    model = spread_model()
    ids = TOK.encode("def")
    greedy = SampleConfig(temperature=0.0, max_new_tokens=8)
    cached = complete(model, TOK, ids, greedy, use_cache=True, stop_at_eos=False)
    uncached = complete(model, TOK, ids, dataclasses.replace(greedy, max_new_tokens=5), use_cache=False,
                        stop_at_eos=False)
    latency = compare_latency(cached, uncached)
    assert latency.positions == cached.positions and latency.tokens == cached.tokens
    assert latency.cached_ms == pytest.approx([1000 * s for s in cached.per_token_seconds])
    assert latency.uncached_ms[5:] == (None, None, None)
    assert latency.mean_cached_ms == pytest.approx(1000 * sum(cached.per_token_seconds) / 8)
    assert latency.mean_uncached_ms == pytest.approx(1000 * sum(uncached.per_token_seconds) / 5)
    assert latency.first_cached_ms == pytest.approx(1000 * cached.per_token_seconds[0])
    assert latency.mean_cached_one_token_ms == pytest.approx(1000 * sum(cached.per_token_seconds[1:]) / 7)
    with pytest.raises(ValueError, match="cache"):
        compare_latency(uncached, cached)


# ---- suggestions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("generated, want", [
    ("in(x):", ("in", "word boundary")),
    (" os\nimport", (" os", "end of line")),
    ("():\n", ("():", "end of line")),
    ("\n", ("", "end of line")),
    ("x_1 + 2", ("x_1", "word boundary")),
    ("retu", ("retu", None)),
])
def test_cut_suggestion_by_hand(generated, want):
    assert cut_suggestion(generated) == want


CYCLE = "def main(x):\n"


class BigramStub(torch.nn.Module):
    """A stand-in model whose next token depends only on the last one, given as {char: char or id}:
    its greedy completion of any prefix is known in advance."""

    def __init__(self, successor=None):
        super().__init__()
        successor = successor or dict(zip(CYCLE, CYCLE[1:] + CYCLE[0]))  # 'def main(x):\n' round and round
        self.config = ModelConfig(vocab_size=V, context_length=8, n_layer=1, n_head=1, d_model=2)
        table = torch.zeros(V, V)  # (V, V) logits of the next token after each token
        for a, b in successor.items():
            table[TOK.encode(a)[0], b if isinstance(b, int) else TOK.encode(b)[0]] = 10.0
        self.table = torch.nn.Parameter(table)

    def new_cache(self, batch_size=1):
        return KVCache.for_model(self.config, batch_size)

    def forward(self, idx, cache=None):
        return SimpleNamespace(logits=self.table[idx])  # (B, T, V)


@pytest.mark.parametrize("text, want", [
    ("def ma", ("in", "word boundary", "in(")),
    ("de", ("f", "word boundary", "f ")),
    ("def", (" main", "word boundary", " main(")),
    ("def main", ("(x", "word boundary", "(x)")),
    ("def main(x)", (":", "end of line", ":\n")),
])
def test_suggest_stops_at_the_next_word_boundary(text, want):
    s = suggest(BigramStub(), TOK, text)
    assert (s.text, s.stop_reason, s.generated) == want


def test_suggestion_is_a_prefix_of_the_completion_with_the_same_seed():
    model = spread_model(seed=4)
    sample = SampleConfig(temperature=1.0, max_new_tokens=40)
    for seed in range(3):
        s = suggest(model, TOK, "class Po", sample, seed=seed)
        full = complete(model, TOK, TOK.encode("class Po"), sample, seed=seed)
        assert full.text.startswith(s.generated) and s.generated.startswith(s.text)
        if s.stop_reason == "word boundary":
            assert not is_word_char(s.generated[len(s.text)]) and any(map(is_word_char, s.text))
        elif s.stop_reason == "end of line":
            assert s.generated[len(s.text)] == "\n"


def test_parity_allowance_is_torch_testing_float32_closeness():
    """Each step's figures equal the rule recomputed here from independent cached and uncached logits."""
    model = spread_model(seed=2)
    ids = TOK.encode("def f(x):")
    greedy = SampleConfig(temperature=0.0, max_new_tokens=12)
    trace = parity_trace(model, ids, 12, greedy, seed=0)
    cached_steps = list(generate(model, ids, greedy, use_cache=True))
    prefix = list(ids)
    for s, c in zip(trace.steps, cached_steps):
        with torch.no_grad():
            uncached = model(torch.tensor([prefix[-model.config.context_length:]])).logits[0, -1]  # (V,)
        diff = (c.logits - uncached).abs()
        j = int(diff.argmax())
        assert s.max_abs_diff == pytest.approx(float(diff[j]), abs=0)
        assert s.allowed == pytest.approx(1e-5 + 1.3e-6 * abs(float(uncached[j])), rel=1e-6)  # float32 arithmetic
        ratio = float((diff / (1e-5 + 1.3e-6 * uncached.abs())).max())
        assert s.worst_ratio == pytest.approx(ratio, rel=1e-6)
        try:
            torch.testing.assert_close(c.logits, uncached, atol=1e-5, rtol=1.3e-6)
            accepted = True
        except AssertionError:
            accepted = False
        assert accepted == (s.worst_ratio <= 1.0)
        prefix.append(s.token)
    # An allowance below the rounding actually present turns the verdict.
    strict = parity_trace(model, ids, 12, greedy, seed=0, atol=1e-12, rtol=0.0)
    assert (strict.max_abs_diff > 1e-12) == (not strict.within_tolerance)


def test_baseline_suggestion_reads_the_predictors_distribution_after_the_text():
    """With a stub predictor whose next-character distribution is known, candidates and suggestion follow it."""
    from core.autocomplete import baseline_suggestion

    class Stub:
        kind = "stub"
        tokenizer = TOK

        def log_probs(self, ids, positions):
            assert list(positions) == [len(ids) - 1]  # the slot after the text
            p = torch.full((TOK.vocab_size,), 1e-3, dtype=torch.float64)
            p[TOK.encode("e")[0]] = 0.6
            p[TOK.encode("f")[0]] = 0.3
            return (p / p.sum()).log().unsqueeze(0)

        def suggest(self, ids, max_chars=16):
            return TOK.encode("fe")

    result = baseline_suggestion(Stub(), "def ", k=3)
    assert [c.piece for c in result.candidates[:2]] == ["e", "f"]
    assert result.candidates[0].prob == pytest.approx(0.6 / (0.9 + 1e-3 * (TOK.vocab_size - 2)))
    assert result.suggestion == "fe"
    with pytest.raises(ValueError):
        baseline_suggestion(Stub(), "def", k=0)
