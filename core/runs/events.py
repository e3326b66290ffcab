"""What a training run reports: attention snapshots, progress events and the run's result.

Each event becomes a compact `Progress` with no model in it, so a page can keep every one; an evaluation carries
a `Snapshot`, one head's attention over a fixed probe text, drawn from the real model, and a line the model writes
after that text (`sample_line`), so a room sees noise turn into words while the loss falls. A run trains in a process of
its own, so these cross to the page as JSON lines in the run's folder; that folder is data others could write, so
reading checks every field's type, bounds the snapshot and confines the bundle's path to the folder.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from core.agreement import Agreement
from core.model.engine import generate
from core.model.gpt import GPT
from core.model.leak import CausalityProbe
from core.model.prompt import encode_for_model
from core.model.sampling import SampleConfig
from core.model.tokenizer import EOS_ID, CharTokenizer
from core.model.training import EvalRecord
from core.numbers import is_int

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
    sample: str | None = None  # on "eval" events: sample_line, what the model writes now after the probe text

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
    init_from: str | None = None  # the shipped model the run started from (core.runs.job.SHIPPED_BASES), or None


# ---- the snapshot ---------------------------------------------------------------------------------


def attention_snapshot(
    model: GPT, tokenizer: CharTokenizer, text: str, *, layer: int, head: int, step: int
) -> Snapshot:
    """The weights of `head` in `layer` over `text`, from the model's own forward. A text longer than the
    context keeps its last context_length tokens (the one prompt rule), as everywhere else."""
    enc = encode_for_model(tokenizer, text, model.config.context_length)
    if enc.empty:
        raise ValueError("attention_snapshot needs a non-empty text")
    idx = torch.tensor([enc.ids], dtype=torch.long)  # (1, T)
    with torch.no_grad():
        weights = model(idx, return_weights=True).weights[layer][0, head]  # (T, S)
    return Snapshot(step, layer, head, list(enc.pieces), weights.tolist(), model.config.causal)


# A line at each evaluation: drawn at a temperature below 1 with the same seed every time, so from one evaluation to
# the next only the model changes (greedy decoding of a young model repeats one character; a draw at 1 stays noisy).
SAMPLE_CHARS, SAMPLE_TEMPERATURE, SAMPLE_SEED = 60, 0.8, 0
MAX_SAMPLE_CHARS = 4 * SAMPLE_CHARS  # bounds what a page reads from a file


def sample_line(model: GPT, tokenizer: CharTokenizer, text: str) -> str:
    """What `model` writes now after `text`: up to SAMPLE_CHARS characters, ending early at <eos>."""
    ids = encode_for_model(tokenizer, text, model.config.context_length).ids
    run = SampleConfig(temperature=SAMPLE_TEMPERATURE, max_new_tokens=SAMPLE_CHARS)
    new = []
    for step in generate(model, ids, run, seed=SAMPLE_SEED):
        if step.token == EOS_ID:
            break
        new.append(step.token)
    return tokenizer.decode(new)


# ---- across processes: JSON out in the run, checked objects back in the page ----------------------------

MAX_SNAPSHOT_T = 1024  # far above any preset's context; bounds what a page draws from a file
_DTYPES = ("float64", "float32", "float16", "bfloat16")  # Agreement.rule looks the name up on torch


def progress_to_json(event: Progress) -> dict:
    return dataclasses.asdict(event)


def result_to_json(result: RunResult, run_dir: Path) -> dict:
    """The result with the bundle's path relative to the run's folder (the reader confines it there)."""
    data = dataclasses.asdict(result)
    data["bundle_path"] = Path(result.bundle_path).relative_to(run_dir).as_posix()
    return data


def progress_from_json(data: Any) -> Progress:
    if data["kind"] not in ("step", "eval", "done"):
        raise ValueError(f"unknown event kind {str(data['kind'])[:20]!r}")
    eta = data["eta_seconds"]
    return Progress(
        data["kind"],
        _int(data["step"]),
        _int(data["max_iters"]),
        _float(data["loss"]),
        _float(data["val_loss"]),
        _float(data["lr"]),
        _float(data["tokens_per_second"]),
        _float(data["elapsed"]),
        None if eta is None else _float(eta),
        None if data["snapshot"] is None else _snapshot(data["snapshot"]),
        _probe(data["probe"]),
        _sample(data.get("sample")),  # absent in a run written before samples were recorded
    )


def result_from_json(data: Any, run_dir: Path) -> RunResult:
    bundle = run_dir / _str(data["bundle_path"])
    root = run_dir.resolve()
    if not bundle.resolve().is_relative_to(root) or bundle.resolve() == root:
        raise ValueError("the result's bundle is not inside its run folder")
    metrics = dict(data["metrics"])
    for key in ("train_loss", "val_loss", "tokens_per_second", "seconds"):
        metrics[key] = _float(metrics[key])
    metrics["iters"], metrics["stop_reason"] = _int(metrics["iters"]), _str(metrics["stop_reason"])
    unsafe = data["unsafe_reason"]
    return RunResult(
        bundle,
        metrics,
        _bool(data["stopped"]),
        None if data["leak"] is None else _record(data["leak"]),
        _bool(data["safe"]),
        None if unsafe is None else _str(unsafe),
        tuple(_record(r) for r in data["history"]),
        _str(data["preset_name"]),
        _str(data["corpus_source"]),
        _str(data["corpus_fingerprint"]),
        _bool(data["causal"]),
        _int(data["max_iters"]),
        _int(data["num_parameters"]),
        None if data.get("init_from") is None else _str(data["init_from"]),
    )


def _snapshot(data: Any) -> Snapshot:
    tokens, weights = [_str(t) for t in data["tokens"]], data["weights"]
    T = len(tokens)
    if not 0 < T <= MAX_SNAPSHOT_T or len(weights) != T or any(len(row) != T for row in weights):
        raise ValueError(f"a snapshot must be (T, T) weights over T <= {MAX_SNAPSHOT_T} tokens")
    rows = [[_float(w) for w in row] for row in weights]  # (T, S)
    return Snapshot(_int(data["step"]), _int(data["layer"]), _int(data["head"]), tokens, rows, _bool(data["causal"]))


def _sample(data: Any) -> str | None:
    if data is None:
        return None
    if len(_str(data)) > MAX_SAMPLE_CHARS:
        raise ValueError(f"a sample line must be at most {MAX_SAMPLE_CHARS} characters")
    return data


def _record(data: Any) -> EvalRecord:
    losses = _float(data["train_loss"]), _float(data["val_loss"])
    return EvalRecord(_int(data["step"]), *losses, _float(data["lr"]), _float(data["elapsed"]), _probe(data["probe"]))


def _probe(data: Any) -> CausalityProbe | None:
    if data is None:
        return None
    a = data["agreement"]
    if a["dtype"] not in _DTYPES:
        raise ValueError(f"unknown dtype {str(a['dtype'])[:20]!r}")
    agreement = Agreement(
        _float(a["max_abs_diff"]), _float(a["allowed"]), a["dtype"], _int(a["terms"]), _float(a["scale"])
    )
    leak = data["first_leak"]
    return CausalityProbe(
        agreement,
        _float(data["max_change_after"]),
        tuple(_int(p) for p in data["positions"]),
        _int(data["sequences"]),
        _int(data["length"]),
        None if leak is None else (_int(leak[0]), _int(leak[1])),
    )


def _float(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"expected a number, got {type(x).__name__}")
    return float(x)


def _int(x: Any) -> int:
    if not is_int(x):
        raise ValueError(f"expected an integer, got {type(x).__name__}")
    return x


def _bool(x: Any) -> bool:
    if not isinstance(x, bool):
        raise ValueError(f"expected true or false, got {type(x).__name__}")
    return x


def _str(x: Any) -> str:
    if not isinstance(x, str):
        raise ValueError(f"expected a string, got {type(x).__name__}")
    return x
