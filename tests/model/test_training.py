"""core.model.training: the schedule in closed form, batches, held-out evaluation, callbacks, stopping, seeds, and the
causality probe at every evaluation with the leak stop."""

import dataclasses
import math

import pytest
import torch

from core.model import leak, training
from core.model.batches import document_stream, evaluate_loss, sample_batch
from core.model.corpus import Corpus, CorpusError, Document, corpus_from_text, fingerprint, split_documents
from core.model.gpt import PRESETS
from core.model.tokenizer import EOS_ID, CharTokenizer
from core.model.train_config import TrainConfig, learning_rate_at
from core.model.training import TrainEvent, make_optimizer, train

TINY = PRESETS["tiny"]  # context 32
TOY_TEXT = "\n\n".join(
    f"def f{i}(x):\n    return x * {i % 7} + {i % 3}\n" for i in range(120)
)  # ~4 kB of repetitive Python


def quick(**overrides) -> TrainConfig:
    base = dict(
        batch_size=8, max_iters=30, eval_interval=10, eval_iters=2, learning_rate=5e-3, min_lr=5e-4, num_threads=1
    )
    base["warmup_iters"] = min(3, overrides.get("max_iters", 30) - 1)
    return TrainConfig(**{**base, **overrides})


@pytest.fixture(scope="module")
def toy():
    return corpus_from_text("toy.py", TOY_TEXT)


# ---- the schedule --------------------------------------------------------------------------------


def test_warmup_is_linear_from_lr_over_w_to_lr():
    cfg = TrainConfig(max_iters=100, warmup_iters=10, learning_rate=1e-3, min_lr=1e-4)
    rates = [learning_rate_at(s, cfg) for s in range(10)]
    assert rates[0] == pytest.approx(1e-4) and rates[9] == pytest.approx(1e-3)
    steps = [b - a for a, b in zip(rates, rates[1:])]
    assert all(d == pytest.approx(1e-4) for d in steps)  # constant increments: a straight line


def test_cosine_matches_closed_form_and_ends_at_min_lr():
    cfg = TrainConfig(max_iters=101, warmup_iters=20, learning_rate=3e-3, min_lr=3e-4)
    span = 101 - 1 - 20
    for step in (20, 35, 60, 77, 100):
        p = (step - 20) / span
        expected = 3e-4 + (3e-3 - 3e-4) * (1 + math.cos(math.pi * p)) / 2
        assert learning_rate_at(step, cfg) == pytest.approx(expected, rel=1e-12)
    assert learning_rate_at(20, cfg) == pytest.approx(3e-3)
    assert learning_rate_at(60, cfg) == pytest.approx((3e-3 + 3e-4) / 2)  # half way down the cosine
    assert learning_rate_at(100, cfg) == pytest.approx(3e-4)
    assert learning_rate_at(500, cfg) == pytest.approx(3e-4)  # past the end it stays at min_lr
    decay = [learning_rate_at(s, cfg) for s in range(20, 101)]
    assert all(b <= a for a, b in zip(decay, decay[1:]))


def test_no_warmup_starts_at_the_peak():
    cfg = TrainConfig(max_iters=10, warmup_iters=0, learning_rate=1e-3, min_lr=0.0)
    assert learning_rate_at(0, cfg) == pytest.approx(1e-3)
    assert learning_rate_at(9, cfg) == pytest.approx(0.0, abs=1e-15)


def test_a_time_budget_anneals_by_whichever_budget_is_closer_to_its_end():
    cfg = TrainConfig(max_iters=1000, warmup_iters=0, learning_rate=1e-3, min_lr=1e-4, max_seconds=100.0)
    assert learning_rate_at(10, cfg, elapsed=50.0) == pytest.approx(5.5e-4)  # half the time: mid-cosine
    assert learning_rate_at(10, cfg, elapsed=100.0) == pytest.approx(1e-4)  # time is up: min_lr
    assert learning_rate_at(999, cfg, elapsed=1.0) == pytest.approx(1e-4)  # steps are up first
    assert learning_rate_at(10, cfg) == learning_rate_at(10, dataclasses.replace(cfg, max_seconds=None))


