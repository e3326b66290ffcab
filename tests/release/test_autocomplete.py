"""core.release.serving.autocomplete: candidates are the sampling distribution, cached == uncached (parity trace and
completions, across the context boundary), the served suggestion is the policy's (probabilities worked out by
hand on a bigram stand-in), prompts report what was cut or lost."""

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from core.agreement import float64_copy, model_terms
from core.lessons.kv_cache import TIMING_REPEATS, measure_cache_latency, parity_trace
from core.model.bundle import save_bundle
from core.model.corpus import corpus_from_text
from core.model.engine import generate
from core.model.gpt import GPT, ModelConfig, ModelOutput, preset
from core.model.kv_cache import KVCache
from core.model.prompt import Prompt, encode_for_model, prompt_window
from core.model.sampling import NEVER_SAMPLED, SampleConfig
from core.model.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, CharTokenizer
from core.release.serving.autocomplete import baseline_candidates, prompt_for, suggest
from core.release.serving.candidates import code_point, next_token_candidates
from core.release.serving.completion import complete
from core.release.serving.policy import DEFAULT_POLICY, SuggestionPolicy, suggestion
from core.release.serving.predictor import is_word_char
from core.release.serving.transformer_predictor import TransformerPredictor

TEXT = "def main(x):\n    return x + 1\n\nimport os\nclass Point:\n    pass\n"
TOK = CharTokenizer.from_text(TEXT)
V = TOK.vocab_size


def served(predictor, text, policy, template="{prompt}", best_guess=False):
    """The suggestion a surface serves after `text`: the prompt encoded once (prompt_for), then suggest."""
    prompt = prompt_for(predictor, text, policy, template=template)
    return suggest(predictor, prompt, policy, best_guess=best_guess).suggestion_or_raise()


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
    """Independent reference: float64 softmax of logits / temperature with math.exp, over the ids generation
    may draw (<pad>, <bos>, <unk> get exactly 0, by the rule of core.model.sampling written out here)."""
    scaled = {i: x / temperature for i, x in enumerate(logits.tolist()) if i not in (PAD_ID, BOS_ID, UNK_ID)}
    top = max(scaled.values())
    exps = {i: math.exp(x - top) for i, x in scaled.items()}
    total = math.fsum(exps.values())
    return [exps[i] / total if i in exps else 0.0 for i in range(len(logits))]


def last_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1]


# ---- candidates ----------------------------------------------------------------------------------


@pytest.mark.numerics
@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.7])
def test_candidates_are_softmax_of_the_last_logits_over_temperature(temperature):
    model = spread_model()
    ids = TOK.encode("def ma")
    candidates = next_token_candidates(model, ids, SampleConfig(temperature=temperature), k=None, tokenizer=TOK)
    assert sorted(c.id for c in candidates) == [i for i in range(V) if i not in NEVER_SAMPLED]  # never <pad> ...
    assert math.fsum(c.prob for c in candidates) == pytest.approx(1.0, abs=1e-6)
    want = softmax_by_hand(last_logits(model, ids), temperature)
    for c in candidates:
        assert c.prob == pytest.approx(want[c.id], abs=1e-6)
        assert c.piece == TOK.display_piece(c.id)
    probs = [c.prob for c in candidates]
    assert probs == sorted(probs, reverse=True)  # most likely first
    top3 = next_token_candidates(model, ids, SampleConfig(temperature=temperature), k=3, tokenizer=TOK)
    assert top3 == candidates[:3]


@pytest.mark.numerics
def test_candidates_are_what_generation_draws_from():
    model = spread_model()
    ids = TOK.encode("class P")
    sample = SampleConfig(temperature=0.8, top_k=6, top_p=0.9, max_new_tokens=1)
    step = next(iter(generate(model, ids, sample, seed=0)))
    candidates = next_token_candidates(model, ids, sample, k=None)
    drawn_from = step.probs.tolist()
    # every character with its probability (0 where top-k / top-p cut it); <eos> only when it may be drawn;
    # <pad>, <bos>, <unk> (probability 0) never
    want = {i: p for i, p in enumerate(drawn_from) if i >= 4 or (i == EOS_ID and p > 0)}
    assert {c.id: c.prob for c in candidates} == want
    assert all(drawn_from[i] == 0 for i in NEVER_SAMPLED)
    assert sum(c.prob > 0 for c in candidates) <= 6  # top-k then top-p leave at most 6 tokens


