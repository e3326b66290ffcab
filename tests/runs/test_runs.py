"""The page's job: a training run as a job (events, snapshots, bundle, early stop, no mask), the leak stop on real runs
(the causality probe at every evaluation; the probe itself and the loss rules at their boundaries are in
tests/model/test_leak.py), unsafe bundles from a run's own evaluations, and where a run is saved: checked before
training, never replaced without overwrite."""

import dataclasses
import functools
import json
import os
import random
import shutil
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import core.model.gpt
from core.attention import causal_mask
from core.files import install_dir
from core.model import leak, train_config
from core.model.bundle import check_out_dir, load_bundle, save_bundle
from core.model.bundle_checks import BundleError
from core.model.corpus import CorpusError
from core.model.gpt import GPT, PRESETS, preset
from core.model.tokenizer import CharTokenizer
from core.runs import job as page_job
from core.runs import run_record
from core.runs.events import (
    SAMPLE_CHARS,
    attention_snapshot,
    progress_from_json,
    result_from_json,
    result_to_json,
    sample_line,
)
from core.runs.job import (
    APP_COMMAND,
    APP_PRESETS,
    check_runs_dir,
    format_duration,
    job_request,
    load_run_corpus,
    ordinal,
    parameter_count,
    spec_from_job,
    train_and_save,
    training_work,
    work_for_corpus,
)
from core.runs.queue import JOB, LOG, STOPPED, JobQueue

TEXT = "\n\n".join(f"def f{i}(x):\n    return x * {i % 7} + {i % 3}\n" for i in range(60))  # ~2 kB
PROBE = "def f1(x):\n    return x"


def quick(max_iters=6, **kw):
    return train_config.train_config_for(max_iters, batch_size=4, eval_iters=2, eval_interval=2, num_threads=1, **kw)


def run(tmp_path, cfg, name="run", should_stop=lambda: False):
    events = []
    work = training_work("toy.py", TEXT, "tiny", cfg, tmp_path / name, snapshot_text=PROBE)
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
    assert command[: len(APP_COMMAND)] == list(APP_COMMAND)
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
    assert all(e.snapshot is None and e.sample is None for e in events if e.kind != "eval")
    assert all(isinstance(e.sample, str) and len(e.sample) <= SAMPLE_CHARS for e in evals)  # a line at each
    assert events[0].eta_seconds is None and all(0.0 <= e.fraction <= 1.0 for e in events)


@pytest.mark.numerics
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


def test_the_last_snapshot_and_line_are_the_saved_models_own(causal_run):
    result, events = causal_run
    bundle = load_bundle(result.bundle_path)
    ids = torch.tensor([bundle.tokenizer.encode(PROBE)])  # (1, T)
    with torch.no_grad():
        expected = bundle.model(ids, return_weights=True).weights[0][0, 0]  # (T, S), layer 0 head 0
    last = [e for e in events if e.kind == "eval"][-1]
    torch.testing.assert_close(torch.tensor(last.snapshot.weights), expected, atol=1e-6, rtol=0)
    assert last.sample == sample_line(bundle.model, bundle.tokenizer, PROBE)  # written by the weights it saved


