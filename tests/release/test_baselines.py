"""core.release.baselines: proper n-gram and rule distributions, Witten-Bell by hand, the rule's and the n-gram's
suggestions through the one policy, and baseline bundles that round-trip and refuse tampering."""

import json
import math
import shutil

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from core.model.bundle import write_manifest
from core.model.bundle_checks import MANIFEST, BundleError
from core.model.corpus import Document, corpus_from_text
from core.model.tokenizer import CharTokenizer
from core.release.baselines.baseline_bundle import (
    COUNTS,
    load_any,
    load_baseline,
    save_baseline,
    train_baseline,
    verify_any,
    verify_baseline,
)
from core.release.baselines.ngram import NGramModel, train_ngram
from core.release.baselines.rule import train_rule
from core.release.serving.policy import SuggestionPolicy, propose, suggestion

TEXT = "\n\n".join(f"def f{i}(self, x):\n    return self.value + x * {i % 5}\n" for i in range(40))
TOK = CharTokenizer.from_text(TEXT)
DOCS = [Document(f"d{i}", TEXT[i * 200 : (i + 1) * 200]) for i in range(len(TEXT) // 200 + 1)]
NGRAM = train_ngram(DOCS, TOK, order=4)
RULE = train_rule(DOCS, TOK)


@pytest.mark.numerics
@given(st.lists(st.integers(0, TOK.vocab_size - 1), min_size=1, max_size=12))
def test_ngram_and_rule_rows_are_distributions(prefix):
    for model in (NGRAM, RULE):
        rows = model.log_probs(prefix, range(1, len(prefix) + 1))  # (P, V)
        assert rows.shape == (len(prefix), TOK.vocab_size)
        probs = rows.exp()
        assert torch.all(probs > 0)  # add-k at the bottom: no event is impossible, the loss stays finite
        torch.testing.assert_close(probs.sum(-1), torch.ones(len(prefix), dtype=torch.float64), atol=1e-12, rtol=0)


@pytest.mark.numerics
def test_witten_bell_by_hand():
    tok = CharTokenizer.from_text("ab")  # V = 6: four special tokens, 'a', 'b'
    model = train_ngram([Document("d", "abab")], tok, order=2, add_k=0.5)  # stream: a b a b <eos>
    # unigram: a 2, b 2, <eos> 1 of N = 5; P0(a) = (2 + 0.5) / (5 + 0.5 * 6) = 0.3125
    # context 'b' was followed by 'a' once and <eos> once: c(b) = 2, T(b) = 2
    # P(a | b) = (1 + 2 * 0.3125) / (2 + 2) = 0.40625; P(b | b) = (0 + 2 * P0(b)) / 4 = 0.15625
    row = model.log_probs(tok.encode("ab"), range(2, 3))[0].exp()
    assert row[tok.encode("a")[0]].item() == pytest.approx(0.40625, rel=1e-12)
    assert row[tok.encode("b")[0]].item() == pytest.approx(0.15625, rel=1e-12)


@pytest.mark.numerics
def test_rule_completes_the_most_frequent_word_and_mixes_its_letters_with_the_unigram():
    tok = CharTokenizer.from_text("self sel seldom sex .")
    docs = [Document("d", "self self self seldom sex sel .")]
    rule = train_rule(docs, tok)
    # "self" (3) beats "seldom", "sex", "sel": the greedy completion of "se" is "lf", then the word ends
    assert tok.decode(propose(rule, tok.encode("x = se")).completion[:2]) == "lf"
    assert suggestion(rule, tok.encode("x = se"), SuggestionPolicy(threshold=0.05)).text.startswith("lf")
    # after "sel": continuations f x3, d x1 (n = 4); "sel" ends a word once (e = 1): lam = 4 / (4 + 1 + 1)
    lam = 4 / 6
    row = rule.log_probs(tok.encode(" sel"), range(4, 5))[0].exp()
    p0 = rule.p0
    assert row[tok.encode("f")[0]].item() == pytest.approx(lam * 3 / 4 + (1 - lam) * p0[tok.encode("f")[0]])
    assert row[tok.encode("d")[0]].item() == pytest.approx(lam * 1 / 4 + (1 - lam) * p0[tok.encode("d")[0]])


def greedy_by_hand(model, ids, steps):
    """Reference: the most likely visible token (ids >= 4, lowest on ties) again and again, with the running
    product of its probabilities, from log_probs rows one at a time; stops where <eos> beats them all."""
    ids, out, p = list(ids), [], 1.0
    for _ in range(steps):
        row = model.log_probs(ids + [0], range(len(ids), len(ids) + 1))[0].exp().tolist()  # (V,)
        best = max(range(4, len(row)), key=lambda i: (row[i], -i))
        if row[2] > row[best] or p * row[best] < 0.05:
            break
        p *= row[best]
        out.append(best)
        ids.append(best)
    return out, p


@pytest.mark.numerics
@pytest.mark.parametrize("model", [NGRAM, RULE], ids=["ngram", "rule"])
@pytest.mark.parametrize("text", ["    return sel", "    return ", "def f1", "(self, "])
def test_baseline_proposals_are_the_greedy_completion_by_hand(model, text):
    proposal = propose(model, TOK.encode(text))
    tokens, p = greedy_by_hand(model, TOK.encode(text), 24)
    assert list(proposal.completion) == tokens
    if tokens:
        assert proposal.probabilities[-1] == pytest.approx(p, rel=1e-12)


@pytest.mark.numerics
def test_ngram_suggests_the_rest_of_self():
    s = suggestion(NGRAM, TOK.encode("    return "), SuggestionPolicy(threshold=0.05))
    assert s.completion.startswith("self.value + x * ")  # every training line goes on so
    assert s.text.startswith("self") and "self.value + x * ".startswith(s.text) and s.shown


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    corpus = corpus_from_text("toy.py", TEXT)
    root = tmp_path_factory.mktemp("baselines")
    paths = {}
    for kind in ("ngram", "rule"):
        model = train_baseline(kind, corpus, val_fraction=0.2, seed=1, order=4)
        paths[kind] = (save_baseline(root / kind, model, corpus=corpus, val_fraction=0.2, seed=1), model)
    return paths, corpus


@pytest.mark.parametrize("kind", ["ngram", "rule"])
def test_baseline_bundles_round_trip(saved, kind, tmp_path):
    (path, model), corpus = saved[0][kind], saved[1]
    loaded = load_baseline(path)
    manifest = json.loads((path / MANIFEST).read_text())
    assert loaded.kind == kind == manifest["kind"] and manifest["files"].keys() == {COUNTS}
    assert manifest["training"]["config"] == {"val_fraction": 0.2, "seed": 1}
    assert manifest["corpus"]["fingerprint"] == corpus.fingerprint
    ids = model.tokenizer.encode("    return self.value")
    torch.testing.assert_close(
        loaded.predictor.log_probs(ids, range(1, len(ids))), model.log_probs(ids, range(1, len(ids))), atol=0, rtol=0
    )
    assert propose(loaded.predictor, ids[:-3]) == propose(model, ids[:-3])
    again = save_baseline(tmp_path / "again", model, corpus=corpus, val_fraction=0.2, seed=1)
    assert load_baseline(again).version == loaded.version  # same counts, same version
    assert type(load_any(path).predictor) is type(model) and verify_any(path) == []


@pytest.mark.parametrize(
    "tamper, words",
    [
        (lambda p: (p / COUNTS).write_text((p / COUNTS).read_text().replace("1", "2", 1)), "sha256 mismatch"),
        (lambda p: (p / "notes.txt").write_text("hi"), "unexpected file 'notes.txt'"),
        (lambda p: (p / COUNTS).unlink(), "counts.json is missing"),
    ],
)
def test_tampered_baseline_bundles_are_refused(saved, tmp_path, tamper, words):
    path = shutil.copytree(saved[0]["ngram"][0], tmp_path / "copy")
    tamper(path)
    with pytest.raises(BundleError, match=words.replace("(", r"\(")):
        load_baseline(path)
    assert any(words in p for p in verify_baseline(path))


def test_an_edited_manifest_is_refused(saved, tmp_path):
    path = shutil.copytree(saved[0]["rule"][0], tmp_path / "copy")
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["architecture"]["add_k"] = 5.0  # a different model under the old version
    write_manifest(path, manifest)
    with pytest.raises(BundleError, match="does not match its content"):
        load_any(path)


@pytest.mark.numerics
def test_probabilities_stay_proper_for_unseen_contexts():
    unseen = TOK.encode("zzzz") if "z" in TOK.chars else [3, 3, 3, 3]  # <unk> contexts never occurred
    row = NGRAM.log_probs(unseen, range(4, 5))[0].exp()
    assert math.isclose(float(row.sum()), 1.0, abs_tol=1e-12)
    assert isinstance(NGRAM, NGramModel) and NGRAM.order == 4