@pytest.mark.numerics
def test_top_k_is_clamped_to_the_vocabulary():
    model = spread_model()
    ids = TOK.encode("import")
    full = next_token_candidates(model, ids, SampleConfig(), k=None)
    assert next_token_candidates(model, ids, SampleConfig(), k=V + 50) == full  # k > V lists V tokens
    assert next_token_candidates(model, ids, SampleConfig(top_k=V + 50), k=None) == full  # top_k > V = no top-k
    three = next_token_candidates(model, ids, SampleConfig(top_k=3), k=None)
    logits = last_logits(model, ids)
    kept = sorted(range(4, V), key=lambda i: -float(logits[i]))[:3]  # the 3 largest among the drawable ids
    exps = [math.exp(float(logits[i]) - float(logits[kept[0]])) for i in kept]
    by_hand = [e / math.fsum(exps) for e in exps]
    assert [c.id for c in three[:3]] == kept and all(c.prob == 0 for c in three[3:])
    assert [c.prob for c in three[:3]] == pytest.approx(by_hand, abs=1e-6)


def test_bad_arguments_raise_value_errors_naming_them():
    model = spread_model()
    with pytest.raises(ValueError, match="k must be"):
        next_token_candidates(model, [4], SampleConfig(), k=0)
    with pytest.raises(ValueError, match=f"0..{V - 1}"):
        next_token_candidates(model, [V], SampleConfig())
    with pytest.raises(ValueError, match="seed"):
        parity_trace(model, [4], 3, SampleConfig(temperature=1.0), seed=None)
    with pytest.raises(ValueError, match="n_steps"):
        parity_trace(model, [4], -1, SampleConfig())
    with pytest.raises(ValueError, match="max_new_tokens"):
        parity_trace(model, [4], 10**9, SampleConfig())  # bounded by MAX_NEW_TOKENS before any work
    for seed in (2**63, 2**64, -1):
        with pytest.raises(ValueError, match="seed must be an integer from 0 to 2"):
            parity_trace(model, [4], 3, SampleConfig(), seed=seed)
        with pytest.raises(ValueError, match="seed must be an integer from 0 to 2"):
            complete(model, TOK, [4], SampleConfig(max_new_tokens=3), seed=seed)
    predictor = TransformerPredictor(model, TOK)
    with pytest.raises(ValueError, match="text must be a str"):
        prompt_for(predictor, None, DEFAULT_POLICY)
    with pytest.raises(ValueError, match="template must be a str containing"):
        prompt_for(predictor, "def", DEFAULT_POLICY, template="# no slot")
    with pytest.raises(ValueError, match="prompt must be a Prompt"):
        suggest(predictor, "def", DEFAULT_POLICY)
    with pytest.raises(ValueError, match="policy must be a SuggestionPolicy"):
        suggest(predictor, prompt_for(predictor, "def", DEFAULT_POLICY), None)
    for k in (0, True, 2.5):
        with pytest.raises(ValueError, match="k must be an integer >= 1"):
            baseline_candidates(predictor, "def", k=k)


# ---- prompts -------------------------------------------------------------------------------------


def test_code_points_name_each_token():
    assert [code_point(TOK, i) for i in TOK.encode(" x\n")] == ["U+0020", "U+0078", "U+000A"]
    assert code_point(TOK, UNK_ID) == "<unk>"


@pytest.mark.numerics
def test_empty_prompt_starts_from_eos_for_candidates_and_completion():
    model = spread_model()
    prompt = encode_for_model(TOK, "", model.config.context_length)
    assert prompt.empty and prompt.ids == (EOS_ID,) and prompt.pieces == ("<eos>",)
    want = softmax_by_hand(last_logits(model, [EOS_ID]), 1.0)
    got = {c.id: c.prob for c in next_token_candidates(model, [], SampleConfig(), k=None)}
    assert set(got) == set(range(V)) - set(NEVER_SAMPLED)
    assert [got.get(i, 0.0) for i in range(V)] == pytest.approx(want, abs=1e-6)
    greedy = SampleConfig(temperature=0.0, max_new_tokens=5)
    assert complete(model, TOK, [], greedy).tokens == complete(model, TOK, prompt.ids, greedy).tokens