@pytest.mark.numerics
def test_a_page_run_in_its_own_process_is_seen_by_another_worker_and_stopped_keeps_what_it_learned(tmp_path):
    """The Training page's path end to end: job_request, the run's process (the page's job), a second JobQueue (another
    worker) reading its events and result back through the codec, and a stop written into the run's folder."""
    corpus = load_run_corpus("toy.py", TEXT)
    queues = [
        JobQueue(tmp_path, 1, entry=page_job, read_event=progress_from_json, read_result=result_from_json)
        for _ in range(2)
    ]
    payload, files = job_request(corpus, "tiny", quick(max_iters=5000, max_seconds=120), corpus_label="toy.py")
    job = queues[0].submit("me", payload, name="long run", files=files)
    wait_for(lambda: any(e.kind == "eval" for e in queues[1].view(job).events))
    queues[1].stop(job)
    view = queues[1].wait(job, 120)
    assert view.state == STOPPED and view.result.stopped and view.result.metrics["stop_reason"] == "stopped"
    assert view.result.bundle_path == tmp_path / job / "bundle"
    assert 1 <= view.result.metrics["iters"] < 5000
    bundle = load_bundle(view.result.bundle_path)
    assert bundle.manifest["training"]["metrics"]["stop_reason"] == "stopped"
    assert view.events[-1].kind == "done"
    evals = [e for e in view.events if e.kind == "eval"]
    assert [e.step for e in evals] == [r.step for r in view.result.history]
    assert [e.val_loss for e in evals] == [r.val_loss for r in view.result.history]  # JSON keeps every float
    # The last snapshot is the saved model's own attention, read back in this process.
    ids = torch.tensor([bundle.tokenizer.encode(payload["snapshot"]["text"])])  # (1, T)
    with torch.no_grad():
        expected = bundle.model(ids, return_weights=True).weights[0][0, 0]  # (T, S)
    torch.testing.assert_close(torch.tensor(evals[-1].snapshot.weights), expected, atol=1e-6, rtol=0)
    [record] = run_record.read_records(tmp_path)  # kept by the run's process, with the owner's token hashed
    assert record.owner == run_record.owner_hash("me") and record.bundle_path == view.result.bundle_path


def wait_for(predicate, timeout=120.0):
    done = threading.Event()
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        done.wait(0.05)
    raise AssertionError("condition not reached in time")


@pytest.mark.numerics
def test_without_the_causal_mask_the_bundle_is_unsafe_and_attention_reads_ahead(leaky_run):
    result, events = leaky_run
    bundle = load_bundle(result.bundle_path)
    assert not result.causal and not result.safe and not bundle.safe
    assert "causal mask" in result.unsafe_reason and "--no-causal-mask" in bundle.manifest["training"]["command"]
    snap = [e for e in events if e.kind == "eval"][-1].snapshot
    w = torch.tensor(snap.weights, dtype=torch.float64)
    torch.testing.assert_close(w.sum(-1), torch.ones(len(w), dtype=torch.float64), atol=1e-5, rtol=0)
    assert not snap.causal and w.triu(diagonal=1).sum() > 0
    by_loops = sum(sum(row[t + 1 :]) for t, row in enumerate(snap.weights)) / len(snap.weights)
    assert snap.future_weight == pytest.approx(by_loops) and snap.future_weight > 0.1


@pytest.mark.parametrize(
    "text, words",
    [
        (b"caf\xe9 au lait\n" * 50, "not UTF-8"),
        ("   \n\n  ", "empty"),
        ("a short text\n\nof two paragraphs\n", "too small for context length 32"),
    ],
)
def test_a_bad_corpus_fails_early_with_the_corpus_message(tmp_path, text, words):
    with pytest.raises(CorpusError, match=words):
        training_work("bad.txt", text, "tiny", quick(), tmp_path / "never")
    assert not (tmp_path / "never").exists()


# ---- a run's history against the leak rule (core.model.leak) -------------------------------------------


def test_the_reference_loss_comes_only_from_a_safe_causal_bundle_on_the_same_text(causal_run, leaky_run):
    (causal, _), (leaky, _) = causal_run, leaky_run
    manifest = load_bundle(causal.bundle_path).manifest
    assert leak.causal_reference_loss(manifest, causal.corpus_fingerprint) == pytest.approx(causal.metrics["val_loss"])
    assert leak.causal_reference_loss(manifest, "another text") is None
    assert leak.causal_reference_loss(load_bundle(leaky.bundle_path).manifest, leaky.corpus_fingerprint) is None
    assert leak.causal_reference_loss({}, causal.corpus_fingerprint) is None


