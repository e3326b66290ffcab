"""core.telemetry.record: what is recorded is what the one serving call (core.release.serving.autocomplete.suggest)
measured, the recorded distribution is the model's own (an independent float64 softmax of its logits), input quality
is counted over the window the suggestion reads, errors are recorded and raised, a broken store changes nothing
served, and outcomes mature by the stated rule."""

import json
import math

import pytest
import torch
from bundles import tiny_model

from core.agreement import allowance, float64_copy, model_terms
from core.model.corpus import Document
from core.model.engine import generate
from core.model.prompt import encode_for_model, prompt_window, start_ids
from core.model.sampling import SampleConfig
from core.model.tokenizer import EOS_ID
from core.release.baselines.baseline_bundle import load_baseline
from core.release.evaluation.slices import slice_labels
from core.release.serving.autocomplete import prompt_for, suggest
from core.release.serving.completion import complete
from core.release.serving.policy import MAX_CHARS, SuggestionPolicy, policy_from_manifest
from core.release.serving.predictor import MAX_CONTEXT
from core.release.serving.transformer_predictor import TransformerPredictor
from core.telemetry.completions import recording_completion, served_completion
from core.telemetry.record import outcome, position_slices, record_suggestion
from core.telemetry.store import TelemetryStore

from .helpers import TOY, ngram_bundle, toy_corpus

PROMPTS = ["", "def add3(a, b):\n    ret", "def add7(a, b):\n    return a + ", "é∑ x = ", "x" * 200]


@pytest.fixture(scope="module")
def ngram(tmp_path_factory):
    root = tmp_path_factory.mktemp("record")
    return load_baseline(ngram_bundle(root, toy_corpus(root)))


def served(predictor, text, policy):
    """What a surface serves after `text` (the prompt encoded once, then the one serving call)."""
    return suggest(predictor, prompt_for(predictor, text, policy), policy).suggestion_or_raise()


def served_and_recorded(predictor, text, policy, *, store, version="v", surface="cli", session=None):
    """As the page and the CLI do it: suggest, record what it measured, then raise a serving error again."""
    measured = suggest(predictor, prompt_for(predictor, text, policy), policy)
    event_id = record_suggestion(store, measured, version=version, surface=surface, session=session)
    return measured.suggestion_or_raise(), event_id


def independent_figures(logits: torch.Tensor) -> tuple[float, float]:
    """Top-1 probability and entropy of softmax(logits) with math, term by term, in float64."""
    values = [float(v) for v in logits.double()]
    m = max(values)
    weights = [math.exp(v - m) for v in values]
    z = math.fsum(weights)
    probs = [w / z for w in weights]
    return max(probs), -math.fsum(p * math.log(p) for p in probs if p > 0)


@pytest.mark.numerics
def test_the_recorded_suggestion_is_the_served_one_and_each_one_is_recorded(ngram, trained_bundle, tmp_path):
    store = TelemetryStore(tmp_path / "t.db")
    transformer = TransformerPredictor(trained_bundle.model, trained_bundle.tokenizer)
    for predictor, manifest in ((ngram.predictor, ngram.manifest), (transformer, trained_bundle.manifest)):
        policy = policy_from_manifest(manifest)
        for text in PROMPTS:
            s, event_id = served_and_recorded(
                predictor, text, policy, version=manifest["version"], surface="cli", session="s", store=store
            )
            assert s == served(predictor, text, policy) and event_id is not None
    rows = store.rows()
    assert len(rows) == 2 * len(PROMPTS)
    assert [r["suggestion_chars"] for r in rows[: len(PROMPTS)]] == [
        len(served(ngram.predictor, t, policy_from_manifest(ngram.manifest)).text) for t in PROMPTS
    ]
    assert {r["predictor"] for r in rows} == {"ngram", "transformer"} and all(r["latency_ms"] > 0 for r in rows)
    assert any(r["shown"] == 1 for r in rows) and any(r["shown"] == 0 for r in rows)  # both cases were met


@pytest.mark.numerics
@pytest.mark.parametrize("spread", [1.0, 20.0])  # near-uniform, and far from it (large logits)
def test_the_recorded_distribution_is_an_independent_float64_softmax_of_the_models_logits(spread, tmp_path):
    small, tok = tiny_model(seed=3, spread=spread)
    model = float64_copy(small)
    config = model.config
    predictor = TransformerPredictor(model, tok)
    store = TelemetryStore(tmp_path / "t.db")
    kept = max(config.context_length - MAX_CHARS, config.context_length // 2, 1)  # what continuations reads
    for text in PROMPTS:
        served_and_recorded(predictor, text, SuggestionPolicy(), store=store)
        ids = start_ids(encode_for_model(tok, text, MAX_CONTEXT).ids)[-kept:]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1]  # (V,) uncached, float64
        top1, entropy = independent_figures(logits)
        row = store.rows()[-1]
        # Two float64 computations of the same logits (cached fast attention against a plain forward) differ by
        # rounding over the model's longest sums; the softmax adds a V-term sum.
        tol = allowance(torch.float64, model_terms(config) + config.vocab_size, float(logits.abs().max()))
        assert abs(row["top1_prob"] - top1) <= tol and abs(row["entropy_nats"] - entropy) <= tol
    # A wrong window (the context one character short) is far outside that tolerance.
    text = "def add(a, b):\n    return a + "
    ids = start_ids(encode_for_model(tok, text, MAX_CONTEXT).ids)[-kept:]
    with torch.no_grad():
        shifted = independent_figures(model(torch.tensor([ids[:-1]])).logits[0, -1])
    served_and_recorded(predictor, text, SuggestionPolicy(), store=store)
    row = store.rows()[-1]
    assert abs(row["top1_prob"] - shifted[0]) + abs(row["entropy_nats"] - shifted[1]) > 1e3 * tol