@pytest.mark.parametrize(
    "bad, words",
    [
        (dict(warmup_iters=30, max_iters=30), "warmup_iters"),
        (dict(min_lr=1.0, learning_rate=0.1), "min_lr"),
        (dict(batch_size=0), "batch_size"),
        (dict(max_seconds=0), "max_seconds"),
        (dict(val_fraction=1.0), "val_fraction"),
        (dict(causal="no"), "causal"),
        (dict(num_threads=0), "num_threads"),
        (dict(num_threads=100_000), r"num_threads must be an integer in 1\.\.256"),  # crashed torch (issue 35)
        (dict(eval_iters=1_000_000_000), r"eval_iters must be an integer in 1\.\.1000"),
        (dict(learning_rate=float("nan")), "learning_rate"),
    ],
)
def test_train_config_refuses_bad_values_by_name(bad, words):
    with pytest.raises(ValueError, match=words):
        TrainConfig(**bad)


# ---- data ----------------------------------------------------------------------------------------


def test_document_stream_joins_documents_with_eos():
    tok = CharTokenizer.from_text("abc")
    stream = document_stream([Document("1", "ab"), Document("2", "c")], tok)
    a, b, c = (tok.encode(ch)[0] for ch in "abc")
    assert stream.tolist() == [a, b, EOS_ID, c, EOS_ID]


def test_batches_are_contiguous_windows_with_targets_shifted_by_one():
    stream = torch.arange(100, 200)  # values identify their positions
    x, y = sample_batch(stream, 6, 10, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (6, 10)
    assert torch.equal(y, x + 1)  # next token of a contiguous window
    assert torch.equal(x[:, 1:] - x[:, :-1], torch.ones(6, 9, dtype=torch.long))
    assert int(y.max()) <= 199
    x2, _ = sample_batch(stream, 6, 10, torch.Generator().manual_seed(0))
    assert torch.equal(x, x2)


def test_weight_decay_only_on_matrices():
    from core.model.gpt import GPT

    model = GPT(dataclasses.replace(TINY, vocab_size=20))
    opt = make_optimizer(model, TrainConfig(weight_decay=0.1))
    decayed, plain = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decayed["params"]) and all(p.dim() == 1 for p in plain["params"])
    assert len(decayed["params"]) + len(plain["params"]) == len(list(model.parameters()))


@pytest.mark.numerics
def test_the_fused_optimizer_takes_the_steps_of_the_plain_per_parameter_adamw():
    """make_optimizer's fused AdamW against torch's plain loop (foreach=False), three steps in float64 with the
    same gradients: elementwise arithmetic, so they agree to a few float64 rounding units."""
    from core.agreement import agreement
    from core.model.gpt import GPT

    torch.manual_seed(0)
    fused_model = GPT(dataclasses.replace(TINY, vocab_size=20)).double()
    plain_model = GPT(dataclasses.replace(TINY, vocab_size=20)).double()
    plain_model.load_state_dict(fused_model.state_dict())
    before = fused_model.token_embedding.weight.detach().clone()
    cfg = TrainConfig(weight_decay=0.1, learning_rate=1e-2)
    fused = make_optimizer(fused_model, cfg)
    assert all(group["fused"] for group in fused.param_groups)
    plain = torch.optim.AdamW(
        [
            {"params": g["params"], "weight_decay": g["weight_decay"]}
            for g in make_optimizer(plain_model, cfg).param_groups
        ],
        lr=cfg.learning_rate,
        betas=(cfg.beta1, cfg.beta2),
        foreach=False,
    )
    for _ in range(3):
        grads = [torch.randn_like(p) for p in fused_model.parameters()]
        for model, opt in ((fused_model, fused), (plain_model, plain)):
            for p, g in zip(model.parameters(), grads):
                p.grad = g.clone()
            opt.step()
    for (name, a), b in zip(fused_model.named_parameters(), plain_model.parameters()):
        result = agreement(a.detach(), b.detach(), terms=3 * 8)  # 3 steps of ~8 operations per entry
        assert result.passed, f"{name}: {result.describe()}"
    assert (fused_model.token_embedding.weight - before).abs().max() > 1e-3  # the steps moved the weights


# ---- training ------------------------------------------------------------------------------------


@pytest.mark.smoke
@pytest.mark.numerics
def test_initial_loss_is_near_ln_v_and_a_few_steps_reduce_it(toy):
    result = train(TINY, quick(max_iters=40), toy)
    first, last = result.history[0], result.history[-1]
    V = result.tokenizer.vocab_size
    assert first.step == 0 and abs(first.val_loss - math.log(V)) < 0.15
    assert last.train_loss < first.train_loss - 1.0
    assert last.val_loss < first.val_loss - 1.0
    assert result.metrics["iters"] == 40 and result.metrics["stop_reason"] == "max_iters"
    assert set(result.metrics) >= {"train_loss", "val_loss", "iters", "seconds", "tokens_per_second"}
    assert result.model.config.vocab_size == V == len(set(toy.text)) + 4
    assert not result.model.training


