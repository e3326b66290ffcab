"""One training run as a background job: corpus in, progress and attention snapshots out, a bundle saved.

The app's Training page (and any other front end) builds a `RunSpec` (core.model.run_spec) and hands
`functools.partial(run_training, spec)` to `core.model.jobs.JobQueue.submit`; `training_work(...)` does both
steps from plain arguments. The work function:

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

import functools
import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from core.model.bundle import MANIFEST, check_out_dir, save_bundle
from core.model.corpus import Corpus
from core.model.distributed import Ranks
from core.model.leak import first_failed_probe
from core.model.run_events import Progress, RunResult, attention_snapshot
from core.model.run_events import Snapshot as Snapshot  # re-exported: importers of runs.Snapshot
from core.model.run_spec import APP_COMMAND as APP_COMMAND  # re-exported with the next two: the pages, the tests
from core.model.run_spec import APP_PRESETS as APP_PRESETS
from core.model.run_spec import (
    RunSpec,
    check_fits,
    default_probe,
    load_run_corpus,
    preset_config,
)
from core.model.run_spec import parameter_count as parameter_count
from core.model.tokenizer import CharTokenizer
from core.model.train_config import TrainConfig
from core.model.train_config import train_config_for as train_config_for  # re-exported: cli and the tests
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
    manifest = json.loads((path / MANIFEST).read_text(encoding="ascii"))  # as save_bundle wrote and verified it
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
    after_save: Callable[[Path, Corpus], None] | None = None,
) -> Callable[[Callable, Callable], RunResult]:
    """The same for a corpus already loaded; checks that it fits the preset (CorpusError otherwise) and that
    the run can save where it is told (BundleError otherwise: a JobDir's parent must be writable, a path
    new or empty). `snapshot_text` defaults to `default_probe`. `after_save(path, corpus)` runs in the job
    once the bundle is saved (the app tunes the suggestion threshold there: core.release.tuning)."""
    check_fits(corpus, preset_name, train_config)
    if isinstance(out_dir, JobDir):
        out_dir.check()
    elif not callable(out_dir):
        check_out_dir(out_dir)
    text = default_probe(corpus, train_config) if snapshot_text is None else snapshot_text
    spec = RunSpec(corpus, preset_name, train_config, out_dir, text, snapshot_layer, snapshot_head)
    if after_save is None:
        return functools.partial(run_training, spec)

    def work(report: Callable[[Progress], None], should_stop: Callable[[], bool]) -> RunResult:
        result = run_training(spec, report, should_stop)
        after_save(result.bundle_path, corpus)
        return result

    return work


class JobDir:
    """A run directory named after the job id, which JobQueue.submit returns only after the job exists:
    pass the instance as `out_dir`, then call `name(job_id)`; the run waits (up to `timeout`) for the name.
    A run directory that already exists with anything in it is refused, never replaced (check_out_dir).
    With `bundle` (a folder name) the bundle goes into <parent>/<job id>/<bundle>, leaving the run directory
    room for files beside the bundle (core.model.run_record); `name` returns the run directory either way."""

    def __init__(self, parent: Path, timeout: float = 60.0, *, bundle: str | None = None):
        if bundle is not None and (not bundle or bundle in (".", "..") or "/" in bundle or "\\" in bundle):
            raise ValueError(f"bundle must be a plain folder name, got {bundle!r}")
        self.parent, self.timeout, self.bundle = Path(parent), timeout, bundle
        self._name: str | None = None
        self._named = threading.Event()

    def check(self) -> None:
        """BundleError unless a new run directory can be created under `parent` (before the job is queued)."""
        check_out_dir(self.parent / f".unnamed-{uuid.uuid4().hex}")  # a name no run has: checks the parent

    def name(self, job_id: str) -> Path:
        self._name = job_id
        self._named.set()
        return self.parent / job_id

    def __call__(self) -> Path:
        if not self._named.wait(self.timeout) or self._name is None:
            raise RuntimeError("the run directory was never named (JobDir.name was not called after submit)")
        run_dir = self.parent / self._name
        return run_dir if self.bundle is None else run_dir / self.bundle


# ---- display helpers (plain text, used by the page and the tests) --------------------------------


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes} min {s:02d} s" if minutes else f"{s} s"