@pytest.mark.numerics
def test_a_real_causal_run_passes_and_the_no_mask_run_is_flagged_against_it(causal_run, leaky_run):
    (causal, _), (leaky, _) = causal_run, leaky_run
    assert not leak.leak_verdict(causal.history).leaked
    reference = leak.causal_reference(
        [causal, leaky], corpus_fingerprint=leaky.corpus_fingerprint, preset_name="tiny", max_iters=leaky.max_iters
    )
    assert reference == causal.history
    assert (
        leak.causal_reference(
            [leaky], corpus_fingerprint=leaky.corpus_fingerprint, preset_name="tiny", max_iters=leaky.max_iters
        )
        is None
    )
    # Scaled to what a leaking model reaches (less than half the causal loss at every step), the rule fires.
    scaled = [SimpleNamespace(step=r.step, val_loss=0.45 * r.val_loss) for r in causal.history]
    assert leak.leak_verdict(scaled, floor=0.0, reference=reference).step == 2


def test_parameter_count_matches_the_model():
    for name in APP_PRESETS:
        assert parameter_count(PRESETS[name], 57) == GPT(preset(name, 57)).num_parameters()


def test_text_helpers():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 111)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "111th",
    ]
    assert format_duration(None) == "unknown" and format_duration(75.4) == "1 min 15 s"


