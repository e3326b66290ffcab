"""One training run as a background job: corpus in, progress and attention snapshots out, a bundle saved.

The app's Training page (and any other front end) builds a `RunSpec` and hands
`functools.partial(run_training, spec)` to `core.model.jobs.JobQueue.submit`; `training_work(...)` does both
steps from plain arguments. The work function:

1. trains through `core.model.training.train`, forwarding a compact `Progress` event per optimizer step (at
   most one every `STEP_REPORT_SECONDS`, so a long run does not pile up thousands of events), every
   evaluation and the end;
2. at every evaluation takes a `Snapshot`: one head's attention weights (T, T) over a fixed probe text,
   as plain lists, drawn from the real model with `forward(return_weights=True)`, and forwards the
   evaluation's causality probe (core.model.leak, run by core.model.training at every evaluation);
3. saves a bundle with `core.model.bundle.save_bundle`, even when the run was stopped early (it holds what the
   model learned so far), recording an app command line and the full TrainConfig. The output directory
   is checked before training starts (`core.model.bundle.check_out_dir`) and never replaced without
   overwrite. A run without the causal mask, or whose own evaluations broke the leak rule (a failed
   causality probe), is saved marked unsafe. The loss symptom (core.model.leak.leak_verdict) is shown, never
   decides: very repetitive text goes below any loss floor honestly, and a probe that edits every
   position already catches a model that reads ahead.

`train_config_for` turns the leak stop on (TrainConfig.leak_stop): a run ends at its first evaluation
whose causality probe fails, on any text, with stop_reason "leak".

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
from dataclasses import dataclass
from pathlib import Path

import torch

from core.model.bundle import MANIFEST, check_out_dir, save_bundle
from core.model.corpus import STDLIB_SOURCE, Corpus, check_split_size, corpus_from_text, load_corpus, split_documents
from core.model.gpt import GPT, PRESETS, ModelConfig
from core.model.leak import CausalityProbe, first_failed_probe
from core.model.tokenizer import CharTokenizer
from core.model.training import EvalRecord, TrainConfig, TrainEvent, TrainResult, train

APP_PRESETS = ("tiny", "baby", "default")  # the sizes the app offers ("large" is for benchmarks)
PYTHON_PROBE = "if key in self:\n    return key"  # 30 characters: fits every preset's context
PROBE_CHARS = 32  # an uploaded corpus probes with the start of its first validation document
STEP_REPORT_SECONDS = 0.2
APP_COMMAND = ("attention-lab-app", "views/training.py", "train")  # marks a bundle trained from the app


# ---- configuration -------------------------------------------------------------------------------


def train_config_for(
    max_iters: int,
    *,
    max_seconds: float | None = None,
    seed: int = 0,
    batch_size: int = 12,
    learning_rate: float = 2e-3,
    eval_interval: int | None = None,
    eval_iters: int = 20,
    val_fraction: float = 0.1,
    causal: bool = True,
    num_threads: int | None = None,
    fast_attention: bool = False,
    leak_stop: bool = True,
) -> TrainConfig:
    """The TrainConfig of a run, the CLI's and the app's alike: about ten evaluations (every max_iters / 10
    steps, at most 250), warmup over the first tenth (at most 100 steps), the cosine ending at learning_rate / 10,
    and the leak stop on (the first evaluation whose causality probe fails ends the run)."""
    if not isinstance(max_iters, int) or isinstance(max_iters, bool) or max_iters < 1:
        raise ValueError(f"max_iters must be an integer >= 1, got {max_iters!r}")
    return TrainConfig(
        batch_size=batch_size,
        max_iters=max_iters,
        max_seconds=max_seconds,
        learning_rate=learning_rate,
        min_lr=learning_rate / 10,
        warmup_iters=min(100, max_iters // 10),
        eval_interval=eval_interval or max(1, min(250, max_iters // 10)),
        eval_iters=eval_iters,
        seed=seed,
        val_fraction=val_fraction,
        causal=causal,
        num_threads=num_threads,
        fast_attention=fast_attention,
        leak_stop=leak_stop,
    )


def parameter_count(config: ModelConfig, vocab_size: int) -> int:
    """Trainable parameters of GPT(config) with `vocab_size`, in closed form (the tied embedding counted once):
    V*C for the embedding, per block two LayerNorms (4C) + qkv and proj (4C^2) + MLP (2 * mlp_ratio * C^2),
    and the final LayerNorm (2C)."""
    C = config.d_model
    per_block = 4 * C + 4 * C * C + 2 * config.mlp_ratio * C * C
    return vocab_size * C + config.n_layer * per_block + 2 * C


def load_run_corpus(source: str, text: str | bytes | None = None) -> Corpus:
    """The corpus of a run: `text` (an upload: data, never executed) named `source`, or, without text,
    `load_corpus(source)` ("stdlib" or a file path). Raises CorpusError with a message for the user."""
    if text is None:
        return load_corpus(source)
    return corpus_from_text(source, text)


def check_fits(corpus: Corpus, preset_name: str, train_config: TrainConfig) -> None:
    """Raise CorpusError unless both sides of the document split hold one context window of the preset
    (the check train() makes, done before a run waits in the queue). One character is one token."""
    context = _preset(preset_name).context_length
    train_docs, val_docs = split_documents(corpus, train_config.val_fraction, train_config.seed)
    check_split_size(sum(len(d.text) + 1 for d in train_docs), sum(len(d.text) + 1 for d in val_docs), context)


def default_probe(corpus: Corpus, train_config: TrainConfig) -> str:
    """PYTHON_PROBE for the standard library; otherwise the first PROBE_CHARS characters of the first
    validation document (text the model never trains on, in its own alphabet)."""
    if corpus.source == STDLIB_SOURCE:
        return PYTHON_PROBE
    _, val_docs = split_documents(corpus, train_config.val_fraction, train_config.seed)
    text = val_docs[0].text
    return (text.lstrip() or text)[:PROBE_CHARS]


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs. `out_dir` is a Path or a zero-argument callable returning one (a JobDir:
    the page names the directory after the job id it gets back), called when the run starts, so the
    directory is checked before training."""

    corpus: Corpus
    preset_name: str
    train_config: TrainConfig
    out_dir: Path | Callable[[], Path]
    snapshot_text: str = PYTHON_PROBE
    snapshot_layer: int = 0
    snapshot_head: int = 0

    def __post_init__(self):
        if not isinstance(self.corpus, Corpus) or not isinstance(self.train_config, TrainConfig):
            raise ValueError("RunSpec needs a Corpus (load_run_corpus) and a TrainConfig")
        config = _preset(self.preset_name)
        if not isinstance(self.snapshot_text, str) or not self.snapshot_text:
            raise ValueError(f"snapshot_text must be a non-empty string, got {self.snapshot_text!r}")
        if not 0 <= self.snapshot_layer < config.n_layer or not 0 <= self.snapshot_head < config.n_head:
            raise ValueError(
                f"snapshot layer {self.snapshot_layer}, head {self.snapshot_head} do not exist in "
                f"preset {self.preset_name!r} ({config.n_layer} layers, {config.n_head} heads)"
            )

    def command(self) -> list[str]:
        """The command line recorded in the bundle: says it came from the app, with its settings."""
        cfg = self.train_config
        argv = [
            *APP_COMMAND,
            "--corpus",
            self.corpus.source,
            "--preset",
            self.preset_name,
            "--max-iters",
            str(cfg.max_iters),
            "--seed",
            str(cfg.seed),
            "--batch-size",
            str(cfg.batch_size),
            "--learning-rate",
            repr(cfg.learning_rate),
            "--eval-interval",
            str(cfg.eval_interval),
        ]
        if cfg.max_seconds is not None:
            argv += ["--max-seconds", repr(cfg.max_seconds)]
        return argv + ([] if cfg.causal else ["--no-causal-mask"]) + ([] if cfg.leak_stop else ["--no-leak-stop"])