@pytest.mark.numerics
def test_evaluation_uses_only_the_validation_documents():
    # 10 documents; those the split holds out are filled with characters no training document has.
    names = [f"doc{i}" for i in range(10)]
    placeholder = tuple(Document(n, "p" * 80) for n in names)
    _, val = split_documents(Corpus(placeholder, fingerprint(placeholder), "t"), val_fraction=0.2, seed=0)
    held_out = {d.name for d in val}
    docs = tuple(Document(n, ("xy" if n in held_out else "ab") * 100) for n in names)
    corpus = Corpus(docs, fingerprint(docs), "t")
    result = train(TINY, quick(val_fraction=0.2, max_iters=40), corpus)
    assert set(result.val_documents) == held_out and held_out.isdisjoint(result.train_documents)
    V = result.tokenizer.vocab_size
    # Trained on "abab": the train sample is easy, the unseen "xyxy" documents are not. Had the
    # evaluation read training documents, both losses would be equally low.
    train_loss, val_loss = result.metrics["train_loss"], result.metrics["val_loss"]
    assert train_loss < 0.25 * math.log(V), (train_loss, val_loss)
    assert val_loss > train_loss + 1.0, (train_loss, val_loss)


@pytest.mark.numerics
def test_evaluate_loss_is_seeded_and_restores_the_mode(toy):
    result = train(TINY, quick(max_iters=2), toy)
    model, tok = result.model, result.tokenizer
    stream = document_stream(toy.documents, tok)
    model.train()
    a = evaluate_loss(model, stream, batch_size=4, iters=3, seed=7)
    b = evaluate_loss(model, stream, batch_size=4, iters=3, seed=7)
    c = evaluate_loss(model, stream, batch_size=4, iters=3, seed=8)
    assert a == b and a != c and model.training
    # the same number computed by hand from the same windows
    g = torch.Generator().manual_seed(7)
    model.eval()
    with torch.no_grad():
        losses = []
        for _ in range(3):
            x, y = sample_batch(stream, 4, TINY.context_length, g)
            logits = model(x).logits  # (B, T, V)
            logp = torch.log_softmax(logits, dim=-1).gather(-1, y[..., None])  # (B, T, 1)
            losses.append(-logp.mean().item())
    assert a == pytest.approx(sum(losses) / 3, rel=1e-6)


def test_callback_receives_events_in_order(toy):
    events: list[TrainEvent] = []
    result = train(TINY, quick(max_iters=25, eval_interval=10), toy, callback=events.append)
    kinds = [(e.kind, e.step) for e in events]
    assert kinds[0] == ("eval", 0) and kinds[-1] == ("done", 25)
    assert [s for k, s in kinds if k == "step"] == list(range(1, 26))
    assert [s for k, s in kinds if k == "eval"] == [0, 10, 20, 25]
    assert kinds.index(("eval", 10)) == kinds.index(("step", 10)) + 1  # evaluated right after its step
    evals = [e for e in events if e.kind == "eval"]
    assert all(e.model is result.model for e in evals)
    assert all(e.model is None for e in events if e.kind != "eval")
    assert [(e.loss, e.val_loss) for e in evals] == [(h.train_loss, h.val_loss) for h in result.history]
    assert [e.loss for e in events if e.kind == "step"] == list(result.step_losses)
    assert all(e.max_iters == 25 for e in events)
    elapsed = [e.elapsed for e in events]
    assert elapsed == sorted(elapsed)
    assert events[-1].eta_seconds == 0.0 and events[-1].tokens_per_second > 0


def test_should_stop_is_polled_each_step_and_stops_early(toy):
    polls = []

    def should_stop():
        polls.append(1)
        return len(polls) > 7  # allow 7 steps

    events = []
    result = train(TINY, quick(max_iters=1000), toy, callback=events.append, should_stop=should_stop)
    assert result.metrics["iters"] == 7 and result.metrics["stop_reason"] == "stopped"
    assert len(polls) == 8
    assert events[-1].kind == "done" and result.history[-1].step == 7  # still evaluated at the end


@pytest.mark.numerics
def test_a_diverging_run_stops_at_the_first_non_finite_loss(toy):
    result = train(TINY, quick(max_iters=50, learning_rate=1e6, min_lr=1e6, grad_clip=0.0), toy)
    assert result.metrics["stop_reason"] == "diverged"
    assert not math.isfinite(result.step_losses[-1])
    assert all(math.isfinite(v) for v in result.step_losses[:-1])
    assert result.metrics["iters"] == len(result.step_losses) < 50