def test_a_bundle_brings_its_template_and_context(tmp_path):
    model = spread_model()
    path = save_bundle(
        tmp_path / "b",
        model,
        TOK,
        metrics={},
        command=["test"],
        corpus=corpus_from_text("t.py", TEXT),
        prompt_template="# {prompt}",
    )
    from core.model.bundle import load_bundle

    bundle = load_bundle(path)
    predictor = TransformerPredictor(bundle.model, bundle.tokenizer)
    prompt = prompt_for(predictor, "main", None, template=bundle.manifest["prompt_template"])  # as the page does
    assert prompt.text == "main" and prompt.model_text == "# main" and list(prompt.ids) == TOK.encode("# main")
    assert prompt.context_length == prompt.window == model.config.context_length


# ---- completions and parity ----------------------------------------------------------------------


@pytest.mark.numerics
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


@pytest.mark.numerics
@pytest.mark.parametrize("temperature, prompt_text", [(0.0, "x"), (1.0, "def main(x):\n    return x + 1\n")])
def test_parity_trace_agrees_in_float64_across_the_context_boundary(temperature, prompt_text):
    model = spread_model(seed=1)
    ids = TOK.encode(prompt_text)
    sample = SampleConfig(temperature=temperature)
    trace = parity_trace(model, ids, 50, sample, seed=3)
    assert len(trace.steps) == 50 and trace.terms == model_terms(model.config)
    assert trace.slid_steps  # 50 tokens after a prompt through a 32-token context must slide
    assert all(s.agreement.dtype == "float64" and s.agreement.passed for s in trace.steps)
    assert trace.within_tolerance and trace.worst_ratio <= 1.0
    assert trace.max_abs_diff <= 1e-9  # float64 rounding: about 1e-15 relative, far below any bug
    assert trace.flagged_steps == () and trace.passed
    assert all(s.window_agrees and 1 <= s.context <= 32 for s in trace.steps)
    assert all(s.float32.dtype == "float32" for s in trace.steps)  # the float32 figure is kept beside it
    assert 0 < trace.float32_max_abs_diff < 1e-3
    cached = complete(
        float64_copy(model), TOK, ids, dataclasses.replace(sample, max_new_tokens=50), seed=3, stop_at_eos=False
    )
    assert tuple(s.token for s in trace.steps) == cached.tokens  # the trace follows the cached generation


@pytest.mark.numerics
def test_parity_passes_on_an_untrained_tiny_model():
    torch.manual_seed(5)
    model = GPT(preset("tiny", V)).eval()  # the initialisation as it is, no rescaling
    trace = parity_trace(model, TOK.encode("import os\n"), 40, SampleConfig(temperature=0.0), seed=0)
    assert trace.passed and trace.slid_steps and trace.worst_ratio <= 1.0


@pytest.mark.numerics
def test_parity_passes_on_the_shipped_model():
    from core.model.bundle import load_bundle

    bundle = load_bundle(Path(__file__).resolve().parents[2] / "models" / "default")
    L = bundle.config.context_length
    text = "import os\n\n\ndef main(argv):\n    " + "x = 1\n    " * 20  # > L - 8 characters: it slides
    ids = bundle.tokenizer.encode(text)[-(L - 4) :]
    trace = parity_trace(bundle.model, ids, 10, bundle.sample_config, seed=0)
    assert trace.slid_steps and trace.passed, [s.agreement.describe() for s in trace.steps]


class BrokenCacheGPT(GPT):
    """A GPT whose one-token cached steps push token 4 up by 50: parity must catch it."""

    def forward(self, idx, cache=None, *, return_weights=False):
        out = super().forward(idx, cache, return_weights=return_weights)
        if cache is None or idx.shape[1] != 1:
            return out
        logits = out.logits.clone()
        logits[..., 4] += 50.0
        return ModelOutput(logits=logits, weights=out.weights)


