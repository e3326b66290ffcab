"""core.release.evaluation: metrics against a hand computation, the transformer behind the predictor interface,
and the evaluation command's JSON."""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from cli.main import main
from core.model.bundle import save_bundle
from core.model.corpus import Document, load_corpus, split_documents
from core.model.gpt import GPT, PRESETS
from core.model.tokenizer import CharTokenizer
from core.model.training import TrainConfig, train
from core.release.baselines import greedy_completion
from core.release.evaluation import EvalConfig, TransformerPredictor, evaluate_predictor, held_out, wilson

TEXT20 = "ab ab abc ac ab abab"  # 20 characters
FIRST = {"a": "b", "b": " ", " ": "a", "c": " "}  # the toy's most likely next character
SECOND = {"a": "c", "b": "c", " ": "c", "c": "a"}  # its second choice


class Toy:
    """Deterministic bigram predictor: 0.6 on FIRST[prev], 0.3 on SECOND[prev], 0.1 shared by the rest."""

    kind = "toy"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

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

    def suggest(self, ids, max_chars=16):
        return greedy_completion(self, ids, max_chars)


def test_metrics_match_a_hand_computation_on_20_characters():
    tok = CharTokenizer.from_text(TEXT20)  # ids: 4 ' ', 5 'a', 6 'b', 7 'c'; V = 8
    report = evaluate_predictor(
        Toy(tok), [Document("t", TEXT20)], EvalConfig(min_slice_positions=1), measure_latency=False
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
    # Typing positions 1..19. After ' ' the toy suggests "ab" (a, b, then ' ' ends the word); after 'a' only
    # "b" (one character: not shown); after 'b' or 'c' nothing. Offers at 3, 6, 10, 13, 16; the text has
    # "ab" there except at 10 ("ac"): 4 accepted, each saving 2 - 1 = 1 keystroke, over 19 characters.
    assert (m.offered, m.accepted, m.typed_chars) == (5, 4, 19)
    assert m.acceptance_rate == pytest.approx(0.8)
    assert m.keystrokes_saved_per_100 == pytest.approx(100 * 4 / 19)
    slices = {s.label: s.metrics for s in report.slices}
    assert slices["char_class=whitespace"].top1 == 1.0 and slices["char_class=whitespace"].positions == 5
    assert slices["char_class=letter"].positions == 14 and slices["char_class=letter"].top1 == pytest.approx(11 / 14)
    assert slices["char_class=end of document"].top1 == 0.0
    worst = {w.metric: w for w in report.worst}
    assert worst["top1"].slice == "char_class=end of document"


def test_wilson_interval_matches_the_published_value():
    ci = wilson(8, 10)  # 95%: 0.4902 .. 0.9433 (Newcombe 1998, table I)
    assert (ci.low, ci.high) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson(0, 0) is None
    assert wilson(0, 5).low == 0.0 and wilson(5, 5).high == 1.0


def test_caps_sample_whole_chunks_reproducibly():
    text = "ab ab abc ac ab abab " * 30
    tok = CharTokenizer.from_text(text)
    config = EvalConfig(max_positions=100, chunk=20, typing_chars=60, segment_chars=20, min_slice_positions=1)
    a = evaluate_predictor(Toy(tok), [Document("t", text)], config, measure_latency=False)
    b = evaluate_predictor(Toy(tok), [Document("t", text)], config, measure_latency=False)
    assert 100 - 20 < a.overall.positions <= 100 and a.overall == b.overall  # whole chunks (the last may be short)
    assert 60 <= a.overall.typed_chars <= 60 + 16


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    tok = CharTokenizer.from_text("def f(x):\n    return x\n")
    return GPT(dataclasses.replace(PRESETS["tiny"], vocab_size=tok.vocab_size)).eval(), tok


def test_transformer_rows_are_the_full_forward_pass_and_suggestions_agree(tiny_model):
    model, tok = tiny_model
    predictor = TransformerPredictor(model, tok)
    ids = tok.encode("def f(x):\n    return x\ndef")  # 26 tokens < context 32
    rows = predictor.log_probs(ids, range(1, len(ids) + 1))  # (26, V): row t predicts ids[t] from ids[:t]
    with torch.no_grad():
        full = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), dim=-1)  # (26, V)
    torch.testing.assert_close(rows, full, atol=1e-6, rtol=0)
    assert torch.allclose(rows.exp().sum(-1), torch.ones(len(ids), dtype=torch.float64))
    context = ids[-(32 - 8) :]
    cached = predictor.suggest(ids, 8, use_cache=True)
    assert cached == predictor.suggest(ids, 8, use_cache=False) == greedy_completion(predictor, context, 8)


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
    out = json.loads(capsys.readouterr().out)
    for key in (
        "predictor",
        "version",
        "held_out",
        "config",
        "overall",
        "slices",
        "worst",
        "latency",
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
    ):
        assert key in out["overall"], key
    assert {"char_class", "column", "indent", "document"} == {s["family"] for s in out["slices"]}
    for mode in ("cached", "uncached"):
        assert {"p50_ms", "p95_ms"} <= set(out["latency"][mode])
    assert out["held_out"]["documents"] == [d.name for d in split_documents(corpus, 0.2, 3)[1]]
    assert out["held_out"]["split_recorded"] is True and out["warnings"] == []
    assert [b["predictor"] for b in out["baselines"]] == ["rule", "ngram"]
    loss_row = next(r for r in out["comparison"] if r["metric"].startswith("held-out loss"))
    assert {"rule", "ngram", "transformer"} <= set(loss_row)
    assert loss_row["transformer"] == pytest.approx(out["overall"]["loss"])
    assert np.isfinite([loss_row["rule"], loss_row["ngram"]]).all()


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
