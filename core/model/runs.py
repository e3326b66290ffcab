"""One training run as a job: corpus in, progress and attention snapshots out, a bundle saved.

The app's Training page checks a run and turns it into a job on disk with `job_request` (the settings as JSON, an
upload's text as a file), which `core.model.jobs.JobQueue.submit` queues; the run's own process (cli.run_job)
rebuilds the `RunSpec` (core.model.run_spec) with `spec_from_job` and runs `run_training`. `training_work(...)`
and `work_for_corpus(...)` give the same work from plain arguments, in this process (the tests, the CLI). The work:

1. trains through `core.model.training.train`, forwarding a compact `Progress` event per optimizer step (at
   most one every `STEP_REPORT_SECONDS`, so a long run does not pile up thousands of events), every
   evaluation and the end;
2. at every evaluation takes a `Snapshot` (core.model.run_events: one head's attention weights over a fixed
   probe text, drawn from the real model), and forwards the evaluation's causality probe (core.model.leak,
   run by core.model.training at every evaluation);
3. saves a bundle with `core.model.bundle.save_bundle`, even when the run was stopped early (it holds what the
   model learned so far), recording an app command line and the full TrainConfig. The output directory
   is checked before training starts (`core.model.bundle.check_out_dir`) and never replaced without
   overwrite. A run without the causal mask, or whose own evaluations broke the leak rule (a failed
   causality probe), is saved marked unsafe. The loss symptom (core.model.leak.leak_verdict) is shown, never
   decides: very repetitive text goes below any loss floor honestly, and a probe that edits every
   position already catches a model that reads ahead.

`train_config_for` (core.model.train_config) turns the leak stop on (TrainConfig.leak_stop): a run ends at its
first evaluation whose causality probe fails, on any text, with stop_reason "leak".

Shapes use the legend of `core/__init__.py`: T query positions, S key positions (here S = T).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from core.model.bundle import MANIFEST, check_out_dir, save_bundle
from core.model.bundle_checks import read_manifest
from core.model.corpus import MAX_BYTES, STDLIB_SOURCE, Corpus, CorpusError, corpus_from_text
from core.model.distributed import Ranks
from core.model.leak import first_failed_probe
from core.model.run_events import (
    Progress,
    RunResult,
    attention_snapshot,
)
from core.model.run_record import BUNDLE, CORPUS_COPY
from core.model.run_spec import (
    RunSpec,
    check_fits,
    default_probe,
    load_run_corpus,
    preset_config,
)
from core.model.tokenizer import CharTokenizer
from core.model.train_config import (
    TrainConfig,  # re-exported: cli and the tests
)
from core.model.training import EvalRecord, TrainEvent, TrainResult, train

STEP_REPORT_SECONDS = 0.2


# ---- the work ------------------------------------------------------------------------------------


def run_training(spec: RunSpec, report: Callable[[Progress], None], should_stop: Callable[[], bool]) -> RunResult:
    """The job: train, report Progress (with a Snapshot at each evaluation), save the bundle."""
    tokenizer = CharTokenizer.from_text(spec.corpus.text)  # the one train() builds from the same text
    last_step_report = [-math.inf]

    def forward(event: TrainEvent) -> None:
        now = time.monotonic()
        if event.kind == "step" and event.step < event.max_iters and now - last_step_report[0] < STEP_REPORT_SECONDS:
            return
        if event.kind == "step":
            last_step_report[0] = now
        snapshot = None
        if event.kind == "eval" and event.model is not None:
            snapshot = attention_snapshot(
                event.model,
                tokenizer,
                spec.snapshot_text,
                layer=spec.snapshot_layer,
                head=spec.snapshot_head,
                step=event.step,
            )
        eta = event.eta_seconds if math.isfinite(event.eta_seconds) else None
        report(
            Progress(
                event.kind,
                event.step,
                event.max_iters,
                event.loss,
                event.val_loss,
                event.lr,
                event.tokens_per_second,
                event.elapsed,
                eta,
                snapshot,
                event.probe,
            )
        )

    result, path = train_and_save(
        spec.corpus,
        spec.preset_name,
        spec.train_config,
        spec.out_dir,
        command=spec.command(),
        callback=forward,
        should_stop=should_stop,
    )
    if path is None:  # only a rank other than 0 of a distributed run writes nothing; the app runs one process
        raise RuntimeError("train_and_save wrote no bundle")
    manifest = read_manifest(path / MANIFEST)  # as save_bundle wrote and verified it, read by the one JSON reader
    return RunResult(
        path,
        dict(result.metrics),
        result.metrics["stop_reason"] == "stopped",
        first_failed_probe(result.history),
        manifest["safe"],
        manifest["unsafe_reason"],
        result.history,
        spec.preset_name,
        spec.corpus.source,
        spec.corpus.fingerprint,
        result.model.config.causal,
        spec.train_config.max_iters,
        result.model.num_parameters(),
    )


def train_and_save(
    corpus: Corpus,
    preset_name: str,
    train_config: TrainConfig,
    out_dir: Path | Callable[[], Path],
    *,
    command: Sequence[str],
    callback: Callable[[TrainEvent], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    overwrite: bool = False,
    ranks: Ranks | None = None,
    launch_command: Sequence[str] | None = None,
) -> tuple[TrainResult, Path | None]:
    """Train PRESETS[preset_name] on `corpus` and save the bundle (also after an early stop): the part the
    CLI and the app share. The output directory is resolved and checked (check_out_dir) before training,
    so a bad path fails in a second, not after the run. The bundle is marked unsafe when the run's own
    evaluations broke the leak rule (`leak_unsafe_reason`).

    A distributed run (`ranks` of a joined process group, core.model.distributed): every rank trains, rank 0
    alone checks the directory and writes the bundle, whose manifest records the world size and
    `launch_command` (the torchrun line; `command` by default); the other ranks return (result, None)."""
    ranks = Ranks() if ranks is None else ranks
    target = check_out_dir(out_dir() if callable(out_dir) else out_dir, overwrite=overwrite) if ranks.is_main else None
    result = train(
        preset_config(preset_name), train_config, corpus, callback=callback, should_stop=should_stop, ranks=ranks
    )
    if target is None:
        return result, None
    path = save_bundle(
        target,
        result.model,
        result.tokenizer,
        metrics=result.metrics,
        command=list(command),
        corpus=corpus,
        train_config=train_config,
        overwrite=overwrite,
        unsafe_reason=leak_unsafe_reason(result.history),
        world_size=ranks.world_size,
        launch_command=None if launch_command is None else list(launch_command),
    )
    return result, path


def leak_unsafe_reason(history: Sequence[EvalRecord]) -> str | None:
    """Why a run's own evaluations make its model unsafe, or None: its first failed causality probe."""
    failed = first_failed_probe(history)
    if failed is not None:
        return f"its causality probe failed at the evaluation of step {failed.step}: {failed.probe.describe()}"
    return None


