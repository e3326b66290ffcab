"""core.runs: a training run as a job (events, snapshots, bundle, early stop, no mask), and real runs' histories
against the leak detector (core.leak; its rules at their boundaries are in tests/test_leak.py)."""
import dataclasses
import threading
from types import SimpleNamespace

import pytest
import torch

from core import leak, runs
from core.bundle import load_bundle
from core.corpus import CorpusError
from core.jobs import STOPPED, JobQueue
from core.model import GPT, PRESETS, preset

TEXT = "\n\n".join(f"def f{i}(x):\n    return x * {i % 7} + {i % 3}\n" for i in range(60))  # ~2 kB
PROBE = "def f1(x):\n    return x"


def quick(max_iters=6, **kw):
    return runs.train_config_for(max_iters, batch_size=4, eval_iters=2, eval_interval=2, num_threads=1, **kw)


def run(tmp_path, cfg, name="run", should_stop=lambda: False):
    events = []
    work = runs.training_work("toy.py", TEXT, "tiny", cfg, tmp_path / name, snapshot_text=PROBE)
    return work(events.append, should_stop), events


@pytest.fixture(scope="module")
def causal_run(tmp_path_factory):
    return run(tmp_path_factory.mktemp("runs"), quick())


@pytest.fixture(scope="module")
def leaky_run(tmp_path_factory):
    return run(tmp_path_factory.mktemp("runs"), quick(causal=False))


def test_a_run_saves_a_loadable_bundle_that_says_it_came_from_the_app(causal_run):
    result, _ = causal_run
    bundle = load_bundle(result.bundle_path)
    assert bundle.safe and result.safe and result.unsafe_reason is None
    command = bundle.manifest["training"]["command"]
    assert command[:len(runs.APP_COMMAND)] == list(runs.APP_COMMAND)
    assert command[command.index("--max-iters") + 1] == "6" and "--no-causal-mask" not in command
    assert bundle.manifest["training"]["config"] == dataclasses.asdict(quick())
    assert bundle.manifest["training"]["metrics"]["val_loss"] == pytest.approx(result.metrics["val_loss"])
    assert result.num_parameters == bundle.model.num_parameters() and not result.stopped


def test_events_come_in_order_with_a_snapshot_at_every_evaluation(causal_run):
    result, events = causal_run
    assert events[-1].kind == "done" and [e.kind for e in events].count("done") == 1
    steps = [e.step for e in events]
    assert steps == sorted(steps)
    evals = [e for e in events if e.kind == "eval"]
    assert [e.step for e in evals] == [r.step for r in result.history] == [0, 2, 4, 6]
    assert [e.val_loss for e in evals] == [r.val_loss for r in result.history]
    assert all(e.snapshot is not None and e.snapshot.step == e.step for e in evals)
    assert all(e.snapshot is None for e in events if e.kind != "eval")
    assert events[0].eta_seconds is None and all(0.0 <= e.fraction <= 1.0 for e in events)


def test_snapshot_rows_sum_to_one_and_nothing_is_above_the_diagonal(causal_run):
    _, events = causal_run
    for snap in (e.snapshot for e in events if e.kind == "eval"):
        w = torch.tensor(snap.weights, dtype=torch.float64)  # (T, S)
        T = len(PROBE)
        assert w.shape == (T, T) and len(snap.tokens) == T
        torch.testing.assert_close(w.sum(-1), torch.ones(T, dtype=torch.float64), atol=1e-5, rtol=0)
        assert (w.triu(diagonal=1) == 0).all()
        assert w[0, 0] == pytest.approx(1.0, abs=1e-6)
        assert snap.future_weight == 0.0
    assert snap.tokens[3] == "␣" and snap.tokens[10] == "↵"


def test_the_last_snapshot_is_the_saved_models_own_attention(causal_run):
    result, events = causal_run
    bundle = load_bundle(result.bundle_path)
    ids = torch.tensor([bundle.tokenizer.encode(PROBE)])  # (1, T)
    with torch.no_grad():
        expected = bundle.model(ids, return_weights=True).weights[0][0, 0]  # (T, S), layer 0 head 0
    last = [e for e in events if e.kind == "eval"][-1].snapshot
    torch.testing.assert_close(torch.tensor(last.weights), expected, atol=1e-6, rtol=0)


def test_a_run_stopped_in_the_queue_saves_what_it_learned_in_the_job_directory(tmp_path):
    q = JobQueue()
    run_dir = runs.JobDir(tmp_path)
    first_step = threading.Event()

    def report_then_stop(report, should_stop):  # the page's work, with a hook to see the first step
        def tap(event):
            report(event)
            if event.kind == "step":
                first_step.set()
        return runs.work_for_corpus(runs.load_run_corpus("toy.py", TEXT), "tiny",
                                    quick(max_iters=5000, max_seconds=120), run_dir)(tap, should_stop)

    job = q.submit("me", report_then_stop, name="long run")
    run_dir.name(job)
    assert first_step.wait(120)
    q.stop(job)
    view = q.wait(job, 120)
    assert view.state == STOPPED and view.result.stopped
    assert view.result.bundle_path == tmp_path / job
    assert 1 <= view.result.metrics["iters"] < 5000 and view.result.metrics["stop_reason"] == "stopped"
    assert load_bundle(view.result.bundle_path).manifest["training"]["metrics"]["stop_reason"] == "stopped"
    assert view.events[-1].kind == "done"


