"""core.release.evaluation.evaluation: metrics against a hand computation (the typist shown the one suggestion policy),
intervals by bootstrap over documents, the transformer behind the predictor interface, and the evaluation
command's JSON."""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from cli.main import main
from core.agreement import float64_copy
from core.model.bundle import save_bundle
from core.model.corpus import Document, load_corpus, split_documents
from core.model.gpt import GPT, PRESETS
from core.model.tokenizer import CharTokenizer
from core.model.train_config import TrainConfig
from core.model.training import train
from core.release.evaluation.bootstrap import document_interval
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.evaluation import evaluate_predictor
from core.release.evaluation.held_out import held_out
from core.release.evaluation.tuning import THRESHOLDS
from core.release.serving.policy import DEFAULT_POLICY, SuggestionPolicy
from core.release.serving.predictor import MAX_CONTEXT, continuations_by_log_probs
from core.release.serving.transformer_predictor import TransformerPredictor

TEXT20 = "ab ab abc ac ab abab"  # 20 characters
FIRST = {"a": "b", "b": " ", " ": "a", "c": " ", "": "a"}  # the toy's most likely next character ("": <eos>)
SECOND = {"a": "c", "b": "c", " ": "c", "c": "a", "": "c"}  # its second choice


class Toy:
    """Deterministic bigram predictor: 0.6 on FIRST[prev], 0.3 on SECOND[prev], 0.1 shared by the rest."""

    kind = "toy"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def reads(self, max_new):
        return MAX_CONTEXT  # like a baseline: no window to slide, it reads what it is handed

    def log_probs(self, ids, positions):
        V = self.tokenizer.vocab_size
        rows = []
        for t in positions:
            prev = self.tokenizer.decode([ids[t - 1]])
            p = torch.full((V,), 0.1 / (V - 2), dtype=torch.float64)
            p[self.tokenizer.encode(FIRST[prev])[0]] = 0.6
            p[self.tokenizer.encode(SECOND[prev])[0]] = 0.3
            rows.append(p.log())
        return torch.stack(rows)

    def continuations(self, contexts, max_new):
        return continuations_by_log_probs(self, contexts, max_new)


@pytest.mark.numerics
def test_metrics_match_a_hand_computation_on_20_characters():
    tok = CharTokenizer.from_text(TEXT20)  # ids: 4 ' ', 5 'a', 6 'b', 7 'c'; V = 8
    policy = SuggestionPolicy(threshold=0.3, tuned=True)
    report = evaluate_predictor(
        Toy(tok), [Document("t", TEXT20)], EvalConfig(min_slice_positions=1), policy=policy, measure_latency=False
    )
    m = report.overall
    # Targets t = 1..20 (text[t], then <eos> at 20). FIRST misses t = 8 ('c' after 'b'), 11 ('c' after 'a'),
    # 18 ('a' after 'b') and 20 (<eos>); SECOND catches 8 and 11 (both 'c'); 18 and 20 fall outside the top 3
    # (whose third entry is <pad>, the lowest id of the tied rest).
    assert m.positions == 20
    assert m.top1 == pytest.approx(16 / 20)
    assert m.top3 == pytest.approx(18 / 20)
    expected_loss = (16 * -math.log(0.6) + 2 * -math.log(0.3) + 2 * -math.log(0.1 / 6)) / 20
    assert m.loss == pytest.approx(expected_loss, rel=1e-12)
    assert m.bits_per_char == pytest.approx(expected_loss / math.log(2), rel=1e-12)
    # Typing positions 1..19 at threshold 0.3. Each greedy step multiplies by 0.6; extending stops at 0.6^6 < 0.05:
    #   after ' ': "ab ab", cuts "ab" (.36) and "ab " (.216)  -> "ab" shown
    #   after 'a': "b ab ", cuts "b " (.36) and "b ab" (.1296) -> "b " shown
    #   after 'b' or 'c': " ab a", cuts " ab" (.216), " ab " (.1296) -> nothing clears 0.3
    # The typist: 1 "b " ok (Tab), 3 "ab" ok, 5 -, 6 "ab" ok, 8 -, 9 -, 10 "ab" but "ac", 11 "b " but "c ",
    # 12 -, 13 "ab" ok, 15 -, 16 "ab" ok, 18 -, 19 "b " but "b" + <eos>. 8 shown, 5 accepted, 1 saved each.
    assert (m.offered, m.accepted, m.typed_chars) == (8, 5, 19)
    assert m.acceptance_rate == pytest.approx(5 / 8)
    assert m.keystrokes_saved_per_100 == pytest.approx(100 * 5 / 19)
    assert m.shown_per_100 == pytest.approx(100 * 8 / 19)
    assert m.documents == 1 and m.keystrokes_saved_ci is None and m.loss_ci is None  # one document: no interval
    assert report.policy == policy.to_dict() and report.latency is None
    untuned = evaluate_predictor(Toy(tok), [Document("t", TEXT20)], EvalConfig(), measure_latency=False).overall
    assert untuned.offered == 0  # at the default 0.5 nothing clears: the best cuts have .36
    slices = {s.label: s.metrics for s in report.slices}
    assert slices["char_class=whitespace"].top1 == 1.0 and slices["char_class=whitespace"].positions == 5
    assert slices["char_class=letter"].positions == 14 and slices["char_class=letter"].top1 == pytest.approx(11 / 14)
    assert slices["char_class=end of document"].top1 == 0.0
    worst = {w.metric: w for w in report.worst}
    assert worst["top1"].slice == "char_class=end of document"