def prose(n_words=700, seed=0):
    """An uploaded text that is not the standard library and not code: seeded random words (~4 kB)."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("aeioulnrstmdk") for _ in range(rng.randint(2, 8))) for _ in range(n_words)]
    return "\n\n".join(" ".join(words[i : i + 14]) + "." for i in range(0, n_words, 14))


@pytest.mark.numerics
def test_an_uploaded_text_without_the_mask_is_stopped_at_its_first_evaluation(tmp_path):
    """The structural detector needs no loss threshold: the untrained maskless model fails the probe at
    step 0, before its loss says anything, and the run ends there."""
    events = []
    cfg = train_config.train_config_for(40, batch_size=4, eval_iters=2, eval_interval=10, num_threads=1, causal=False)
    result = training_work("notes.txt", prose(), "tiny", cfg, tmp_path / "stopped")(events.append, lambda: False)
    assert result.metrics["stop_reason"] == "leak" and result.metrics["iters"] == 0 and not result.stopped
    evals = [e for e in events if e.kind == "eval"]
    # a cheap evaluation at step 0, then, as the run ends there, the full one that replaces it
    assert [e.step for e in evals] == [0, 0] and events[-1].kind == "done"
    assert result.leak is not None and result.leak.step == 0 and result.leak.probe is evals[-1].probe
    assert result.leak.probe.first_leak == (1, 0)  # editing position 1 moved position 0
    # The symptom is not there yet: an untrained model's loss is near ln V, far from impossibly good.
    assert not leak.leak_verdict(result.history).leaked
    assert evals[0].snapshot.future_weight > 0.1  # but its attention already reads ahead
    bundle = load_bundle(result.bundle_path)
    assert not bundle.safe and "causality probe failed at the evaluation of step 0" in bundle.manifest["unsafe_reason"]
    # The same probe, measured again on the saved weights, apart from the run.
    again = leak.causality_probe(bundle.model, sequences=leak.TRAINING_PROBE_SEQUENCES, seed=cfg.seed)
    assert again.first_leak == result.leak.probe.first_leak
    assert again.agreement.max_abs_diff == pytest.approx(result.leak.probe.agreement.max_abs_diff, rel=1e-9)


@pytest.mark.numerics
def test_with_the_leak_stop_off_the_run_goes_on_and_every_probe_fails(tmp_path):
    cfg = train_config.train_config_for(
        20, batch_size=4, eval_iters=2, eval_interval=10, num_threads=1, causal=False, leak_stop=False
    )
    work = training_work("notes.txt", prose(), "tiny", cfg, tmp_path / "free")
    result = work(lambda e: None, lambda: False)
    assert result.metrics["stop_reason"] == "max_iters" and result.metrics["iters"] == 20
    assert [r.step for r in result.history] == [0, 10, 20] and all(not r.probe.passed for r in result.history)
    assert result.leak.step == 0 and not result.safe
    assert "--no-leak-stop" in load_bundle(result.bundle_path).manifest["training"]["command"]


def leaky_mask(T, S=None, *, device=None):
    """A subtle bug: query t also sees key t + 1 whenever (t + 1) % 4 == 2."""
    mask = causal_mask(T, S, device=device).clone()  # (T, S)
    for t in range(1, T - 1, 4):
        mask[t, t + 1] = True
    return mask


@pytest.mark.numerics
def test_a_model_that_says_causal_but_leaks_is_stopped_and_saved_unsafe(tmp_path, monkeypatch):
    monkeypatch.setattr(core.model.gpt, "causal_mask", leaky_mask)
    cfg = quick(max_iters=6)
    result = training_work("toy.py", TEXT, "tiny", cfg, tmp_path / "subtle", snapshot_text=PROBE)(
        lambda e: None, lambda: False
    )
    assert result.causal  # the architecture claims the mask
    assert result.metrics["stop_reason"] == "leak" and result.leak.probe.first_leak == (2, 1)
    manifest = load_bundle(result.bundle_path).manifest
    assert manifest["architecture"]["causal"] is True and manifest["safe"] is False
    assert "causality probe failed" in manifest["unsafe_reason"] and "position 2" in manifest["unsafe_reason"]


@pytest.mark.numerics
def test_a_causal_run_whose_loss_only_looks_too_good_stays_safe(tmp_path):
    """The loss rule is the symptom, not the detector: a causal run whose every probe passed is saved safe even
    when its loss falls below half a reference (very repetitive text does that honestly)."""
    corpus = load_run_corpus("toy.py", TEXT)
    result, path = train_and_save(corpus, "tiny", quick(max_iters=2), tmp_path / "b", command=["test"])
    assert all(r.probe.passed for r in result.history)
    assert leak.leak_verdict(result.history, reference_loss=1e6).leaked  # the symptom fires ...
    assert load_bundle(path).safe  # ... and does not decide


# ---- where a run is saved: checked before training, never replaced -------------------------------


@pytest.fixture(scope="module")
def a_bundle(causal_run):
    return causal_run[0].bundle_path


def unwritable_dir(tmp_path):
    """A directory nobody may create entries in: chmod 0o500, or (as root, who ignores modes) /sys."""
    path = tmp_path / "locked"
    path.mkdir()
    path.chmod(0o500)
    for candidate in (path, Path("/sys")):
        try:
            os.rmdir(tempfile.mkdtemp(dir=candidate))
        except OSError:
            return candidate
    pytest.skip("no unwritable directory on this machine")


def test_check_out_dir_accepts_only_what_it_can_write_without_replacing_anything(tmp_path, a_bundle):
    (tmp_path / "file").write_text("mine")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("mine")
    (tmp_path / "empty").mkdir()
    assert check_out_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # nothing was created
    assert check_out_dir(tmp_path / "empty") == tmp_path / "empty"
    assert check_out_dir(a_bundle, overwrite=True) == a_bundle
    for path, overwrite, words in (
        (tmp_path / "file", False, "is a file"),
        (tmp_path / "file" / "under", False, "is a file"),
        (tmp_path / "notes", False, "not a bundle directory"),
        (tmp_path / "notes", True, "not a bundle directory"),  # --overwrite never deletes other files
        (a_bundle, False, "--overwrite"),
        (unwritable_dir(tmp_path) / "run", False, "write"),
    ):
        with pytest.raises(BundleError, match=words) as err:
            check_out_dir(path, overwrite=overwrite)
        assert "\n" not in str(err.value)
    assert (tmp_path / "notes" / "a.txt").read_text() == "mine" and (tmp_path / "file").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "locked") == ["empty", "file", "notes"]


def test_train_and_save_checks_the_directory_before_training(tmp_path, a_bundle):
    corpus = load_run_corpus("toy.py", TEXT)
    before = {p.name: p.read_bytes() for p in a_bundle.iterdir()}
    (tmp_path / "file").write_text("mine")
    for out in (tmp_path / "file", a_bundle):
        events = []
        with pytest.raises(BundleError):
            train_and_save(corpus, "tiny", quick(), out, command=["test"], callback=events.append)
        assert events == []  # refused before the first evaluation
    assert {p.name: p.read_bytes() for p in a_bundle.iterdir()} == before
    copy = tmp_path / "copy"
    shutil.copytree(a_bundle, copy)
    result, path = train_and_save(corpus, "tiny", quick(max_iters=2), copy, command=["test"], overwrite=True)
    assert load_bundle(path).manifest["training"]["metrics"]["iters"] == 2  # replaced, as asked


def test_save_bundle_replaces_a_bundle_only_when_asked(tmp_path, a_bundle):
    bundle = load_bundle(a_bundle)
    corpus = load_run_corpus("toy.py", TEXT)
    out = tmp_path / "b"
    save = functools.partial(save_bundle, model=bundle.model, tokenizer=bundle.tokenizer, command=["t"], corpus=corpus)
    save(out, metrics={"run": 1})
    with pytest.raises(BundleError, match="already holds a bundle"):
        save(out, metrics={"run": 2})
    assert load_bundle(out).manifest["training"]["metrics"] == {"run": 1}
    save(out, metrics={"run": 3}, overwrite=True)
    assert load_bundle(out).manifest["training"]["metrics"] == {"run": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]  # no temporary directory left


def test_a_directory_that_appears_while_saving_is_not_replaced_and_the_new_bundle_is_kept(tmp_path, a_bundle):
    tmp = tmp_path / ".new.tmp"
    shutil.copytree(a_bundle, tmp)
    out = tmp_path / "out"
    out.mkdir()
    (out / "theirs.txt").write_text("theirs")  # written after check_out_dir passed
    with pytest.raises(BundleError, match="kept in") as err:
        install_dir(tmp, out, error=BundleError)  # the step save_bundle ends with
    assert [p.name for p in out.iterdir()] == ["theirs.txt"]
    [kept] = [p for p in tmp_path.iterdir() if p.name.startswith("out.new-")]
    assert str(kept) in str(err.value) and load_bundle(kept).version == load_bundle(a_bundle).version


def test_a_run_directory_that_already_exists_is_never_replaced(tmp_path):
    (tmp_path / "runs" / "job1").mkdir(parents=True)
    (tmp_path / "runs" / "job1" / "manifest.json").write_text("{}")  # somebody's run, same name
    with pytest.raises(BundleError, match="already holds a bundle"):
        work_for_corpus(load_run_corpus("toy.py", TEXT), "tiny", quick(), tmp_path / "runs" / "job1")
    assert (tmp_path / "runs" / "job1" / "manifest.json").read_text() == "{}"
    (tmp_path / "blocked").write_text("a file where the runs directory should be")
    with pytest.raises(BundleError, match="is a file"):  # refused before the job is queued
        check_runs_dir(tmp_path / "blocked")


def test_a_queued_text_that_changed_on_disk_is_refused_by_the_run(tmp_path):
    corpus = load_run_corpus("toy.py", TEXT)
    payload, files = job_request(corpus, "tiny", quick(), corpus_label="toy.py")
    (tmp_path / "corpus.txt").write_bytes(files["corpus.txt"])
    spec, label = spec_from_job(tmp_path, payload)
    assert spec.corpus.fingerprint == corpus.fingerprint and label == "toy.py"
    assert spec.out_dir == tmp_path / "bundle" and spec.train_config == quick()
    (tmp_path / "corpus.txt").write_bytes(files["corpus.txt"] + b"\nedited")
    with pytest.raises(CorpusError, match="not the one that was queued"):
        spec_from_job(tmp_path, payload)


def test_a_snapshot_of_a_text_longer_than_the_context_reads_its_last_tokens():
    tokenizer = CharTokenizer.from_text(TEXT)
    torch.manual_seed(0)
    model = GPT(preset("tiny", tokenizer.vocab_size)).eval()
    L = model.config.context_length
    text = TEXT * (2 * L // len(TEXT) + 2)  # longer than the context
    assert len(text) > L
    snap = attention_snapshot(model, tokenizer, text, layer=1, head=1, step=0)
    tail = text[-L:]  # one character per token: the tokens nearest the next prediction
    assert snap.tokens == [tokenizer.display_piece(i) for i in tokenizer.encode(tail)]
    with torch.no_grad():
        expected = model(torch.tensor([tokenizer.encode(tail)]), return_weights=True).weights[1][0, 1]  # (T, S)
    torch.testing.assert_close(torch.tensor(snap.weights), expected, atol=0, rtol=0)


class Killed(BaseException):
    """Stands for the SIGKILL of a run's process: nothing after it runs, no handler sees it."""