# ---- events and results --------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """One head's attention over the probe text at one evaluation. weights[t][s]: query t, key s."""

    step: int
    layer: int
    head: int
    tokens: list[str]  # display pieces of the probe ('␣' for a space, '↵' for a newline)
    weights: list[list[float]]  # (T, S), S = T
    causal: bool

    @property
    def future_weight(self) -> float:
        """Mean over query rows of the weight on keys to the right of the query (s > t): 0 with the
        causal mask; without it, the share of attention spent reading ahead."""
        T = len(self.weights)
        return math.fsum(math.fsum(row[t + 1 :]) for t, row in enumerate(self.weights)) / T

    @property
    def mean_max_weight(self) -> float:
        """Mean over query rows of the row's largest weight: 1 = every query reads one key only."""
        return math.fsum(max(row) for row in self.weights) / len(self.weights)


@dataclass(frozen=True)
class Progress:
    """A compact TrainEvent (no model). `loss` is the batch loss ("step") or the train-sample evaluation
    ("eval", "done"); eta_seconds is None until the first step."""

    kind: str  # "step" | "eval" | "done"
    step: int
    max_iters: int
    loss: float
    val_loss: float
    lr: float
    tokens_per_second: float
    elapsed: float
    eta_seconds: float | None
    snapshot: Snapshot | None = None  # on "eval" events
    probe: CausalityProbe | None = None  # on "eval" events: core.model.leak.causality_probe at this step

    @property
    def fraction(self) -> float:
        """Share of the run done, in [0, 1]: by time when an ETA is known (it includes the time budget)."""
        if self.kind == "done":
            return 1.0
        if self.eta_seconds is None or self.elapsed + self.eta_seconds <= 0:
            return min(1.0, self.step / self.max_iters)
        return min(1.0, self.elapsed / (self.elapsed + self.eta_seconds))


