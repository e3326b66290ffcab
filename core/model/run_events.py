"""What a training run reports: attention snapshots, progress events and the run's result.

`core.model.runs.run_training` turns each `core.model.training.TrainEvent` into a compact `Progress` (no
model in it, so a page can keep every event), with a `Snapshot` at every evaluation: one head's attention
weights (T, S) over a fixed probe text, as plain lists, drawn from the real model with
`forward(return_weights=True)`. The probe is encoded by `core.model.prompt.encode_for_model`, the one rule
for every text the model reads: a probe longer than the context keeps its LAST context_length tokens.
`RunResult` is what the job returns once the bundle is saved.

Shapes use the legend of `core/__init__.py`: T query positions, S key positions (here S = T).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from core.model.gpt import GPT
from core.model.leak import CausalityProbe
from core.model.prompt import encode_for_model
from core.model.tokenizer import CharTokenizer
from core.model.training import EvalRecord

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


# ---- the snapshot ---------------------------------------------------------------------------------


def attention_snapshot(
    model: GPT, tokenizer: CharTokenizer, text: str, *, layer: int, head: int, step: int
) -> Snapshot:
    """The weights of `head` in `layer` over `text`, from the model's own forward. A text longer than the
    context keeps its last context_length tokens (core.model.prompt.encode_for_model), as everywhere else."""
    enc = encode_for_model(tokenizer, text, model.config.context_length)
    if enc.empty:
        raise ValueError("attention_snapshot needs a non-empty text")
    idx = torch.tensor([enc.ids], dtype=torch.long)  # (1, T)
    with torch.no_grad():
        weights = model(idx, return_weights=True).weights[layer][0, head]  # (T, S)
    return Snapshot(step, layer, head, list(enc.pieces), weights.tolist(), model.config.causal)