def training_work(
    corpus_source: str,
    corpus_text: str | bytes | None,
    preset_name: str,
    train_config: TrainConfig,
    out_dir: Path | Callable[[], Path],
    *,
    snapshot_text: str | None = None,
    snapshot_layer: int = 0,
    snapshot_head: int = 0,
) -> Callable[[Callable, Callable], RunResult]:
    """A `work(report, should_stop)` for JobQueue.submit from plain arguments: `corpus_text` (an upload)
    named `corpus_source`, or without text "stdlib" / a file path. Raises CorpusError now, before the run
    waits in line."""
    return work_for_corpus(
        load_run_corpus(corpus_source, corpus_text),
        preset_name,
        train_config,
        out_dir,
        snapshot_text=snapshot_text,
        snapshot_layer=snapshot_layer,
        snapshot_head=snapshot_head,
    )


def work_for_corpus(
    corpus: Corpus,
    preset_name: str,
    train_config: TrainConfig,
    out_dir: Path | Callable[[], Path],
    *,
    snapshot_text: str | None = None,
    snapshot_layer: int = 0,
    snapshot_head: int = 0,
) -> Callable[[Callable, Callable], RunResult]:
    """The same for a corpus already loaded; checks that it fits the preset (CorpusError otherwise) and that
    the run can save where it is told (BundleError otherwise: a path new or empty). `snapshot_text` defaults
    to `default_probe`."""
    check_fits(corpus, preset_name, train_config)
    if not callable(out_dir):
        check_out_dir(out_dir)
    text = default_probe(corpus, train_config) if snapshot_text is None else snapshot_text
    spec = RunSpec(corpus, preset_name, train_config, out_dir, text, snapshot_layer, snapshot_head)
    return functools.partial(run_training, spec)


