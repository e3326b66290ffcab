"""What a bundle costs: to keep (storage), to prepare and train (preprocessing, FLOPs), to serve (time and CPU per
suggestion), and whether one machine serves a class in time.

Training compute follows PaLM (Chowdhery et al. 2022, appendix B): per token 6 N FLOPs in the weights plus
12 n_layer d_model T in attention. Serving is timed on the path the Autocomplete page serves through (its best guess
not offered included: a class is on the page). The manifest records wall-clock seconds, so CPU time is given as a
bound: wall seconds times the recorded threads.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from core.database import Database
from core.model.batches import document_stream
from core.model.bundle import load_bundle
from core.model.bundle_checks import BundleError
from core.model.corpus import Corpus, Document, split_documents
from core.model.gpt import ModelConfig
from core.model.tokenizer import CharTokenizer
from core.numbers import integer, is_int, percentile
from core.progress import Progress, steps
from core.release.evaluation.held_out import held_out
from core.release.serving.autocomplete import prompt_for, suggest
from core.release.serving.policy import policy_from_manifest
from core.release.serving.predictor import MAX_CONTEXT
from core.release.serving.transformer_predictor import TransformerPredictor
from core.telemetry.class_queue import MAX_LEARNERS, Queueing, class_queueing, measured_request_rate
from core.telemetry.queueing import MAX_SERVERS
from core.telemetry.store import DEFAULT_PATH as TELEMETRY_DEFAULT
from core.telemetry.store import ENV as TELEMETRY_ENV

DEFAULT_LEARNERS = 30
# DEFAULT_RATE is an assumption: a learner typing about three characters a second, whose editor asks for a suggestion
# when typing pauses, about once a second.
DEFAULT_RATE, MAX_RATE = 1.0, 100.0  # suggestions per learner per second
DEFAULT_LATENCY_TARGET_MS, MAX_LATENCY_TARGET_MS = 100.0, 60_000.0  # 0.1 s: a reply that feels instantaneous
DEFAULT_SAMPLES, MIN_SAMPLES, MAX_SAMPLES = 200, 10, 5_000
TRAINING_PER_HOUR, MAX_TRAINING_PER_HOUR = 2.0, 3_600.0
MAX_TRAINING_SLOTS = 64  # training runs at once; at least one (with none, training never runs: no finite wait)
MAX_SEED = 2**31 - 1
MAX_WALK_ENTRIES = 200_000  # files counted per storage figure


@dataclass(frozen=True)
class Storage:
    bundle_bytes: int
    registry_bytes: int
    telemetry_bytes: int  # the database and its -wal / -shm files
    registry_path: str
    telemetry_path: str


@dataclass(frozen=True)
class Preprocessing:
    preprocessing_seconds: float  # the three steps below
    load_seconds: float | None  # reading the corpus and cutting it into documents; None when handed over loaded
    vocabulary_seconds: float  # CharTokenizer.from_text over the whole text
    stream_seconds: float  # the split and document_stream (encoding) of both sides
    documents: int
    characters: int
    tokens: int


@dataclass(frozen=True)
class Training:
    parameters: int
    iters: int
    batch_size: int
    context_length: int
    tokens: int  # iters * batch_size * context_length
    flops_per_token: int
    flops: int
    wall_seconds: float  # the manifest's training seconds, evaluation included
    step_seconds: float  # tokens / tokens_per_second: optimizer steps only
    threads: int | None  # torch threads recorded in the training config (None: torch's default, not recorded)
    cpu_seconds: float | None  # wall_seconds * threads: an upper bound, the manifest has no CPU time
    flops_per_second: float  # flops / step_seconds
    flops_formula: str
    cpu_seconds_basis: str


@dataclass(frozen=True)
class Serving:
    samples: int
    threads: int  # torch threads while timing
    service_p50_ms: float
    service_p95_ms: float
    service_mean_ms: float
    cpu_seconds_per_1000: float  # CPU seconds per 1,000 suggestions
    wall_seconds_per_1000: float
    cpu_clock: str
    service_ms: tuple[float, ...]  # every measured time, in order: the queue draws from these


@dataclass(frozen=True)
class CostReport:
    bundle: str
    version: str
    storage: Storage
    preprocessing: Preprocessing
    training: Training
    serving: Serving
    queueing: Queueing
    notes: tuple[str, ...]

    def to_dict(self) -> dict:
        """Every field, JSON-safe (no NaN or infinity; None where a figure does not exist)."""
        return dataclasses.asdict(self)

    def table(self) -> list[dict]:
        """One row per figure: {figure, value (text), unit}; `python -m core cost` and the Release page show it."""
        s, p, t, v = self.storage, self.preprocessing, self.training, self.serving
        load = "n/a (handed over)" if p.load_seconds is None else _f(p.load_seconds, 3)
        out = [
            ("bundle", f"{s.bundle_bytes:,}", "bytes"),
            ("registry", f"{s.registry_bytes:,}", "bytes"),
            ("telemetry database", f"{s.telemetry_bytes:,}", "bytes"),
            ("preprocessing: read and cut the corpus", load, "s"),
            ("preprocessing: vocabulary", _f(p.vocabulary_seconds, 3), "s"),
            ("preprocessing: split and encode", _f(p.stream_seconds, 3), "s"),
            ("preprocessing total", _f(p.preprocessing_seconds, 3), f"s ({p.characters:,} chars, {p.tokens:,} tokens)"),
            ("parameters", f"{t.parameters:,}", ""),
            ("training tokens", f"{t.tokens:,}", f"({t.iters:,} steps x {t.batch_size} x {t.context_length})"),
            ("training compute", f"{t.flops:.3e}", "FLOPs (6N + 12 n_layer d_model T per token)"),
            ("training wall time", _f(t.wall_seconds, 1), "s (evaluation included)"),
            (
                "training CPU time",
                "n/a" if t.cpu_seconds is None else _f(t.cpu_seconds, 1),
                f"s (wall time x {t.threads} thread: no CPU time recorded)" if t.threads else "s (not recorded)",
            ),
            ("training throughput", f"{t.flops_per_second:.3e}", "FLOP/s in optimizer steps"),
            ("suggestion time p50", _f(v.service_p50_ms), f"ms ({v.samples} held-out prompts, {v.threads} thread)"),
            ("suggestion time p95", _f(v.service_p95_ms), "ms"),
            ("serving CPU per 1,000 suggestions", _f(v.cpu_seconds_per_1000), f"CPU s ({v.cpu_clock})"),
        ]
        return [{"figure": a, "value": b, "unit": c} for a, b, c in out + self.queueing.rows()]


def _f(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"


# ---- inputs -------------------------------------------------------------------------------------


def _number(name: str, value: object, low: float, high: float, *, open_low: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value > high or value < low or (open_low and value == low):
        raise ValueError(f"{name} must lie in {'(' if open_low else '['}{low:g}, {high:g}], got {value!r}")
    return float(value)


# ---- storage ------------------------------------------------------------------------------------


def tree_bytes(path: Path) -> int:
    """Bytes of the regular files under `path` (or of `path` itself), symbolic links not followed; 0 if absent."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return 0
    if stat.S_ISREG(info.st_mode):
        return info.st_size
    if not stat.S_ISDIR(info.st_mode):
        return 0
    total, seen = 0, 0
    for root, _dirs, files in os.walk(path, followlinks=False):
        for name in files:
            seen += 1
            if seen > MAX_WALK_ENTRIES:
                raise ValueError(f"{str(path)!r} holds more than {MAX_WALK_ENTRIES:,} files; count it another way")
            info = os.lstat(os.path.join(root, name))
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


