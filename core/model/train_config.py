"""How a training run is configured: the frozen, bounded TrainConfig, its learning-rate schedule (linear warmup, then
cosine decay, following the time budget too), and the preset the command line and the app build from a step budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.model.sampling import check_seed
from core.numbers import integer
from core.settings import MAX_TORCH_THREADS

# B x T of one training step: what autograd keeps grows with it (about 20 C-wide vectors per token and layer, and
# the T x T attention maps through core.attention). At 8,192 tokens one step of the largest preset (T = 256)
# peaked at 1.0 GB resident (1.8 GB through core.attention), so the rule is batch_size <= MAX_BATCH_TOKENS //
# context_length: tiny 256, baby 128, default 64, large 32.
MAX_BATCH_TOKENS = 8192
# Batches of each stream per evaluation: fifty times the default of 20, already a figure steady to a few
# thousandths; `train --eval-iters 1000000000` asked for two billion forward passes at step 0.
MAX_EVAL_ITERS = 1000
# Batches of each stream in an evaluation between a wall-time cadence's full ones (train_config_for(eval_seconds=...)):
# the page's curve moves every few seconds on two batches; the run's last evaluation reads eval_iters.
PAGE_EVAL_ITERS = 2
SHORT_RUN_ITERS = 1000  # train_config_for: a run this short reads PAGE_EVAL_ITERS batches before its last evaluation


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 12  # B windows per step
    max_iters: int = 2000  # optimizer steps (the schedule's length)
    max_seconds: float | None = None  # optional wall-clock budget for the loop; the schedule anneals by it too
    learning_rate: float = 2e-3  # peak, reached at the end of warmup
    min_lr: float = 2e-4  # where the cosine ends, at step max_iters - 1
    warmup_iters: int = 100
    weight_decay: float = 0.1  # on 2-D weights (matrices, embeddings) only; never on norms or biases
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping
    eval_interval: int = 250  # steps between evaluations
    eval_iters: int = 20  # batches per evaluation, 1..MAX_EVAL_ITERS (under max_seconds: as many as fit)
    seed: int = 0
    val_fraction: float = 0.1  # share of documents held out
    causal: bool = True  # False = remove the causal mask (the leakage lesson); the bundle is then marked unsafe
    beta1: float = 0.9
    beta2: float = 0.99
    num_threads: int | None = None  # torch threads during training, 1..MAX_TORCH_THREADS; None keeps the current
    fast_attention: bool = True  # attend with PyTorch's fused SDPA (parity-tested); False: the lessons' kernel
    leak_stop: bool = False  # stop at the first evaluation whose causality probe fails (the front ends: True)
    eval_seconds: float | None = None  # also evaluate once this much wall time passed since the last evaluation
    interim_eval_iters: int | None = None  # batches of an evaluation before the last (None: eval_iters); the
    # last one, and its causality probe, is always full

    def __post_init__(self):
        for name in ("batch_size", "max_iters", "eval_interval", "eval_iters", "warmup_iters", "seed"):
            value = getattr(self, name)
            integer(name, value)
        for name in ("batch_size", "max_iters", "eval_interval", "eval_iters"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        integer("eval_iters", self.eval_iters, 1, MAX_EVAL_ITERS)
        if self.interim_eval_iters is not None:
            integer("interim_eval_iters", self.interim_eval_iters, 1, MAX_EVAL_ITERS)
        if self.eval_seconds is not None and not (_is_number(self.eval_seconds) and self.eval_seconds >= 0):
            raise ValueError(f"eval_seconds must be a number of seconds >= 0 or None, got {self.eval_seconds!r}")
        if not 0 <= self.warmup_iters < self.max_iters:
            raise ValueError(
                f"warmup_iters must lie in 0..max_iters - 1 = {self.max_iters - 1}, "
                f"got {self.warmup_iters}; shorten the warmup or train longer"
            )
        if self.max_seconds is not None and not (_is_number(self.max_seconds) and self.max_seconds > 0):
            raise ValueError(f"max_seconds must be a positive number of seconds or None, got {self.max_seconds!r}")
        for name in ("learning_rate", "min_lr", "weight_decay", "grad_clip"):
            value = getattr(self, name)
            if not _is_number(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.min_lr > self.learning_rate:
            raise ValueError(f"min_lr={self.min_lr} must not exceed learning_rate={self.learning_rate}")
        if not _is_number(self.val_fraction) or not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction must lie strictly between 0 and 1, got {self.val_fraction!r}")
        for name in ("beta1", "beta2"):
            if not _is_number(getattr(self, name)) or not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must lie in [0, 1), got {getattr(self, name)!r}")
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal must be a bool, got {self.causal!r}")
        for name in ("fast_attention", "leak_stop"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.num_threads is not None:
            integer("num_threads", self.num_threads, 1, MAX_TORCH_THREADS)  # 100,000 crashed torch


def learning_rate_at(step: int, cfg: TrainConfig, elapsed: float | None = None) -> float:
    """The learning rate of optimizer step `step` (0-based): linear warmup, then cosine decay.

    step < W:            lr * (step + 1) / W
    W <= step:           min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2,  p = min(1, (step - W) / (N - 1 - W))
    with W = warmup_iters, N = max_iters; so step W gets lr and step N - 1 (and later) gets min_lr.

    A time budget: with cfg.max_seconds set and `elapsed` (seconds since the run started) given,
    p = min(1, max(step progress, elapsed / max_seconds)), so the decay follows whichever budget runs
    out first and a run stopped by the clock still ends annealed. (Such a run depends on the machine's
    speed and is not reproducible step for step; without max_seconds it is.)
    """
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an integer >= 0, got {step!r}")
    if step < cfg.warmup_iters:
        return cfg.learning_rate * (step + 1) / cfg.warmup_iters
    span = max(1, cfg.max_iters - 1 - cfg.warmup_iters)
    progress = (step - cfg.warmup_iters) / span
    if cfg.max_seconds is not None and elapsed is not None:
        progress = max(progress, elapsed / cfg.max_seconds)
    progress = min(1.0, progress)
    return cfg.min_lr + (cfg.learning_rate - cfg.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


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
    fast_attention: bool = True,
    leak_stop: bool = True,
    eval_seconds: float | None = None,
) -> TrainConfig:
    """The TrainConfig of a run, the CLI's and the app's alike: about ten evaluations (every max_iters / 10
    steps, at most 250), warmup over the first tenth (at most 100 steps), the cosine ending at learning_rate / 10,
    and the leak stop on (the first evaluation whose causality probe fails ends the run). With `eval_seconds` (the
    page) it also evaluates every eval_seconds of wall time, on PAGE_EVAL_ITERS batches until the last evaluation.
    A run of at most SHORT_RUN_ITERS steps evaluates on PAGE_EVAL_ITERS batches until the last one too: there
    evaluation, not training, was most of the time (`train --max-iters 300`: 11 evaluations of 20 batches and
    their probes)."""
    integer("max_iters", max_iters, 1)
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
        eval_seconds=eval_seconds,
        interim_eval_iters=(
            min(eval_iters, PAGE_EVAL_ITERS) if eval_seconds is not None or max_iters <= SHORT_RUN_ITERS else None
        ),
    )


# Checked before anything is allocated: `train --seed 2**70` overflowed in torch, and `--batch-size 100000000` asked
# for 26 GB.
def check_train_size(seed: int, batch_size: int, context_length: int, *, flags: bool = False) -> None:
    """Refuse a seed outside 0 .. 2**63 - 1 and a batch above MAX_BATCH_TOKENS // context_length with a ValueError in
    the words `check_seed` gives `generate`; `flags` names them as the command line does
    (--seed, --batch-size). A batch below 1 is left to TrainConfig, which says so."""
    try:
        check_seed(seed)
    except ValueError as e:
        raise ValueError(f"{'--' if flags else ''}{e}") from None
    limit = MAX_BATCH_TOKENS // context_length
    if isinstance(batch_size, int) and batch_size > limit:
        raise ValueError(
            f"{'--batch-size' if flags else 'batch_size'} must be an integer from 1 to {limit} at context length "
            f"{context_length} (batch x context <= MAX_BATCH_TOKENS = {MAX_BATCH_TOKENS:,}), got {batch_size}"
        )


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