@pytest.mark.numerics
def test_intervals_resample_documents():
    """Every overall interval is core.release.evaluation.bootstrap.document_interval of per-document sums, rebuilt here
    from the per-document slices (each document's own figures times its own counts)."""
    texts = ["ab ab abc ac ab abab", "ab ab ab ab", "ac ac abc", "abab ab cab ab ab"]
    docs = [Document(f"d{i}", t) for i, t in enumerate(texts)]
    tok = CharTokenizer.from_text("".join(texts))
    config = EvalConfig(min_slice_positions=1, seed=2)
    report = evaluate_predictor(Toy(tok), docs, config, policy=SuggestionPolicy(threshold=0.3), measure_latency=False)
    per_doc = [next(s.metrics for s in report.slices if s.label == f"document=d{i}") for i in range(len(docs))]
    covered = np.array([m.typed_chars for m in per_doc], dtype=float)
    saved = np.array([m.keystrokes_saved_per_100 * m.typed_chars / 100 for m in per_doc])
    positions = np.array([m.positions for m in per_doc], dtype=float)
    nats = np.array([m.loss * m.positions for m in per_doc])
    offered = np.array([m.offered for m in per_doc], dtype=float)
    accepted = np.array([m.accepted for m in per_doc], dtype=float)
    o = report.overall
    assert o.documents == 4 and o.typed_chars == covered.sum() and o.positions == positions.sum()

    def bootstrap(num, den, scale=1.0):
        ci = document_interval(np.round(num, 9), den, scale=scale, confidence=0.95, seed=2)
        return pytest.approx((ci.low, ci.high), rel=1e-9)

    assert (o.keystrokes_saved_ci.low, o.keystrokes_saved_ci.high) == bootstrap(saved, covered, 100.0)
    assert (o.loss_ci.low, o.loss_ci.high) == bootstrap(nats, positions)
    assert (o.acceptance_ci.low, o.acceptance_ci.high) == bootstrap(accepted, offered)
    assert o.loss_ci.low <= o.loss <= o.loss_ci.high
    assert o.keystrokes_saved_ci.low < o.keystrokes_saved_ci.high  # the documents differ


def test_caps_sample_whole_chunks_reproducibly():
    text = "ab ab abc ac ab abab " * 30
    tok = CharTokenizer.from_text(text)
    config = EvalConfig(max_positions=100, chunk=20, typing_chars=60, segment_chars=20, min_slice_positions=1)
    a = evaluate_predictor(Toy(tok), [Document("t", text)], config, measure_latency=False)
    b = evaluate_predictor(Toy(tok), [Document("t", text)], config, measure_latency=False)
    assert 100 - 20 < a.overall.positions <= 100 and a.overall == b.overall  # whole chunks (the last may be short)
    # 3 seeded segments of at most 20 characters; an accepted suggestion may run up to max_chars - 1 past one
    assert 40 < a.overall.typed_chars <= 60 + 3 * (DEFAULT_POLICY.max_chars - 1)


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    tok = CharTokenizer.from_text("def f(x):\n    return x\n")
    return GPT(dataclasses.replace(PRESETS["tiny"], vocab_size=tok.vocab_size)).eval(), tok