def test_input_quality_counts_unseen_characters_and_the_cut_to_the_window_the_suggestion_reads(
    trained_bundle, tmp_path
):
    """A suggestion reads the last prompt_window(L, MAX_CHARS) tokens, so a text longer than that but within the
    context (the issue's 105-128 characters of 128) is truncated: the flag describes what the suggestion reads."""
    store = TelemetryStore(tmp_path / "t.db")
    predictor = TransformerPredictor(trained_bundle.model, trained_bundle.tokenizer)
    L = trained_bundle.config.context_length
    window = prompt_window(L, MAX_CHARS)
    assert window < L
    vocab = set(trained_bundle.tokenizer.chars)
    texts = ["é∑ é", "x" * (L + 5) + "é", "def add(a, b):", "é" + "x" * (window - 1), "é" + "x" * window]
    texts.append("é" * (L - window) + "x" * (window - 1))  # between the window and the context: truncated
    for text in texts:
        served_and_recorded(predictor, text, SuggestionPolicy(), surface="page", store=store)
    for text, row in zip(texts, store.rows(), strict=True):
        assert row["prompt_chars"] == len(text)
        assert row["unseen_chars"] == sum(c not in vocab for c in text[-window:])  # what the suggestion reads
        assert row["truncated"] == (len(text) > window)
    assert [r["truncated"] for r in store.rows()] == [False, True, False, False, True, True]


class Broken:
    """A predictor whose every forward pass fails."""

    kind = "broken"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def reads(self, max_new):
        return MAX_CONTEXT

    def log_probs(self, ids, positions):
        raise RuntimeError("weights went missing")

    def continuations(self, contexts, max_new):
        raise RuntimeError("weights went missing")
        yield


def test_an_error_in_serving_is_recorded_and_raised_as_before(trained_bundle, tmp_path):
    store = TelemetryStore(tmp_path / "t.db")
    with pytest.raises(RuntimeError, match="weights went missing"):
        served_and_recorded(Broken(trained_bundle.tokenizer), "def", SuggestionPolicy(), store=store)
    [row] = store.rows()
    assert row["error"] == "RuntimeError: weights went missing" and row["top1_prob"] is None
    assert row["shown"] is None and row["prompt_chars"] == 3


def test_a_broken_store_changes_nothing_that_is_served(ngram, tmp_path):
    (tmp_path / "file").write_text("not a folder")
    store = TelemetryStore(tmp_path / "file" / "t.db")
    policy = policy_from_manifest(ngram.manifest)
    for text in PROMPTS:
        s, event_id = served_and_recorded(ngram.predictor, text, policy, surface="page", store=store)
        assert s == served(ngram.predictor, text, policy) and event_id is None
    assert store.health().failed == len(PROMPTS)


@pytest.mark.parametrize(
    "suggestion, before, after, expected",
    [
        ("rn a", "    retu", "    return a + b", "accepted"),  # went on with all of it
        ("rn a", "    retu", "    return a", "accepted"),  # exactly it (Accept)
        ("rn a", "    retu", "    retu", None),  # nothing typed yet
        ("rn a", "    retu", "    retur", None),  # a strict prefix of it: undecided
        ("rn a", "    retu", "    return", None),
        ("rn a", "    retu", "    return b", "typed_other"),  # diverged
        ("rn a", "    retu", "    retx", "typed_other"),
        ("rn a", "    retu", "    re", "typed_other"),  # deleted back before the cursor
        ("rn a", "    retu", "x   retu", "typed_other"),  # edited before the cursor
        ("", "abc", "abcd", None),  # no suggestion: nothing to decide
    ],
)
def test_outcome_rules(suggestion, before, after, expected):
    assert outcome(suggestion, before, after) == expected


def test_the_cursor_slices_are_the_evaluations_labels_of_the_next_position():
    doc = Document("toy", TOY[:400])
    labels = slice_labels([doc])
    for i in range(len(doc.text)):
        got = position_slices(doc.text[:i])
        assert got["column_bucket"] == labels["column"][i], i
        line = doc.text[:i].rsplit("\n", 1)[-1]
        if line.strip() or doc.text[i] not in " \t":  # the line's indentation is complete at the cursor
            assert got["indent"] == labels["indent"][i], i