@pytest.mark.parametrize("killed_in, unfinished", [("tune_bundle", "NOT_TUNED"), ("keep_run", "NOT_KEPT")])
def test_a_page_run_logs_its_saved_bundle_before_it_tunes_and_keeps_it(tmp_path, monkeypatch, killed_in, unfinished):
    """The page's job logs the saved bundle, and what is still to do, before each step after the save: a run killed
    while tuning or keeping is read back (the queue) with a bundle that loads, saying what was not done."""

    corpus = load_run_corpus("toy.py", TEXT)
    payload, files = job_request(corpus, "tiny", quick(), corpus_label="toy.py")
    run_dir = tmp_path / "0123456789ab"
    run_dir.mkdir()
    for name, data in files.items():
        (run_dir / name).write_bytes(data)
    (run_dir / JOB).write_text(json.dumps({"owner": run_record.owner_hash("me"), "payload": payload}))

    def kill(*args, **kwargs):
        raise Killed

    monkeypatch.setattr(page_job, "tune_bundle", lambda *a, **k: None)
    monkeypatch.setattr(page_job, "keep_run", lambda *a, **k: None)
    monkeypatch.setattr(page_job, killed_in, kill)
    with pytest.raises(Killed):
        page_job.page_work(run_dir)(lambda event: None, lambda: False)
    saved = [e for e in map(json.loads, (run_dir / LOG).read_text().splitlines()) if e["kind"] == "saved"]
    assert saved and saved[-1]["unfinished"] == getattr(page_job, unfinished)
    result = result_from_json(saved[-1]["result"], run_dir)
    assert result.bundle_path == run_dir / "bundle" and load_bundle(result.bundle_path).version
    assert not (run_dir / run_record.RECORD).exists()  # not kept: the sentence says so


