"""One training run as a job: the Training page's train, tune and keep, in a process of its own.

The page turns a run into a job on disk; the run's process (`python -m` this module, started by the queue) trains,
tunes the suggestion threshold on the validation documents, and keeps the run record. It logs what is saved before
each step after the save, so a run killed while tuning or keeping is read back with its bundle. A run without the
causal mask, or whose evaluations failed a causality probe, is saved marked unsafe. Why `python -m` rather than a
multiprocessing child: it shares nothing with the worker, survives a worker's restart, and keeps everything in its
run folder, where any worker reads it. It trains on one torch thread: the other cores serve the pages.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from core import i18n
from core.i18n import N_, _
from core.model.bundle import MANIFEST, Bundle, BundleError, check_out_dir, load_bundle, save_bundle
from core.model.bundle_checks import read_manifest
from core.model.corpus import (
    MAX_BYTES,
    STDLIB_SOURCE,
    Corpus,
    CorpusError,
    check_split_size,
    corpus_from_text,
    load_corpus,
    split_documents,
)
from core.model.distributed import Ranks
from core.model.gpt import PRESETS, ModelConfig
from core.model.init_from import check_base, extended_tokenizer
from core.model.leak import first_failed_probe
from core.model.tokenizer import CharTokenizer
from core.model.train_config import TrainConfig, train_config_for
from core.model.training import EvalRecord, TrainEvent, TrainResult, train
from core.release.evaluation.tuning import SHORT_RUN_TUNING, tune_bundle
from core.runs.events import Progress, RunResult, attention_snapshot, progress_to_json, result_to_json, sample_line
from core.runs.queue import Work, read_job, record_saved, serve
from core.runs.run_record import BUNDLE, CORPUS_COPY, HashedOwner, keep_run
from core.settings import ROOT

APP_PRESETS = ("tiny", "baby", "default")  # the sizes the app offers ("large" is for benchmarks)
PYTHON_PROBE = "if key in self:\n    return key"  # 30 characters: fits every preset's context
PROBE_CHARS = 32  # an uploaded corpus probes with the start of its first validation document
STEP_REPORT_SECONDS = 0.2  # at most one step event this often
APP_COMMAND = ("attention-lab-app", "views/training.py", "train")  # marks a bundle trained from the app
# The models a page's run may start from, by name: the page offers these and nothing else (no path from a browser).
SHIPPED_BASES: dict[str, Path] = {"code": ROOT / "models" / "default", "prose": ROOT / "models" / "prose"}

# The typing a page run's threshold is tuned on: 1,500 characters in stretches of 100 (the CLI types 20,000 in stretches
# of 500), so Stop gives a tuned model within seconds (bench/bench_page_run.py); each typed position costs a forward
# pass over its window, and 5,000 characters took 33-56 s.
PAGE_TUNING = dataclasses.replace(SHORT_RUN_TUNING, typing_chars=1_500)
# What a run that failed after its save left undone: logged in English, translated where it is shown (JobQueue.view).
NOT_TUNED = N_(
    "the model was saved, but its suggestion threshold was not tuned (it suggests at the default) and the run was "
    "not kept on the server: it is listed for this session only"
)
NOT_KEPT = N_(
    "the model was saved and tuned, but the run was not kept on the server: it is listed for this session only"
)


# ---- what a run needs, checked before it queues ----------------------------------------------------


# The page's default run: a model that writes words and suggests something after about a minute on one thread (the
# baby preset reached validation loss ~1.9 on the standard library in 55 s; tiny's 500 steps wrote noise), its time
# budget reached before its step budget; evaluations every few seconds of wall time (cheap estimates, the last full).
PAGE_PRESET, PAGE_ITERS, PAGE_SECONDS, PAGE_EVAL_SECONDS = "baby", 5000, 60, 4
# Windows per step of a page's run: on one thread a step's cost is mostly its fixed overhead, so a minute holds about
# twice the steps of 6 windows as of 12 (bench/bench_page_run.py on a 2-core machine without AVX-512, baby on the
# standard library: 12 windows 431 steps, validation loss 2.08; 6 windows 764 and 951 steps, 1.93 and 1.77).
PAGE_BATCH_SIZE = 6


def page_train_config(
    iters: int,
    seconds: float,
    *,
    seed: int = 0,
    causal: bool = True,
    leak_stop: bool = True,
) -> TrainConfig:
    """The TrainConfig of a run started on the page: one torch thread (the server's other core stays free for everyone
    else's pages), PAGE_BATCH_SIZE windows a step, an evaluation every PAGE_EVAL_SECONDS."""
    return train_config_for(
        iters,
        max_seconds=float(seconds),
        batch_size=PAGE_BATCH_SIZE,
        seed=seed,
        causal=causal,
        num_threads=1,
        eval_seconds=PAGE_EVAL_SECONDS,
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
    context = preset_config(preset_name).context_length
    train_docs, val_docs = split_documents(corpus, train_config.val_fraction, train_config.seed)
    check_split_size(sum(len(d.text) + 1 for d in train_docs), sum(len(d.text) + 1 for d in val_docs), context)


def shipped_base(name: str) -> Path:
    """The bundle folder of the shipped model `name` ("code": models/default, "prose": models/prose); ValueError
    naming the choices otherwise."""
    if name not in SHIPPED_BASES:
        raise ValueError(f"a run starts from one of the shipped models {sorted(SHIPPED_BASES)}, not {str(name)[:40]!r}")
    return SHIPPED_BASES[name]


def base_preset(name: str) -> str:
    """The preset whose architecture the shipped model `name` has (a run from it trains that architecture), read
    from its manifest (the one bounded reader); BundleError when it is unreadable or matches no preset."""
    path = shipped_base(name)
    arch = read_manifest(path / MANIFEST).get("architecture")
    for preset_name, config in PRESETS.items():
        fields = dataclasses.asdict(config)
        if isinstance(arch, dict) and all(arch.get(k) == v for k, v in fields.items() if k != "vocab_size"):
            return preset_name
    raise BundleError(f"the shipped model {name!r} ({path}) has no preset's architecture; reinstall the lab")


def run_vocabulary_size(text: str, init_from: str | None = None) -> int:
    """V of a run on `text`: its characters and the special tokens, and with `init_from` the shipped model's
    characters too (the vocabulary train() grows from it)."""
    if init_from is None:
        return CharTokenizer.from_text(text).vocab_size
    return extended_tokenizer(load_bundle(shipped_base(init_from)).tokenizer, text).vocab_size


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
    init_from: str | None = None  # a shipped model to start from (SHIPPED_BASES); preset_name is then its size

    def __post_init__(self):
        if not isinstance(self.corpus, Corpus) or not isinstance(self.train_config, TrainConfig):
            raise ValueError("RunSpec needs a Corpus (load_run_corpus) and a TrainConfig")
        config = preset_config(self.preset_name)
        if self.init_from is not None and base_preset(self.init_from) != self.preset_name:
            raise ValueError(
                f"a run from the shipped model {self.init_from!r} trains its architecture, preset "
                f"{base_preset(self.init_from)!r}, not {self.preset_name!r}"
            )
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
            *(
                ["--preset", self.preset_name]
                if self.init_from is None
                else ["--init-from", shipped_base(self.init_from).relative_to(ROOT).as_posix()]
            ),
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


def preset_config(name: str) -> ModelConfig:
    """PRESETS[name] (vocab_size still 0: train() fills it in); ValueError naming the presets otherwise."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]


# ---- the work ------------------------------------------------------------------------------------


def run_training(spec: RunSpec, report: Callable[[Progress], None], should_stop: Callable[[], bool]) -> RunResult:
    """The job: train (from the shipped model spec.init_from, if set), report Progress (with a Snapshot at each
    evaluation), save the bundle."""
    base = None if spec.init_from is None else check_base(load_bundle(shipped_base(spec.init_from)))
    # the tokenizer train() builds from the same text
    if base is None:
        tokenizer = CharTokenizer.from_text(spec.corpus.text)
    else:
        tokenizer = extended_tokenizer(base.tokenizer, spec.corpus.text)
    last_step_report = [-math.inf]

    def forward(event: TrainEvent) -> None:
        now = time.monotonic()
        if event.kind == "step" and event.step < event.max_iters and now - last_step_report[0] < STEP_REPORT_SECONDS:
            return
        if event.kind == "step":
            last_step_report[0] = now
        snapshot, sample = None, None
        if event.kind == "eval" and event.model is not None:
            sample = sample_line(event.model, tokenizer, spec.snapshot_text)
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
                sample,
            )
        )

    result, path = train_and_save(
        spec.corpus,
        spec.preset_name if base is None else None,
        spec.train_config,
        spec.out_dir,
        base=base,
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
        spec.init_from,
    )


def train_and_save(
    corpus: Corpus,
    preset_name: str | None,
    train_config: TrainConfig,
    out_dir: Path | Callable[[], Path],
    *,
    base: Bundle | None = None,
    command: Sequence[str],
    callback: Callable[[TrainEvent], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    overwrite: bool = False,
    ranks: Ranks | None = None,
    launch_command: Sequence[str] | None = None,
) -> tuple[TrainResult, Path | None]:
    """Train PRESETS[preset_name], or continue from `base` (a bundle passed by check_base; preset_name None: the
    architecture is the base's, and the manifest records the base's version and corpus), on `corpus` and save the
    bundle (also after an early stop): the part the CLI and the app share. The output directory is resolved and
    checked (check_out_dir) before training, so a bad path fails in a second, not after the run. The bundle is
    marked unsafe when the run's own evaluations broke the leak rule (`leak_unsafe_reason`).

    A distributed run (`ranks` of a joined process group): every rank trains, rank 0
    alone checks the directory and writes the bundle, whose manifest records the world size and
    `launch_command` (the torchrun line; `command` by default); the other ranks return (result, None)."""
    if (preset_name is None) == (base is None):
        raise ValueError("train_and_save needs exactly one of a preset name and a base bundle to start from")
    ranks = Ranks() if ranks is None else ranks
    target = check_out_dir(out_dir() if callable(out_dir) else out_dir, overwrite=overwrite) if ranks.is_main else None
    result = train(
        None if preset_name is None else preset_config(preset_name),
        train_config,
        corpus,
        base=None if base is None else (base.model, base.tokenizer),
        callback=callback,
        should_stop=should_stop,
        ranks=ranks,
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
        base=base,
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
    init_from: str | None = None,
) -> Callable[[Callable, Callable], RunResult]:
    """A `work(report, should_stop)` for JobQueue.submit from plain arguments: `corpus_text` (an upload)
    named `corpus_source`, or without text "stdlib" / a file path; `init_from` a shipped model's name (RunSpec).
    Raises CorpusError now, before the run waits in line."""
    return work_for_corpus(
        load_run_corpus(corpus_source, corpus_text),
        preset_name,
        train_config,
        out_dir,
        snapshot_text=snapshot_text,
        snapshot_layer=snapshot_layer,
        snapshot_head=snapshot_head,
        init_from=init_from,
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
    init_from: str | None = None,
) -> Callable[[Callable, Callable], RunResult]:
    """The same for a corpus already loaded; checks that it fits the preset (CorpusError otherwise) and that
    the run can save where it is told (BundleError otherwise: a path new or empty). `snapshot_text` defaults
    to `default_probe`."""
    check_fits(corpus, preset_name, train_config)
    if not callable(out_dir):
        check_out_dir(out_dir)
    text = default_probe(corpus, train_config) if snapshot_text is None else snapshot_text
    spec = RunSpec(corpus, preset_name, train_config, out_dir, text, snapshot_layer, snapshot_head, init_from)
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
    init_from: str | None = None,
) -> tuple[dict, dict[str, bytes]]:
    """(payload, files) for JobQueue.submit: the run's settings as JSON, and an upload's text as
    CORPUS_COPY (the standard library is read again from this Python). Checked now, before the run waits in line:
    the text fits the preset (CorpusError), the probe, layer and head exist (ValueError)."""
    check_fits(corpus, preset_name, train_config)
    text = default_probe(corpus, train_config) if snapshot_text is None else snapshot_text
    RunSpec(corpus, preset_name, train_config, Path(BUNDLE), text, snapshot_layer, snapshot_head, init_from)  # checks
    payload = {
        "corpus": {"source": corpus.source, "fingerprint": corpus.fingerprint, "label": corpus_label},
        "preset": preset_name,
        "train_config": dataclasses.asdict(train_config),
        "snapshot": {"text": text, "layer": snapshot_layer, "head": snapshot_head},
        "init_from": init_from,
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
    init_from = payload.get("init_from")  # a name RunSpec confines to SHIPPED_BASES (older jobs have none)
    spec = RunSpec(
        corpus,
        str(payload["preset"]),
        cfg,
        run_dir / BUNDLE,
        snap["text"],
        snap["layer"],
        snap["head"],
        None if init_from is None else str(init_from),
    )
    return spec, label


def check_runs_dir(runs_dir: Path) -> None:
    """BundleError unless a new run folder can be created under `runs_dir` (before a run is queued)."""
    check_out_dir(Path(runs_dir) / f".unnamed-{uuid.uuid4().hex}")  # a name no run has: checks the parent


# ---- the page's run in its own process: train, tune, keep ---------------------------------------


def page_work(run_dir: Path) -> Work:
    """The work of the job in `run_dir`: train, tune, keep; returns the RunResult as JSON."""
    owner, payload = read_job(run_dir)

    def work(report, should_stop) -> dict:
        spec, corpus_label = spec_from_job(run_dir, payload)  # inside the work: a bad job is its failure
        result = run_training(spec, report, should_stop)
        record_saved(run_dir, result_to_json(result, run_dir), NOT_TUNED)
        try:
            tune_bundle(result.bundle_path, corpus=spec.corpus, config=PAGE_TUNING)
        except (BundleError, CorpusError, ValueError):
            pass
        else:
            record_saved(run_dir, result_to_json(result, run_dir), NOT_KEPT)
        try:
            keep_run(
                result.bundle_path,
                preset=spec.preset_name,
                corpus_label=corpus_label,
                owner_token=HashedOwner(owner),
                corpus_text=None if spec.corpus.source == STDLIB_SOURCE else spec.corpus.text,
            )
        except (BundleError, OSError, ValueError):
            pass
        return result_to_json(result, run_dir)

    return work


def main(argv: list[str] | None = None) -> int:
    run_dir, slots = (sys.argv[1:] if argv is None else argv)[:2]
    torch.set_num_threads(1)
    serve(Path(run_dir), int(slots), page_work(Path(run_dir)), write_event=progress_to_json)
    return 0


# ---- display helpers (plain text, used by the page and the tests) --------------------------------


def ordinal(n: int) -> str:
    """`n` as an English ordinal ("2nd"); in another language the number alone, which its sentence makes an ordinal
    ("puesto {place}", "第 {place} 位")."""
    if i18n.language() != i18n.DEFAULT:
        return str(n)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return _("unknown")
    minutes, s = divmod(int(round(seconds)), 60)
    if minutes:
        return _("{minutes} min {seconds} s").format(minutes=minutes, seconds=f"{s:02d}")
    return _("{seconds} s").format(seconds=s)


if __name__ == "__main__":
    sys.exit(main())