@pytest.mark.numerics
def test_parity_trace_flags_a_cache_that_changes_the_logits():
    model = spread_model(seed=1, cls=BrokenCacheGPT)
    trace = parity_trace(model, TOK.encode("def"), 10, SampleConfig(temperature=0.0), seed=0)
    assert trace.max_abs_diff == pytest.approx(50.0, abs=1e-9)
    assert trace.steps[0].agreement.passed  # the prefill step has T > 1: untouched
    assert trace.worst_ratio > 1e6  # a real bug fails by orders of magnitude, not by a hair
    assert trace.float32_max_abs_diff == pytest.approx(50.0, abs=1e-3)  # the float32 figure sees it too
    assert not trace.within_tolerance and not trace.passed
    assert trace.flagged_steps and all(
        trace.steps[i].token == 4 != trace.steps[i].uncached_token for i in trace.flagged_steps
    )


class FakeClock:
    """A clock whose n-th reading is n**2 seconds: every interval is distinct, so a test can tell which
    readings each recorded step came from."""

    def __init__(self):
        self.n = -1

    def __call__(self):
        self.n += 1
        return float(self.n**2)


def test_cache_timing_excludes_the_warm_up_and_takes_medians_of_the_repeats():
    model = spread_model()
    L, N = model.config.context_length, 4
    clock = FakeClock()
    timing = measure_cache_latency(model, new_tokens=N, repeats=3, warmup=2, clock=clock)
    # One run reads the clock N + 1 times; 2 warm-up runs per mode, then 3 repeats per mode alternating.
    per_run = N + 1
    assert clock.n + 1 == (2 * 2 + 2 * 3) * per_run
    intervals = [[(k + 1) ** 2 - k**2 for k in range(r * per_run, r * per_run + N)] for r in range(10)]
    assert timing.cached_seconds == tuple(tuple(map(float, intervals[r])) for r in (4, 6, 8))  # not runs 0-3
    assert timing.uncached_seconds == tuple(tuple(map(float, intervals[r])) for r in (5, 7, 9))
    assert (timing.repeats, timing.warmup, timing.new_tokens, timing.prompt_tokens) == (3, 2, N, L - N)
    assert timing.positions == tuple(range(L - N, L))  # the prompt fills the context but for the new tokens
    # medians recomputed by hand from the recorded samples
    runs = timing.cached_seconds
    assert timing.cached_ms == tuple(1000 * sorted(r[t] for r in runs)[1] for t in range(N))
    means = sorted(sum(r) / N for r in runs)
    assert timing.cached_ms_per_token == pytest.approx(1000 * means[1])
    assert timing.prefill_ms == timing.cached_ms[0]
    assert timing.cached_one_token_ms == pytest.approx(1000 * sorted(sum(r[1:]) / (N - 1) for r in runs)[1])
    un_means = sorted(sum(r) / N for r in timing.uncached_seconds)
    assert timing.speedup == pytest.approx(un_means[1] / means[1])


def test_cache_timing_with_the_real_clock_has_the_documented_shape():
    model = spread_model()
    timing = measure_cache_latency(model, prompt_tokens=1, new_tokens=5)
    assert timing.repeats == TIMING_REPEATS == 5 and timing.warmup == 1 and timing.prompt_tokens == 1
    assert all(len(run) == 5 and all(t > 0 for t in run) for run in timing.cached_seconds + timing.uncached_seconds)
    assert timing.threads == torch.get_num_threads()


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(new_tokens=0), "new_tokens"),
        (dict(new_tokens=33), "new_tokens"),
        (dict(repeats=0), "repeats"),
        (dict(repeats=10**9), "repeats"),
        (dict(warmup=-1), "warmup"),
        (dict(prompt_tokens=30), "never slides"),
    ],
)
def test_cache_timing_refuses_unbounded_work(kwargs, words):
    with pytest.raises(ValueError, match=words):
        measure_cache_latency(spread_model(), **kwargs)


# ---- suggestions ----------------------------------------------------------------------------------


CYCLE = "def main(x):\n"