@pytest.mark.numerics
def test_transformer_rows_are_the_full_forward_pass_and_continuations_agree(tiny_model):
    model, tok = tiny_model
    predictor = TransformerPredictor(model, tok)
    ids = tok.encode("def f(x):\n    return x\ndef")  # 26 tokens < context 32
    rows = predictor.log_probs(ids, range(1, len(ids) + 1))  # (26, V): row t predicts ids[t] from ids[:t]
    with torch.no_grad():
        full = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), dim=-1)  # (26, V)
    torch.testing.assert_close(rows, full, atol=1e-6, rtol=0)
    assert torch.allclose(rows.exp().sum(-1), torch.ones(len(ids), dtype=torch.float64))
    # continuations (one KV cache) against log_probs (uncached windows) along a path, on a float64 copy: the
    # context, cut by the caller to its last L - max_new = 24 tokens (a longer one is refused), then the sent tokens
    # are appended
    predictor64 = TransformerPredictor(float64_copy(model), tok)
    path = tok.encode("    return")[:8]
    with pytest.raises(ValueError, match="longer than the 24"):
        next(predictor64.continuations([ids], 8))
    steps = predictor64.continuations([ids[-24:]], 8)
    rows = [next(steps)] + [steps.send(torch.tensor([t])) for t in path[:-1]]  # 8 x (1, V)
    context = ids[-24:] + path
    want = predictor64.log_probs(context, range(24, 32)).exp()  # (8, V)
    torch.testing.assert_close(torch.cat(rows), want, atol=1e-12, rtol=0)
    assert all(r.dtype == torch.float64 and abs(float(r.sum()) - 1) < 1e-12 for r in rows)