def telemetry_bytes(db: Path | str) -> int:
    """The database file plus its -wal and -shm siblings (0 for each that does not exist); on a PostgreSQL server
    (a LAB_DATABASE_URL) its telemetry tables with their indexes, 0 when it cannot be read."""
    if isinstance(db, str) and "://" in db:
        from core.database import Database
        from core.telemetry.schema import EVENTS, META

        server = Database(db, path_env="", default="", what="telemetry database", timeout_ms=2000, error=RuntimeError)
        try:
            return server.size([EVENTS.name, META.name])
        except Exception:  # noqa: BLE001 - a storage figure of 0 with the note below, never a failed report
            return 0
        finally:
            server.dispose()
    return sum(tree_bytes(Path(f"{db}{suffix}")) for suffix in ("", "-wal", "-shm"))


# ---- preprocessing and training -----------------------------------------------------------------


def _preprocessing(corpus: Corpus, load_seconds: float | None, val_fraction: float, seed: int) -> Preprocessing:
    began = time.perf_counter()
    tokenizer = CharTokenizer.from_text(corpus.text)
    vocabulary = time.perf_counter() - began
    began = time.perf_counter()
    train_docs, val_docs = split_documents(corpus, val_fraction, seed)
    tokens = document_stream(train_docs, tokenizer).numel() + document_stream(val_docs, tokenizer).numel()
    stream = time.perf_counter() - began
    total = vocabulary + stream + (load_seconds or 0.0)
    return Preprocessing(total, load_seconds, vocabulary, stream, len(corpus.documents), corpus.num_chars, tokens)


# N counts every parameter once, the tied embedding too, since the LM head is a real V x C matmul; the attention term
# is q k^T and weights @ v over all T keys, forward and backward. Kaplan et al. 2020 (section 2.1) count the same 6 N
# with half that attention term. Evaluation and the causality probes are not counted.
def training_flops(config: ModelConfig, parameters: int, tokens: int) -> tuple[int, int]:
    """(FLOPs per training token, FLOPs): 6 N + 12 n_layer d_model T per token (PaLM, appendix B)."""
    per_token = 6 * parameters + 12 * config.n_layer * config.d_model * config.context_length
    return per_token, per_token * tokens