class BigramStub(torch.nn.Module):
    """A stand-in model whose next token depends only on the last one, given as {char: char or id}: logit 10
    on the successor, 0 elsewhere, so every greedy step has probability e^10 / (e^10 + V - 1)."""

    def __init__(self, successor=None):
        super().__init__()
        successor = successor or dict(zip(CYCLE, CYCLE[1:] + CYCLE[0]))  # 'def main(x):\n' round and round
        self.config = ModelConfig(vocab_size=V, context_length=64, n_layer=1, n_head=1, d_model=2)  # room for 24
        table = torch.zeros(V, V)  # (V, V) logits of the next token after each token
        for a, b in successor.items():
            table[TOK.encode(a)[0], b if isinstance(b, int) else TOK.encode(b)[0]] = 10.0
        self.table = torch.nn.Parameter(table)

    def new_cache(self, batch_size=1):
        return KVCache.for_model(self.config, batch_size)

    def forward(self, idx, cache=None, return_weights=False):
        return SimpleNamespace(logits=self.table[idx])  # (B, T, V)


STEP = math.exp(10) / (math.exp(10) + V - 1)  # P(the successor), float64 by hand


@pytest.mark.numerics
@pytest.mark.parametrize(
    "threshold, want, k, shown",
    [
        # After "def ma" the greedy completion is 24 characters: "in(x):\ndef main(x):\ndef ". Its cuts end
        # where a word or a run of punctuation ends, or after a newline: after 2 "in", 3 "in(", 4 "in(x",
        # 7 "in(x):\n", 10 "in(x):\ndef", 11, 15, 16, 17, 20 and 23 "in(x):\ndef main(x):\ndef" characters.
        # P(k) = STEP^k; P * (k - 1) grows with k here, so the longest cut that clears the threshold wins.
        (0.5, "in(x):\ndef main(x):\ndef", 23, True),
        (0.99, "in(x):\n", 7, True),  # STEP^8 = 0.9902 >= 0.99 > STEP^9: the cuts 2, 3, 4, 7 clear
        (0.995, "in(x", 4, True),  # STEP^4 = 0.9951 >= 0.995 > STEP^5 = 0.9939: the cuts 2, 3, 4
        (1.0, "in(x):\ndef main(x):\ndef", 23, False),  # none clears: not shown, the best of all reported
    ],
)
def test_the_suggestion_by_hand_on_a_bigram(threshold, want, k, shown):
    assert V == 28 and STEP**8 >= 0.99 > STEP**9 and STEP**4 >= 0.995 > STEP**5  # the premises above
    predictor, policy = TransformerPredictor(BigramStub(), TOK), SuggestionPolicy(threshold=threshold)
    s = served(predictor, "def ma", policy, best_guess=True)
    assert s.completion == "in(x):\ndef main(x):\ndef " and s.stop_reason == "limit"
    assert (s.text, s.shown, s.threshold, s.saves) == (want, shown, threshold, k - 1)
    assert s.probability == pytest.approx(STEP**k, rel=1e-6)  # float32 logits, float64 softmax
    # Served without the best guess, the completion stops at its first character below the threshold: the same
    # offer, or no text at all where nothing clears it.
    fast = served(predictor, "def ma", policy)
    n = sum(STEP**j >= threshold for j in range(1, 25))  # 24, 8, 4, 0: characters whose prefix reaches it
    assert fast.completion == s.completion[:n] and fast.stop_reason == ("limit" if n == 24 else "unlikely")
    assert (fast.text, fast.shown) == ((want, True) if shown else ("", False))


@pytest.mark.numerics
def test_the_suggestion_applies_the_template_and_reads_unknown_characters_as_unk():
    predictor = TransformerPredictor(BigramStub(), TOK)
    policy = SuggestionPolicy(threshold=0.99)
    assert served(predictor, "de", policy, template="{prompt}f ma").text == "in(x):\n"
    assert served(predictor, "de", policy).text == "f main(x"  # cuts 2, 6, 7, 8 clear: the longest
    # '€' is <unk>, whose row is all zeros: uniform, 1/V < MIN_THRESHOLD, so nothing is proposed
    s = served(predictor, "def m€", policy)
    assert (s.text, s.completion, s.stop_reason, s.shown) == ("", "", "unlikely", False)
    end = BigramStub({"m": "a", "a": "i", "i": EOS_ID})
    s = served(TransformerPredictor(end, TOK), "m", SuggestionPolicy(threshold=0.5))
    assert (s.completion, s.stop_reason, s.text) == ("ai", "end of document", "ai")  # the document ends there