@pytest.mark.numerics
def test_completions_are_recorded_with_the_first_steps_distribution(trained_bundle, tmp_path):
    bundle = trained_bundle
    store = TelemetryStore(tmp_path / "t.db")
    sample = SampleConfig(temperature=0.0, max_new_tokens=12)
    ids = bundle.tokenizer.encode("def add(")
    with recording_completion(bundle.tokenizer, bundle.config.context_length, "def add(", version=bundle.version,
                              surface="cli", store=store) as recorder:  # fmt: skip
        steps = list(generate(bundle.model, ids, sample, use_cache=True))
        for step in steps:
            recorder.step(step)
    first = steps[0].logits
    done, event_id = served_completion(bundle.model, bundle.tokenizer, "def add(", sample, version=bundle.version,
                                       surface="page", store=store)  # fmt: skip
    assert done.tokens == complete(bundle.model, bundle.tokenizer, ids, sample, seed=0).tokens  # as served
    streamed, page = store.rows()
    top1, entropy = independent_figures(first)
    tol = allowance(torch.float64, bundle.config.vocab_size)  # float64 softmax of the same float32 logits
    assert abs(streamed["top1_prob"] - top1) <= tol and abs(streamed["entropy_nats"] - entropy) <= tol
    assert streamed["kind"] == page["kind"] == "completion" and page["id"] == event_id
    assert streamed["suggestion_chars"] == sum(s.token != EOS_ID for s in steps) and page["suggestion_chars"] == len(
        done.tokens
    )
    # The page's extra forward pass reads the same window as generation's first step (float32, its own rounding).
    assert abs(page["top1_prob"] - top1) <= allowance(
        torch.float32, model_terms(bundle.config) + bundle.config.vocab_size, float(first.abs().max())
    )


def test_the_command_line_records_suggest_and_generate(trained_bundle_path, tmp_path, monkeypatch, capsys):
    from cli.main import main as cli_main

    monkeypatch.setenv("LAB_TELEMETRY_DB", str(tmp_path / "cli.db"))
    prompt = "def add(a, b):\n    ret"
    assert cli_main(["suggest", "--bundle", str(trained_bundle_path), "--prompt", prompt, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert cli_main(["generate", "--bundle", str(trained_bundle_path), "--prompt", prompt, "--max-new-tokens", "9",
                     "--temperature", "0", "--completion-only"]) == 0  # fmt: skip
    completion = capsys.readouterr().out.rstrip("\n")
    suggestion, generated = TelemetryStore(tmp_path / "cli.db").rows()
    assert (suggestion["surface"], suggestion["kind"], generated["kind"]) == ("cli", "suggestion", "completion")
    assert suggestion["version"] == printed["version"] == generated["version"]
    assert suggestion["suggestion_chars"] == len(printed["suggestion"]) and suggestion["prompt_chars"] == len(prompt)
    assert generated["suggestion_chars"] == len(completion) and generated["top1_prob"] is not None


@pytest.mark.numerics
def test_a_shown_completion_is_recorded_from_the_prompt_it_read_without_encoding_it_again(trained_bundle, tmp_path):
    """record_completion takes the page's prompt (encode_for_model with room for the longest suggestion): its input
    quality is that prompt's, and the first step's distribution is the model's after exactly its ids."""
    from core.telemetry.completions import record_completion

    bundle = trained_bundle
    L = bundle.config.context_length
    window = prompt_window(L, MAX_CHARS)
    text = "é" + ("def add(a, b):\n    return a + b\n" * 8)[: L - 2]  # longer than the window, within the context
    template = bundle.manifest["prompt_template"]
    prompt = encode_for_model(bundle.tokenizer, text, L, room=MAX_CHARS, template=template)
    assert prompt.window == window and prompt.truncated and prompt.unseen == 0  # the é is cut
    sample = SampleConfig(temperature=0.0, max_new_tokens=5)
    done = complete(bundle.model, bundle.tokenizer, prompt.ids, sample)
    store = TelemetryStore(tmp_path / "t.db")
    assert record_completion(store, bundle.model, prompt, done, 1.5, version="v", surface="page") is not None
    [row] = store.rows()
    assert (row["prompt_chars"], row["unseen_chars"], row["truncated"]) == (len(text), 0, 1)
    assert (row["suggestion_chars"], row["latency_ms"], row["kind"]) == (len(done.tokens), 1.5, "completion")
    ids = bundle.tokenizer.encode(text)[-window:]
    with torch.no_grad():
        logits = bundle.model(torch.tensor([ids])).logits[0, -1]  # (V,) a plain forward over the window
    top1, entropy = independent_figures(logits)
    tol = allowance(torch.float32, model_terms(bundle.config) + bundle.config.vocab_size, float(logits.abs().max()))
    assert abs(row["top1_prob"] - top1) <= tol and abs(row["entropy_nats"] - entropy) <= tol