def test_evaluate_json_has_every_field_and_uses_the_recorded_split(tmp_path, capsys):
    text = "\n\n".join(f"def f{i}(x):\n    return x * {i % 7}\n" for i in range(60))
    (tmp_path / "toy.py").write_text(text)
    corpus = load_corpus(tmp_path / "toy.py")
    cfg = TrainConfig(
        batch_size=4,
        max_iters=5,
        warmup_iters=1,
        eval_interval=5,
        eval_iters=1,
        seed=3,
        val_fraction=0.2,
        num_threads=1,
    )
    result = train(PRESETS["tiny"], cfg, corpus)
    save_bundle(
        tmp_path / "b",
        result.model,
        result.tokenizer,
        metrics=result.metrics,
        command=["test"],
        corpus=corpus,
        train_config=cfg,
    )
    code = main(
        [
            "evaluate",
            "--bundle",
            str(tmp_path / "b"),
            "--json",
            "--compare",
            "--max-positions",
            "256",
            "--typing-chars",
            "120",
            "--latency-samples",
            "2",
        ]
    )
    assert code == 0
    everything = json.loads(capsys.readouterr().out)  # one object: a summary per predictor, and the report
    assert set(everything) == {"transformer", "rule", "ngram", "report"}
    out = everything["report"]
    for key in (
        "predictor",
        "version",
        "held_out",
        "config",
        "overall",
        "slices",
        "worst",
        "latency",
        "policy",
        "tuning",
        "warnings",
        "baselines",
        "comparison",
    ):
        assert key in out, key
    for key in (
        "loss",
        "loss_ci",
        "bits_per_char",
        "top1",
        "top1_ci",
        "top3",
        "top3_ci",
        "typed_chars",
        "offered",
        "accepted",
        "acceptance_rate",
        "acceptance_ci",
        "keystrokes_saved_per_100",
        "keystrokes_saved_ci",
        "net_keystrokes_saved_per_100",
        "net_keystrokes_saved_ci",
        "shown_per_100",
        "documents",
    ):
        assert key in out["overall"], key
    # the net figure is the gross less the price of each suggestion shown and not taken
    # (core.release.evaluation.utility)
    o, cost = out["overall"], out["policy"]["attention_cost"]
    assert cost == 1.0
    wrong = o["offered"] - o["accepted"]
    gross_saved = o["keystrokes_saved_per_100"] * o["typed_chars"] / 100
    assert o["net_keystrokes_saved_per_100"] == pytest.approx(100 * (gross_saved - cost * wrong) / o["typed_chars"])
    assert {"char_class", "column", "indent", "document"} == {s["family"] for s in out["slices"]}
    assert set(out["latency"]) == {"p50_ms", "p95_ms", "mean_ms", "samples"} and out["latency"]["samples"] == 2
    assert out["latency"]["p50_ms"] <= out["latency"]["p95_ms"]
    val_docs = split_documents(corpus, 0.2, 3)[1]
    assert out["held_out"]["documents"] == [d.name for d in val_docs]
    assert out["held_out"]["split_recorded"] is True
    # the bundle was saved without tuning: evaluated at the default threshold, and told so
    assert out["policy"] == DEFAULT_POLICY.to_dict() and out["tuning"] == []
    assert len(out["warnings"]) == 1 and "no tuned suggestion threshold" in out["warnings"][0]
    assert [b["predictor"] for b in out["baselines"]] == ["rule", "ngram"]
    for b in out["baselines"]:  # each baseline tuned on the validation documents, the grid kept with it
        assert b["policy"]["tuned"] is True and b["policy"]["threshold"] in THRESHOLDS
        assert [r["threshold"] for r in b["tuning"]] == list(THRESHOLDS)
        best = max(r["net_keystrokes_saved_per_100"] for r in b["tuning"])  # tuned on the net figure
        assert b["policy"]["threshold"] == max(
            r["threshold"] for r in b["tuning"] if r["net_keystrokes_saved_per_100"] == best
        )
        assert b["policy"]["attention_cost"] == cost  # at the bundle's price
        summary = everything[b["predictor"]]
        assert summary["threshold"] == b["policy"]["threshold"] and summary["attention_cost"] == cost
        assert summary["keystrokes_saved_per_100"] == b["overall"]["keystrokes_saved_per_100"]
        assert summary["net_keystrokes_saved_per_100"] == b["overall"]["net_keystrokes_saved_per_100"]
        net_ci = b["overall"]["net_keystrokes_saved_ci"]
        assert summary["net_keystrokes_saved_ci"] == (None if net_ci is None else [net_ci["low"], net_ci["high"]])
    loss_row = next(r for r in out["comparison"] if r["metric"].startswith("held-out loss"))
    assert {"rule", "ngram", "transformer"} <= set(loss_row)
    assert loss_row["transformer"] == pytest.approx(out["overall"]["loss"])
    assert np.isfinite([loss_row["rule"], loss_row["ngram"]]).all()
    assert everything["transformer"]["loss"] == out["overall"]["loss"]
    ci = out["overall"]["loss_ci"]
    if len(val_docs) >= 2:  # intervals resample documents
        assert ci["low"] <= out["overall"]["loss"] <= ci["high"]


def test_held_out_uses_the_recorded_split_and_warns_when_it_cannot(tmp_path):
    (tmp_path / "a.txt").write_text("\n\n".join(f"para {i} " * 20 for i in range(30)))
    (tmp_path / "b.txt").write_text("\n\n".join(f"other {i} " * 20 for i in range(30)))
    corpus = load_corpus(tmp_path / "a.txt")
    manifest = {
        "corpus": {"source": str(tmp_path / "a.txt"), "fingerprint": corpus.fingerprint},
        "training": {"config": {"val_fraction": 0.3, "seed": 7}},
    }
    split = held_out(manifest)
    assert split.recorded and split.warnings == () and split.val == split_documents(corpus, 0.3, 7)[1]
    assert "fingerprint mismatch" in held_out(manifest, str(tmp_path / "b.txt")).warnings[0]
    unrecorded = held_out({**manifest, "training": {"config": None}})
    assert (unrecorded.val_fraction, unrecorded.seed, unrecorded.recorded) == (0.1, 0, False)
    assert "records no training split" in unrecorded.warnings[0]