@dataclass(frozen=True)
class RunResult:
    bundle_path: Path
    metrics: dict  # train_loss, val_loss, iters, seconds, tokens_per_second, stop_reason ("leak": the probe)
    stopped: bool  # stopped by the user; the bundle still holds what was learned
    leak: EvalRecord | None  # the first evaluation whose causality probe failed (it stopped the run when
    # metrics["stop_reason"] == "leak"), else None
    safe: bool
    unsafe_reason: str | None
    history: tuple  # EvalRecord per evaluation, step 0 first
    preset_name: str
    corpus_source: str
    corpus_fingerprint: str
    causal: bool
    max_iters: int  # the step budget (evaluations fall on the same steps for the same budget)
    num_parameters: int


# ---- the work ------------------------------------------------------------------------------------


def attention_snapshot(
    model: GPT, tokenizer: CharTokenizer, text: str, *, layer: int, head: int, step: int
) -> Snapshot:
    """The weights of `head` in `layer` over `text` (cut to the context length), from the model's own forward."""
    ids = tokenizer.encode(text)[: model.config.context_length]
    idx = torch.tensor([ids], dtype=torch.long)  # (1, T)
    with torch.no_grad():
        weights = model(idx, return_weights=True).weights[layer][0, head]  # (T, S)
    return Snapshot(step, layer, head, [tokenizer.display_piece(i) for i in ids], weights.tolist(), model.config.causal)


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
) -> tuple[TrainResult, Path]:
    """Train PRESETS[preset_name] on `corpus` and save the bundle (also after an early stop): the part the
    CLI and the app share. The output directory is resolved and checked (check_out_dir) before training,
    so a bad path fails in a second, not after the run. The bundle is marked unsafe when the run's own
    evaluations broke the leak rule (`leak_unsafe_reason`)."""
    target = check_out_dir(out_dir() if callable(out_dir) else out_dir, overwrite=overwrite)
    result = train(_preset(preset_name), train_config, corpus, callback=callback, should_stop=should_stop)
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
    the run can save where it is told (BundleError otherwise: a JobDir's parent must be writable, a path
    new or empty). `snapshot_text` defaults to `default_probe`."""
    check_fits(corpus, preset_name, train_config)
    if isinstance(out_dir, JobDir):
        out_dir.check()
    elif not callable(out_dir):
        check_out_dir(out_dir)
    text = default_probe(corpus, train_config) if snapshot_text is None else snapshot_text
    spec = RunSpec(corpus, preset_name, train_config, out_dir, text, snapshot_layer, snapshot_head)
    return functools.partial(run_training, spec)


class JobDir:
    """A run directory named after the job id, which JobQueue.submit returns only after the job exists:
    pass the instance as `out_dir`, then call `name(job_id)`; the run waits (up to `timeout`) for the name.
    A run directory that already exists with anything in it is refused, never replaced (check_out_dir)."""

    def __init__(self, parent: Path, timeout: float = 60.0):
        self.parent, self.timeout = Path(parent), timeout
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
        if not self._named.wait(self.timeout):
            raise RuntimeError("the run directory was never named (JobDir.name was not called after submit)")
        return self.parent / self._name


# ---- display helpers (plain text, used by the page and the tests) --------------------------------


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes} min {s:02d} s" if minutes else f"{s} s"


def _preset(name: str) -> ModelConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