@pytest.mark.numerics
def test_suggest_measures_the_row_its_first_character_is_chosen_from_by_hand_on_a_bigram():
    """After "def ma" the stub's row is e^10 on 'i' and 1 elsewhere (V entries): top-1 STEP, entropy by hand."""
    predictor = TransformerPredictor(BigramStub(), TOK)
    policy = SuggestionPolicy(threshold=0.5)
    prompt = prompt_for(predictor, "def ma", policy)
    measured = suggest(predictor, prompt, policy)
    z = math.exp(10) + V - 1
    entropy = -(math.exp(10) / z * math.log(math.exp(10) / z) + (V - 1) / z * math.log(1 / z))
    assert measured.top1_prob == pytest.approx(STEP, rel=1e-6) and measured.entropy_nats == pytest.approx(
        entropy, rel=1e-5
    )
    assert measured.prompt is prompt and measured.predictor == "transformer" and measured.policy == policy
    assert measured.error is None and measured.latency_ms > 0
    assert measured.suggestion_or_raise() == served(predictor, "def ma", policy)


class Broken:
    """A predictor whose every forward pass fails."""

    kind = "broken"
    tokenizer = TOK

    def reads(self, max_new):
        return 1024

    def log_probs(self, ids, positions):
        raise RuntimeError("weights went missing")

    def continuations(self, contexts, max_new):
        raise RuntimeError("weights went missing")
        yield


def test_an_error_in_serving_is_measured_and_raised_again():
    prompt = prompt_for(Broken(), "def", DEFAULT_POLICY)
    measured = suggest(Broken(), prompt, DEFAULT_POLICY)
    assert measured.suggestion is None and isinstance(measured.error, RuntimeError) and measured.top1_prob is None
    assert measured.latency_ms >= 0 and measured.prompt.text == "def"
    with pytest.raises(RuntimeError, match="weights went missing"):
        measured.suggestion_or_raise()


@pytest.mark.parametrize("n", [10, 40, 41, 50, 64, 65, 100])
def test_the_prompt_is_the_window_the_suggestion_reads(n):
    """The stub's context is 64 and a suggestion may add 24 tokens, so a suggestion reads the last 40: a prompt of
    41 to 64 characters is truncated (what the issue found for 105-128 characters of a context of 128), and the
    prompt of prompt_for is the prompt's one constructor with room for the longest suggestion."""
    model = BigramStub()
    predictor = TransformerPredictor(model, TOK)
    text = (TEXT * 3)[:n]
    prompt = prompt_for(predictor, text, DEFAULT_POLICY)
    assert prompt == encode_for_model(TOK, text, model.config.context_length, room=DEFAULT_POLICY.max_chars)
    assert prompt.window == 40 == predictor.reads(DEFAULT_POLICY.max_chars) and prompt.context_length == 64
    assert list(prompt.ids) == TOK.encode(text)[-40:]
    assert prompt.truncated == (n > 40) and prompt.dropped == max(0, n - 40)
    # what the suggestion reads: the same as the policy fed the text's last 40 ids, cut by hand
    assert served(predictor, text, DEFAULT_POLICY) == suggestion(predictor, TOK.encode(text)[-40:], DEFAULT_POLICY)
    whole = prompt_for(predictor, text, None)  # one next-token read: the whole context
    assert whole.window == 64 and list(whole.ids) == TOK.encode(text)[-64:] and whole.truncated == (n > 64)
    assert isinstance(whole, Prompt)