def test_a_run_from_the_shipped_code_model_trains_its_architecture_and_records_it(tmp_path):
    """Issue 37: the page names a shipped model ("code"); the run starts from models/default, grows its vocabulary
    (the "é" it never saw) and says which base it started from, in the result, the command and the manifest."""
    base = load_bundle(page_job.shipped_base("code"))
    preset_name = page_job.base_preset("code")
    text = TEXT + "\n\n# é\n"
    payload, files = job_request(
        load_run_corpus("toy.py", text), preset_name, quick(2), corpus_label="toy", init_from="code"
    )
    assert payload["init_from"] == "code"
    with pytest.raises(ValueError, match="trains its architecture"):
        job_request(load_run_corpus("toy.py", text), "tiny", quick(2), corpus_label="toy", init_from="code")
    with pytest.raises(ValueError, match="shipped models"):
        job_request(load_run_corpus("toy.py", text), preset_name, quick(2), corpus_label="toy", init_from="../x")
    events = []
    work = training_work("toy.py", text, preset_name, quick(2), tmp_path / "run", snapshot_text=PROBE, init_from="code")
    result = work(events.append, lambda: False)
    bundle = load_bundle(result.bundle_path)
    assert result.init_from == "code"
    assert result_from_json(json.loads(json.dumps(result_to_json(result, tmp_path))), tmp_path).init_from == "code"
    assert bundle.manifest["base"] == {"version": base.version, "corpus": base.manifest["corpus"]}
    command = bundle.manifest["training"]["command"]
    assert command[command.index("--init-from") + 1] == "models/default" and "--preset" not in command
    assert "é" in bundle.tokenizer.chars and bundle.config.d_model == base.config.d_model
    assert any(e.snapshot is not None for e in events)  # drawn with the grown tokenizer