def test_time_budget_stops_the_loop():
    corpus = corpus_from_text("toy.py", TOY_TEXT)
    result = train(TINY, quick(max_iters=1000, max_seconds=1e-9), corpus)
    assert result.metrics["iters"] == 0 and result.metrics["stop_reason"] == "max_seconds"


def test_evaluation_keeps_to_the_time_budget(toy, monkeypatch):
    """A fake clock that moves one second per evaluation batch: with a budget of 10 s and eval_iters 1000, the run
    reads about ten batches in all, not 2 x 1000 at step 0 (issue 35: `--eval-iters 1000000000 --max-seconds 5`
    ran past two minutes)."""
    from types import SimpleNamespace

    from core.model import batches

    now = [0.0]
    real = batches.next_token_loss
    evaluated = []

    def one_second_each(*args, **kw):
        now[0] += 1.0
        evaluated.append(now[0])
        return real(*args, **kw)

    monkeypatch.setattr(training, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(batches, "next_token_loss", one_second_each)  # evaluation's forward, not training's
    cfg = quick(max_iters=5, eval_interval=5, eval_iters=1000, max_seconds=10.0)
    result = train(TINY, cfg, toy)
    # step 0: one batch to measure the pace, then 4 of each stream (9 s); the last evaluation finds 1 s left: 1 each
    assert len(evaluated) == 1 + 2 * 4 + 2 * 1
    assert result.metrics["seconds"] <= cfg.max_seconds + 2  # the budget, plus one batch of each stream
    assert [h.step for h in result.history] == [0, 5] and all(math.isfinite(h.val_loss) for h in result.history)


def test_same_seed_same_losses_other_seed_other_losses(toy):
    a = train(TINY, quick(max_iters=8, seed=3), toy)
    b = train(TINY, quick(max_iters=8, seed=3), toy)
    c = train(TINY, quick(max_iters=8, seed=4), toy)
    assert a.step_losses == b.step_losses
    assert [(h.step, h.train_loss, h.val_loss, h.lr) for h in a.history] == [
        (h.step, h.train_loss, h.val_loss, h.lr) for h in b.history
    ]
    for (_, pa), (_, pb) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(pa, pb)
    assert a.step_losses != c.step_losses


def test_training_leaves_global_rng_and_threads_as_they_were(toy):
    torch.manual_seed(123)
    state, threads = torch.get_rng_state(), torch.get_num_threads()
    train(TINY, quick(max_iters=3, num_threads=1), toy)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.get_num_threads() == threads


def test_no_causal_mask_builds_a_non_causal_model(toy):
    result = train(TINY, quick(max_iters=2, causal=False), toy)
    assert result.model.config.causal is False
    with pytest.raises(ValueError, match="causal"):
        train(dataclasses.replace(TINY, causal=False), quick(max_iters=2), toy)


def test_corpus_too_small_for_the_context_is_refused():
    small = corpus_from_text("small.txt", "short text " * 6)  # 66 characters, ~10 documents
    with pytest.raises(CorpusError, match="too small for context length 32"):
        train(TINY, quick(max_iters=2), small)


# ---- the leak detector at every evaluation -------------------------------------------------------


@pytest.mark.numerics
def test_every_evaluation_carries_its_causality_probe(toy):
    events = []
    result = train(TINY, quick(max_iters=20, eval_interval=10), toy, callback=events.append)
    assert [r.step for r in result.history] == [0, 10, 20]
    assert all(r.probe is not None and r.probe.passed for r in result.history)
    assert [e.probe for e in events if e.kind == "eval"] == [r.probe for r in result.history]
    assert all(e.probe is None for e in events if e.kind != "eval")
    final = leak.causality_probe(result.model, sequences=leak.TRAINING_PROBE_SEQUENCES, seed=0)
    assert result.history[-1].probe.agreement.scale == final.agreement.scale  # the probe of the model at that step


def test_the_probe_does_not_change_what_training_does(toy, monkeypatch):
    probed = train(TINY, quick(max_iters=12, eval_interval=4, seed=5), toy)
    monkeypatch.setattr(training, "causality_probe", lambda model, **kw: None)
    unprobed = train(TINY, quick(max_iters=12, eval_interval=4, seed=5), toy)
    assert probed.step_losses == unprobed.step_losses
    assert [r.val_loss for r in probed.history] == [r.val_loss for r in unprobed.history]


@pytest.mark.numerics
def test_the_leak_stop_ends_a_maskless_run_at_its_first_evaluation(toy):
    events = []
    result = train(TINY, quick(max_iters=30, causal=False, leak_stop=True), toy, callback=events.append)
    assert result.metrics["stop_reason"] == "leak" and result.metrics["iters"] == 0
    assert [r.step for r in result.history] == [0] and not result.history[0].probe.passed
    assert [e.kind for e in events] == ["eval", "done"]
    free = train(TINY, quick(max_iters=20, causal=False), toy)  # leak_stop off: the library default
    assert free.metrics["stop_reason"] == "max_iters" and free.metrics["iters"] == 20
    assert leak.first_failed_probe(free.history).step == 0 and all(not r.probe.passed for r in free.history)
    with pytest.raises(ValueError, match="leak_stop"):
        quick(leak_stop=1)


# ---- the evaluation cadence: wall time, cheaper interim evaluations, the last one full -------------------------


class _FakeClock:
    """training's `time` module with a perf_counter the test moves (by the step events it hears)."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_eval_seconds_evaluates_by_wall_time_and_the_last_evaluation_is_full(toy, monkeypatch):
    clock = _FakeClock()
    monkeypatch.setattr(training, "time", clock)

    def tick(event: TrainEvent) -> None:
        if event.kind == "step":
            clock.now += 1.5  # every step costs 1.5 s of the fake wall clock

    cfg = quick(max_iters=10, eval_interval=1000, eval_iters=3, interim_eval_iters=1, eval_seconds=4.0)
    result = train(TINY, cfg, toy, callback=tick)
    # 4 s pass between evaluations after 3 steps (4.5 s): steps 0, 3, 6, 9, then the last at max_iters
    assert [r.step for r in result.history] == [0, 3, 6, 9, 10]
    assert [r.batches for r in result.history] == [1, 1, 1, 1, 3]
    assert [r.probe.length for r in result.history] == [training.INTERIM_PROBE_LENGTH] * 4 + [TINY.context_length]
    # the last record is the full estimate of the final model: evaluate_loss on its own 3 batches
    tok = CharTokenizer.from_text(toy.text)
    train_docs, val_docs = split_documents(toy, cfg.val_fraction, cfg.seed)
    val = evaluate_loss(
        result.model, document_stream(val_docs, tok), batch_size=8, iters=3, seed=cfg.seed + 2, fast_attention=True
    )
    assert result.history[-1].val_loss == pytest.approx(val, rel=1e-6)


def test_eval_seconds_zero_evaluates_every_step_and_a_stop_after_a_cheap_one_ends_full(toy):
    polls = []

    def stop() -> bool:
        polls.append(None)
        return len(polls) > 4  # four steps, then stop

    cfg = quick(max_iters=30, eval_interval=1000, eval_iters=3, interim_eval_iters=1, eval_seconds=0.0)
    events: list[TrainEvent] = []
    result = train(TINY, cfg, toy, callback=events.append, should_stop=stop)
    assert result.metrics["stop_reason"] == "stopped" and result.metrics["iters"] == 4
    assert [r.step for r in result.history] == [0, 1, 2, 3, 4]  # one record per step: the full one replaced step 4's
    assert [r.batches for r in result.history] == [1, 1, 1, 1, 3]
    assert result.history[-1].probe.length == TINY.context_length
    evals = [e.step for e in events if e.kind == "eval"]
    assert evals == [0, 1, 2, 3, 4, 4]  # the cheap evaluation of step 4 was reported, then the full one


def test_without_interim_iters_every_evaluation_is_full(toy):
    result = train(TINY, quick(max_iters=12, eval_interval=4, eval_iters=2), toy)
    assert [r.batches for r in result.history] == [2, 2, 2, 2]
    assert {r.probe.length for r in result.history} == {TINY.context_length}


def test_train_config_for_reads_fewer_batches_before_the_last_on_short_runs_and_the_page():
    from core.model.train_config import PAGE_EVAL_ITERS, SHORT_RUN_ITERS, train_config_for

    assert train_config_for(300).interim_eval_iters == PAGE_EVAL_ITERS
    assert train_config_for(SHORT_RUN_ITERS + 1).interim_eval_iters is None
    page = train_config_for(SHORT_RUN_ITERS + 1, eval_seconds=4.0)
    assert page.eval_seconds == 4.0 and page.interim_eval_iters == PAGE_EVAL_ITERS
    assert train_config_for(300, eval_iters=1).interim_eval_iters == 1  # never more than the full evaluation
    for bad in (dict(eval_seconds=-1.0), dict(eval_seconds=float("nan")), dict(interim_eval_iters=0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            quick(**bad)