def test_prompt_for_gives_the_predictors_window_as_context_and_room():
    """prompt_for hands the constructor (reads(0), reads(0) - reads(m)): the window rule gives back reads(m) for
    every context and room, checked exhaustively against the rule written out (max(L - m, L // 2, 1))."""
    for L in range(1, 130):
        for m in range(0, 140):
            w = max(L - m, L // 2, 1)
            assert prompt_window(L, m) == w and prompt_window(L, L - w) == w


def test_the_suggestion_reads_the_prompts_ids_as_they_are_and_refuses_a_longer_context():
    """The suggestion path cuts once: the ids the model's first forward pass reads are the prompt's, token for
    token; a context longer than the window reaches continuations only uncut, and is refused, not cut again."""
    model = BigramStub()
    seen = []
    forward = model.forward

    def spy(idx, *args, **kwargs):
        seen.append(idx[0].tolist())
        return forward(idx, *args, **kwargs)

    model.forward = spy
    predictor = TransformerPredictor(model, TOK)
    text = (TEXT * 3)[:100]
    prompt = prompt_for(predictor, text, DEFAULT_POLICY)
    suggest(predictor, prompt, DEFAULT_POLICY).suggestion_or_raise()
    assert seen[0] == list(prompt.ids) and len(seen[0]) == 40  # the window, read as cut
    with pytest.raises(ValueError, match="longer than the 40"):
        next(predictor.continuations([TOK.encode(text)], DEFAULT_POLICY.max_chars))
    whole = prompt_for(predictor, text, None)  # the whole context: not the window a suggestion reads
    with pytest.raises(ValueError, match="longer than the 40"):
        suggest(predictor, whole, DEFAULT_POLICY).suggestion_or_raise()


@pytest.mark.numerics
def test_the_suggestion_is_a_prefix_of_the_greedy_completion():
    """The policy extends greedily over visible tokens, as temperature 0 generation does, and stops earlier
    (end of document, too unlikely, or max_chars). The transformer's continuation reads the last
    max(context_length - max_chars, context_length // 2) = 16 tokens of the prompt, so the prompts here are
    at most 16 characters."""
    model = spread_model(seed=4)
    predictor = TransformerPredictor(model, TOK)
    greedy = SampleConfig(temperature=0.0, max_new_tokens=DEFAULT_POLICY.max_chars)
    texts = ["class Po", "def ", "import", "x + 1", "    ret", "(x):\n"]
    completions = []
    for text in texts:
        s = served(predictor, text, SuggestionPolicy(threshold=0.05))
        full = complete(model, TOK, TOK.encode(text), greedy, stop_at_eos=True)
        assert full.text.startswith(s.completion) and s.completion.startswith(s.text), (text, s, full.text)
        if s.text:  # a cut ends a word (or a run of punctuation, or a line), judged on what greedy writes next
            k, g = len(s.text), full.text
            assert k >= 2 and (
                (k == len(g) and s.stop_reason == "end of document")
                or (k < len(g) and (g[k - 1] == "\n" or is_word_char(g[k - 1]) != is_word_char(g[k])))
            )
        completions.append(s.completion)
    assert any(completions)  # not all empty


@pytest.mark.numerics
def test_parity_figures_are_the_agreement_rule_recomputed_from_independent_logits():
    """Each step's float64 verdict and float32 figure equal the rule 16 x eps x terms x max(1, max |uncached|)
    applied here to cached logits from generate and uncached logits of a plain forward pass."""
    model = spread_model(seed=2)
    ids = TOK.encode("def f(x):")
    greedy = SampleConfig(temperature=0.0, max_new_tokens=12)
    trace = parity_trace(model, ids, 12, greedy, seed=0)
    config = model.config
    terms = config.n_layer * max(config.mlp_ratio * config.d_model, config.context_length) + config.d_model
    model64 = float64_copy(model)
    for dtype, m in ((torch.float64, model64), (torch.float32, model)):
        cached_steps = list(generate(m, ids, greedy, use_cache=True))
        prefix = list(ids)
        for s, c in zip(trace.steps, cached_steps):
            with torch.no_grad():
                window = torch.tensor([prefix[-config.context_length :]])  # (1, T)
                uncached = m(window, return_weights=True).logits[0, -1]  # (V,) the lessons' kernel, as the trace
            top2 = uncached.topk(2).values
            assert float(top2[0] - top2[1]) > 1e-3  # no near-tie: float32 and float64 choose alike on any CPU
            figure = s.agreement if dtype == torch.float64 else s.float32
            assert c.token == s.token and figure.dtype == str(dtype).removeprefix("torch.")
            assert figure.max_abs_diff == float((c.logits - uncached).abs().max())
            eps = torch.finfo(dtype).eps
            assert figure.allowed == pytest.approx(16 * eps * terms * max(1.0, float(uncached.abs().max())), rel=1e-12)
            prefix.append(s.token)
    assert trace.passed


@given(
    text=st.text(alphabet=TEXT + "é€\t", max_size=40),
    seed=st.integers(0, 2**63 - 1),
    temperature=st.sampled_from([0.0, 0.8, 1.6]),
)
def test_completions_never_contain_special_tokens(text, seed, temperature):
    """A model that prefers <pad>, <bos> and <unk> still completes with characters only (and <eos> only as
    the stop); the prompt may hold unseen characters, which are <unk> on the way in."""
    model = SpecialLovingGPT.build()
    ids = encode_for_model(TOK, text, model.config.context_length).ids
    completion = complete(model, TOK, ids, SampleConfig(temperature=temperature, max_new_tokens=10), seed=seed)
    assert not set(completion.tokens) & {PAD_ID, BOS_ID, EOS_ID, UNK_ID}
    assert "\ufffd" not in completion.text
    raw = [s.token for s in generate(model, ids, SampleConfig(temperature=temperature, max_new_tokens=10), seed=seed)]
    assert not set(raw) & set(NEVER_SAMPLED)  # <eos> may occur: it is the stop signal, cut by complete
    assert completion.tokens == tuple(raw[: raw.index(EOS_ID)] if EOS_ID in raw else raw)


class SpecialLovingGPT(GPT):
    """Logits of <pad>, <bos>, <unk> pushed up by 8: without suppression they would dominate."""

    @classmethod
    def build(cls):
        torch.manual_seed(0)
        return cls(preset("tiny", V)).eval()

    def forward(self, idx, cache=None, *, return_weights=False):
        out = super().forward(idx, cache, return_weights=return_weights)
        logits = out.logits.clone()
        logits[..., list(NEVER_SAMPLED)] += 8.0
        return ModelOutput(logits=logits, weights=out.weights)


@pytest.mark.numerics
def test_candidates_never_offer_special_tokens_the_sampler_would_not_draw():
    model = SpecialLovingGPT.build()
    candidates = next_token_candidates(model, TOK.encode("def"), SampleConfig(), k=None)
    probs = {c.id: c.prob for c in candidates}
    assert not set(probs) & set(NEVER_SAMPLED) and probs[EOS_ID] > 0  # never listed, though they would win
    assert math.fsum(probs.values()) == pytest.approx(1.0, abs=1e-6)
    assert candidates[0].id not in NEVER_SAMPLED


@pytest.mark.numerics
def test_baseline_candidates_read_the_predictors_distribution_after_the_text():
    """A stub predictor whose next-character distribution is known and puts most on <unk>: the candidates are
    its probabilities, most likely first, with <pad>, <bos> and <unk> never listed."""

    class Stub:
        kind = "stub"
        tokenizer = TOK

        def log_probs(self, ids, positions):
            assert list(positions) == [len(ids) - 1]  # the slot after the text
            assert ids[:-1] == TOK.encode("def ")  # the text, then a placeholder for the slot
            p = torch.full((TOK.vocab_size,), 1e-3, dtype=torch.float64)
            p[UNK_ID] = 0.9
            p[TOK.encode("e")[0]] = 0.6
            p[TOK.encode("f")[0]] = 0.3
            return (p / p.sum()).log().unsqueeze(0)

    total = 1.8 + 1e-3 * (TOK.vocab_size - 3)
    candidates = baseline_candidates(Stub(), "def ", k=3)
    assert [c.piece for c in candidates[:2]] == ["e", "f"] and len(candidates) == 3
    assert candidates[0].prob == pytest.approx(0.6 / total, rel=1e-12)
    assert candidates[1].prob == pytest.approx(0.3 / total, rel=1e-12)
    every = baseline_candidates(Stub(), "def ", k=TOK.vocab_size)
    assert len(every) == TOK.vocab_size - 3 and not {c.id for c in every} & set(NEVER_SAMPLED)
    assert EOS_ID in {c.id for c in every}  # <eos> is a possible next token: listed