def test_without_the_causal_mask_the_bundle_is_unsafe_and_attention_reads_ahead(leaky_run):
    result, events = leaky_run
    bundle = load_bundle(result.bundle_path)
    assert not result.causal and not result.safe and not bundle.safe
    assert "causal mask" in result.unsafe_reason and "--no-causal-mask" in bundle.manifest["training"]["command"]
    snap = [e for e in events if e.kind == "eval"][-1].snapshot
    w = torch.tensor(snap.weights, dtype=torch.float64)
    torch.testing.assert_close(w.sum(-1), torch.ones(len(w), dtype=torch.float64), atol=1e-5, rtol=0)
    assert not snap.causal and w.triu(diagonal=1).sum() > 0
    by_loops = sum(sum(row[t + 1:]) for t, row in enumerate(snap.weights)) / len(snap.weights)
    assert snap.future_weight == pytest.approx(by_loops) and snap.future_weight > 0.1


@pytest.mark.parametrize("text, words", [
    (b"caf\xe9 au lait\n" * 50, "not UTF-8"),
    ("   \n\n  ", "empty"),
    ("a short text\n\nof two paragraphs\n", "too small for context length 32"),
])
def test_a_bad_corpus_fails_early_with_the_corpus_message(tmp_path, text, words):
    with pytest.raises(CorpusError, match=words):
        runs.training_work("bad.txt", text, "tiny", quick(), tmp_path / "never")
    assert not (tmp_path / "never").exists()


# ---- a run's history against the leak rule (core.leak) -------------------------------------------

def test_the_reference_loss_comes_only_from_a_safe_causal_bundle_on_the_same_text(causal_run, leaky_run):
    (causal, _), (leaky, _) = causal_run, leaky_run
    manifest = load_bundle(causal.bundle_path).manifest
    assert leak.causal_reference_loss(manifest, causal.corpus_fingerprint) == pytest.approx(causal.metrics["val_loss"])
    assert leak.causal_reference_loss(manifest, "another text") is None
    assert leak.causal_reference_loss(load_bundle(leaky.bundle_path).manifest, leaky.corpus_fingerprint) is None
    assert leak.causal_reference_loss({}, causal.corpus_fingerprint) is None


def test_a_real_causal_run_passes_and_the_no_mask_run_is_flagged_against_it(causal_run, leaky_run):
    (causal, _), (leaky, _) = causal_run, leaky_run
    assert not leak.leak_verdict(causal.history).leaked
    reference = leak.causal_reference([causal, leaky], corpus_fingerprint=leaky.corpus_fingerprint,
                                      preset_name="tiny", max_iters=leaky.max_iters)
    assert reference == causal.history
    assert leak.causal_reference([leaky], corpus_fingerprint=leaky.corpus_fingerprint, preset_name="tiny",
                                 max_iters=leaky.max_iters) is None
    # Scaled to what a leaking model reaches (less than half the causal loss at every step), the rule fires.
    scaled = [SimpleNamespace(step=r.step, val_loss=0.45 * r.val_loss) for r in causal.history]
    assert leak.leak_verdict(scaled, floor=0.0, reference=reference).step == 2


def test_parameter_count_matches_the_model():
    for name in runs.APP_PRESETS:
        assert runs.parameter_count(PRESETS[name], 57) == GPT(preset(name, 57)).num_parameters()


def test_text_helpers():
    assert [runs.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "111th"]
    assert runs.format_duration(None) == "unknown" and runs.format_duration(75.4) == "1 min 15 s"


def test_the_leak_stop_condition_ends_the_run_at_the_first_impossibly_good_evaluation(tmp_path):
    """Same seed, so the run without the stop condition gives the history the stopping run will see;
    a reference loss placed between two evaluations must stop the run right at the later one."""
    cfg = runs.train_config_for(40, batch_size=4, eval_iters=2, eval_interval=10, num_threads=1, causal=False)
    corpus = runs.load_run_corpus("toy.py", TEXT)
    free = runs.work_for_corpus(corpus, "tiny", cfg, tmp_path / "free", snapshot_text=PROBE)(lambda e: None, lambda: False)
    losses = {r.step: r.val_loss for r in free.history}
    assert losses[10] > losses[20]  # the loss falls, so a threshold between them splits the evaluations
    threshold = (losses[10] + losses[20]) / 2  # leaked when val_loss < 0.5 * reference_loss
    reference_loss = threshold / leak.LEAK_REFERENCE_RATIO
    assert min(losses[s] for s in (0, 10)) > threshold and all(losses[s] >= leak.LEAK_FLOOR_NATS for s in (0, 10, 20))

    events = []
    stopping = runs.work_for_corpus(corpus, "tiny", cfg, tmp_path / "stopped", snapshot_text=PROBE,
                                    stop_on_leak=True, leak_reference_loss=reference_loss)
    result = stopping(events.append, lambda: False)
    assert result.leak is not None and result.leak.step == 20 and result.leak.rule == "reference model"
    assert result.metrics["iters"] == 20 and result.metrics["stop_reason"] == "stopped"
    assert not result.stopped  # the detector stopped it, not the user
    assert not result.safe and load_bundle(result.bundle_path).manifest["safe"] is False
    assert [e.step for e in events if e.kind == "eval"] == [0, 10, 20]
    # Without the stop condition the same run goes on to its budget.
    assert free.leak is None and free.metrics["iters"] == 40