# ---- a page's run as a job on disk -----------------------------------------------------------------


def job_request(
    corpus: Corpus,
    preset_name: str,
    train_config: TrainConfig,
    *,
    corpus_label: str,
    snapshot_text: str | None = None,
    snapshot_layer: int = 0,
    snapshot_head: int = 0,
) -> tuple[dict, dict[str, bytes]]:
    """(payload, files) for core.model.jobs.JobQueue.submit: the run's settings as JSON, and an upload's text as
    CORPUS_COPY (the standard library is read again from this Python). Checked now, before the run waits in line:
    the text fits the preset (CorpusError), the probe, layer and head exist (ValueError)."""
    check_fits(corpus, preset_name, train_config)
    text = default_probe(corpus, train_config) if snapshot_text is None else snapshot_text
    RunSpec(corpus, preset_name, train_config, Path(BUNDLE), text, snapshot_layer, snapshot_head)  # checks them
    payload = {
        "corpus": {"source": corpus.source, "fingerprint": corpus.fingerprint, "label": corpus_label},
        "preset": preset_name,
        "train_config": dataclasses.asdict(train_config),
        "snapshot": {"text": text, "layer": snapshot_layer, "head": snapshot_head},
    }
    if corpus.source == STDLIB_SOURCE:
        return payload, {}
    # corpus_from_text drops one leading BOM: one added here gives back the exact text, whatever it starts with
    return payload, {CORPUS_COPY: "\ufeff".encode() + corpus.text.encode("utf-8")}


def spec_from_job(run_dir: Path, payload: dict) -> tuple[RunSpec, str]:
    """The RunSpec of a queued run, rebuilt in its process from `job_request`'s payload and files, with the bundle
    going to <run_dir>/bundle; and the corpus's label. CorpusError or ValueError when the text read back is not
    the one queued (its fingerprint) or a setting is not one job_request writes."""
    run_dir = Path(run_dir)
    queued = payload["corpus"]
    source, label = str(queued["source"]), str(queued["label"])
    if source == STDLIB_SOURCE:
        corpus = load_run_corpus(STDLIB_SOURCE)
    elif source.startswith("upload:"):
        with open(run_dir / CORPUS_COPY, "rb") as f:
            data = f.read(MAX_BYTES + 4)  # the limit and the BOM job_request adds; more is refused below
        if len(data) > MAX_BYTES + 3:
            raise CorpusError(f"the queued training text is larger than the limit of {MAX_BYTES:,} bytes")
        corpus = corpus_from_text(source.removeprefix("upload:"), data)
    else:
        raise ValueError(f"a page's run trains on the standard library or an upload, not {source[:60]!r}")
    if corpus.fingerprint != queued["fingerprint"]:
        raise CorpusError("the training text read back is not the one that was queued; start the run again")
    cfg = TrainConfig(**payload["train_config"])
    snap = payload["snapshot"]
    spec = RunSpec(corpus, str(payload["preset"]), cfg, run_dir / BUNDLE, snap["text"], snap["layer"], snap["head"])
    return spec, label


def check_runs_dir(runs_dir: Path) -> None:
    """BundleError unless a new run folder can be created under `runs_dir` (before a run is queued)."""
    check_out_dir(Path(runs_dir) / f".unnamed-{uuid.uuid4().hex}")  # a name no run has: checks the parent


# ---- display helpers (plain text, used by the page and the tests) --------------------------------


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes} min {s:02d} s" if minutes else f"{s} s"