def _recorded(name: str, value: object, kind: type) -> int | float:
    """A positive int (kind int) or finite positive number (kind float) the manifest records, else BundleError."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok or (kind is int and not isinstance(value, int)):
        raise BundleError(f"the manifest's training {name} is {value!r}, not a positive {kind.__name__}")
    return kind(value)


def _training(manifest: dict, config: ModelConfig, parameters: int) -> Training:
    training = manifest.get("training") or {}
    metrics, train_config = training.get("metrics") or {}, training.get("config") or {}
    iters = int(_recorded("metrics.iters", metrics.get("iters"), int))
    batch = int(_recorded("config.batch_size", train_config.get("batch_size"), int))
    wall = float(_recorded("metrics.seconds", metrics.get("seconds"), float))
    tps = float(_recorded("metrics.tokens_per_second", metrics.get("tokens_per_second"), float))
    tokens = iters * batch * config.context_length
    per_token, flops = training_flops(config, parameters, tokens)
    threads = train_config.get("num_threads")
    threads = threads if is_int(threads) and threads >= 1 else None
    step_seconds = tokens / tps
    basis = (
        f"wall seconds x {threads} torch thread(s): the manifest records wall-clock time, not CPU time"
        if threads
        else "not known: the manifest records wall-clock time only and no thread count (torch's default)"
    )
    return Training(
        parameters=parameters,
        iters=iters,
        batch_size=batch,
        context_length=config.context_length,
        tokens=tokens,
        flops_per_token=per_token,
        flops=flops,
        wall_seconds=float(wall),
        step_seconds=step_seconds,
        threads=threads,
        cpu_seconds=float(wall) * threads if threads else None,
        flops_per_second=flops / step_seconds,
        flops_formula="(6 * parameters + 12 * n_layer * d_model * context_length) * tokens (PaLM, appendix B)",
        cpu_seconds_basis=basis,
    )


# ---- serving ------------------------------------------------------------------------------------


def page_suggestion(predictor, text: str, policy, template: str) -> None:
    """One suggestion as the Autocomplete page serves it: the prompt built, the best guess asked for too."""
    suggest(
        predictor, prompt_for(predictor, text, policy, template=template), policy, best_guess=True
    ).suggestion_or_raise()


# Its own loop rather than the evaluation's latency measurement: that one keeps only percentiles, and the queue needs
# every time.
def measure_serving(
    predictor, manifest: dict, documents: Sequence[Document], samples: int, seed: int, progress: Progress | None = None
) -> Serving:
    """Time `samples` suggestions after seeded prefixes of the documents (weighted by length), after a warm-up;
    `progress` hears of each one."""
    docs = [d for d in documents if d.text]
    if not docs:
        raise ValueError("the held-out documents are empty: there is no text to time suggestions on")
    policy = policy_from_manifest(manifest)
    template = manifest.get("prompt_template", "{prompt}")
    rng = random.Random(seed)
    prompts = []
    for d in rng.choices(docs, weights=[len(d.text) for d in docs], k=samples):
        t = rng.randrange(1, len(d.text) + 1)
        prompts.append(d.text[max(0, t - MAX_CONTEXT) : t])
    threads = torch.get_num_threads()
    clock, clock_name = (time.thread_time, "thread_time") if threads == 1 else (time.process_time, "process_time")
    page_suggestion(predictor, prompts[0], policy, template)
    wall_ms, cpu = [], 0.0  # the warm-up above: first-call allocations
    for text in steps(prompts, progress, "timing suggestions"):
        w0, c0 = time.perf_counter(), clock()
        page_suggestion(predictor, text, policy, template)
        cpu += clock() - c0
        wall_ms.append((time.perf_counter() - w0) * 1000.0)
    p50, p95 = percentile(wall_ms, 50), percentile(wall_ms, 95)  # nearest rank: each one a time measured
    assert p50 is not None and p95 is not None  # samples >= MIN_SAMPLES
    return Serving(
        samples=samples,
        threads=threads,
        service_p50_ms=p50,
        service_p95_ms=p95,
        service_mean_ms=float(np.mean(wall_ms)),
        cpu_seconds_per_1000=cpu / samples * 1000.0,
        wall_seconds_per_1000=float(np.mean(wall_ms)),  # mean ms per suggestion = seconds per 1,000
        cpu_clock=clock_name,
        service_ms=tuple(wall_ms),
    )


# ---- the report ---------------------------------------------------------------------------------


def cost_report(
    bundle_dir: str | os.PathLike,
    *,
    registry: str | os.PathLike,
    telemetry: str | os.PathLike,
    corpus: Corpus | str | None = None,
    learners: int = DEFAULT_LEARNERS,
    rate: float | None = None,
    latency_target_ms: float = DEFAULT_LATENCY_TARGET_MS,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    cores: int | None = None,
    training_slots: int = 1,
    training_per_hour: float = TRAINING_PER_HOUR,
    progress: Progress | None = None,
) -> CostReport:
    """The cost of the transformer bundle at `bundle_dir` (module docstring). `rate` None measures it from
    `telemetry` (else DEFAULT_RATE); `corpus` None reads the source the manifest names; `cores` None is this
    machine's; `progress` hears the timed suggestions. Every input is bounded first: a bad one raises ValueError
    naming it and its range."""
    learners = integer("learners", learners, 1, MAX_LEARNERS)
    if rate is not None:
        rate = _number("rate", rate, 0.0, MAX_RATE)
    target_ms = _number("latency_target_ms", latency_target_ms, 0.0, MAX_LATENCY_TARGET_MS)
    samples = integer("samples", samples, MIN_SAMPLES, MAX_SAMPLES)
    seed = integer("seed", seed, 0, MAX_SEED)
    cores = integer("cores", (os.cpu_count() or 1) if cores is None else cores, 1, MAX_SERVERS)
    training_slots = integer("training_slots", training_slots, 1, MAX_TRAINING_SLOTS)
    training_per_hour = _number("training_per_hour", training_per_hour, 0.0, MAX_TRAINING_PER_HOUR, open_low=False)
    registry = Path(registry)
    # The stores' own rule (core.database): LAB_DATABASE_URL's value is a URL (never a file, even without a scheme),
    # shown without its password; one that cannot be used is a note, and its storage and rate are not measured.
    located = Database(
        telemetry, path_env=TELEMETRY_ENV, default=TELEMETRY_DEFAULT, what="telemetry database", timeout_ms=2000,
        error=ValueError,
    )  # fmt: skip
    shown, unusable = located.name, located.problem
    db: Path | str | None = located.path if located.path is not None else None if unusable else str(telemetry).strip()
    bundle = load_bundle(bundle_dir)
    notes: list[str] = []
    if isinstance(corpus, Corpus):
        split, load_seconds = held_out(bundle.manifest, corpus), None
        notes.append("the corpus was handed over already loaded, so reading it is not timed")
    else:
        began = time.perf_counter()
        split = held_out(bundle.manifest, corpus)  # reads the corpus; CorpusError when it cannot be read back
        load_seconds = time.perf_counter() - began
    notes += split.warnings
    storage = Storage(
        tree_bytes(Path(bundle_dir)), tree_bytes(registry), 0 if db is None else telemetry_bytes(db), str(registry),
        shown,
    )  # fmt: skip
    if storage.registry_bytes == 0:
        notes.append(f"nothing is stored in a registry at {str(registry)!r}: 0 bytes")
    if unusable is not None:
        notes.append(f"the telemetry database cannot be used: {unusable}; its size and request rate are not measured")
    elif storage.telemetry_bytes == 0:
        notes.append(f"no telemetry database at {shown!r}: 0 bytes")
    preprocessing = _preprocessing(split.corpus, load_seconds, split.val_fraction, split.seed)
    training = _training(bundle.manifest, bundle.config, bundle.model.num_parameters())
    predictor = TransformerPredictor(bundle.model, bundle.tokenizer)
    serving = measure_serving(predictor, bundle.manifest, split.val, samples, seed, progress)
    source, why = "given", "given by the caller"
    if rate is None:
        rate, why = (None, "the telemetry database cannot be used") if db is None else measured_request_rate(db)
        source = "default" if rate is None else "telemetry"
        if rate is None:
            rate, why = DEFAULT_RATE, f"{why}; assumed {DEFAULT_RATE:g} a second (core.telemetry.cost.DEFAULT_RATE)"
        elif rate > MAX_RATE:
            rate, why = MAX_RATE, f"{why}, above MAX_RATE: capped at {MAX_RATE:g}"
    queueing = class_queueing(
        serving.service_ms,
        training.wall_seconds,
        learners=learners,
        rate=rate,
        rate_source=source,
        rate_note=why,
        cores=cores,
        training_slots=training_slots,
        training_per_hour=training_per_hour,
        target_ms=target_ms,
        seed=seed,
    )
    if queueing.serving_workers > 1:
        notes.append(
            f"the suggestion path is modelled as {queueing.serving_workers} independent workers; Python's GIL "
            "serialises part of each suggestion, so more than one worker is optimistic"
        )
    return CostReport(
        str(bundle_dir), bundle.version, storage, preprocessing, training, serving, queueing, tuple(notes)
    )
