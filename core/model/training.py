"""Training loop: AdamW, linear warmup then cosine decay, gradient clipping, held-out evaluation.

The corpus is split by whole documents, each side one token stream; a batch is random windows of context + 1
tokens. Randomness is explicit (one seed: initialisation, dropout, data order, fixed evaluation batches so the loss
curve compares like with like) and the caller's RNG and thread count are restored. Progress goes through one
callback (the CLI's bar and the app alike); a time budget covers evaluation too. Evaluations come every eval_interval
steps and, with eval_seconds, every eval_seconds of wall time; those before the last may be cheaper estimates (fewer
batches, a shorter causality probe), the last is always the full one. The causality probe runs at every evaluation
and, with leak_stop, ends the run at the first failure. With several ranks (torchrun, DDP) every rank
runs the same loop on its share of the global batch and they agree on when to stop, so the figures are a single
process's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from core.model.batches import document_stream, evaluate_loss, next_token_loss, sample_batch
from core.model.corpus import Corpus, check_split_size, split_documents
from core.model.distributed import (
    Ranks,
    agree_stop,
    all_max,
    all_mean,
    all_sum,
    check_batch_size,
    check_joined,
    rank_generator,
    rank_seed,
)
from core.model.gpt import GPT, ModelConfig
from core.model.init_from import extend_vocabulary
from core.model.leak import TRAINING_PROBE_SEQUENCES, CausalityProbe, causality_probe, first_failed_probe
from core.model.tokenizer import CharTokenizer
from core.model.train_config import TrainConfig, learning_rate_at

# Sequence length of the causality probe at an evaluation before the last: a mask that lets a position see later
# ones shows at any length, and the probe's cost grows with the square of it (the last evaluation probes the whole
# context).
INTERIM_PROBE_LENGTH = 16


@dataclass(frozen=True)
class TrainEvent:
    """One progress report. `loss` is the step's batch loss ("step") or the train-sample evaluation
    ("eval", "done"); `val_loss` is the latest validation loss. `model` is set on "eval" events only,
    while the model is in eval mode, so a callback can draw attention maps under torch.no_grad();
    it must not modify the model. `probe` is that evaluation's causality probe ("eval" events only)."""

    kind: str  # "step" | "eval" | "done"
    step: int  # optimizer steps completed
    max_iters: int
    loss: float
    val_loss: float
    lr: float
    tokens_per_second: float  # training tokens per second of optimizer-step time (evaluation excluded)
    elapsed: float  # seconds since training started, evaluation included
    eta_seconds: float  # estimated seconds until max_iters (or max_seconds) is reached
    model: GPT | None = field(default=None, compare=False, repr=False)
    probe: CausalityProbe | None = None


@dataclass(frozen=True)
class EvalRecord:
    step: int
    train_loss: float
    val_loss: float
    lr: float
    elapsed: float
    probe: CausalityProbe | None = None  # core.model.leak.causality_probe of the model at this step
    batches: int | None = None  # batches of each stream the losses averaged (None: a record read back without it)


@dataclass(frozen=True)
class TrainResult:
    model: GPT  # in eval mode
    tokenizer: CharTokenizer
    history: tuple[EvalRecord, ...]  # every evaluation, step 0 first
    metrics: dict  # train_loss, val_loss, iters, seconds, tokens_per_second,
    # stop_reason: "max_iters" | "max_seconds" | "stopped" (should_stop) | "diverged" (non-finite loss)
    #   | "leak" (leak_stop and a causality probe failed)
    step_losses: tuple[float, ...]  # the batch loss of every optimizer step
    train_documents: tuple[str, ...]  # document names
    val_documents: tuple[str, ...]


def make_optimizer(model: GPT, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on 2-D weights only (matrices and the tied embedding), none on
    LayerNorm weights and biases, whose scale carries meaning rather than capacity."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused=True: one kernel updates every parameter of a group (AdamW's own arithmetic, held to the plain
    # per-parameter loop by tests/model/test_training.py), where the default makes several passes over them.
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2), fused=True)


def train(
    model_config: ModelConfig | None,
    train_config: TrainConfig,
    corpus: Corpus,
    *,
    base: tuple[GPT, CharTokenizer] | None = None,
    callback: Callable[[TrainEvent], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    ranks: Ranks | None = None,
) -> TrainResult:
    """Build a tokenizer and a GPT for `corpus` and train it; see the module docstring.

    The model's vocab_size comes from the tokenizer and its `causal` flag from `train_config.causal`
    (a model_config with causal=False needs train_config.causal=False too). With `base` (a trained GPT and its
    tokenizer; model_config None) the run starts from the base's weights and architecture, its vocabulary grown by
    the corpus's unseen characters (core.model.init_from.extend_vocabulary). Raises CorpusError when the
    corpus is too small for the context length. `ranks` (default: a single process) places the run in a
    process group already joined (the distributed `init`); DistributedError when batch_size does not
    split into equal shards or the group is not joined.
    """
    if (base is None) == (model_config is None):
        raise ValueError("train needs exactly one of a ModelConfig and a base (GPT, CharTokenizer) to start from")
    if model_config is not None and not isinstance(model_config, ModelConfig):
        raise ValueError(f"train needs a ModelConfig, got {type(model_config).__name__}")
    if not isinstance(train_config, TrainConfig):
        raise ValueError(f"train needs a TrainConfig, got {type(train_config).__name__}")
    if not isinstance(corpus, Corpus):
        raise ValueError(f"train needs a Corpus (core.model.corpus.load_corpus), got {type(corpus).__name__}")
    if model_config is not None and not model_config.causal and train_config.causal:
        raise ValueError(
            "model_config.causal is False but train_config.causal is True; "
            "remove the causal mask with TrainConfig(causal=False)"
        )
    cfg = train_config
    ranks = Ranks() if ranks is None else ranks
    check_batch_size(cfg.batch_size, ranks)
    check_joined(ranks)
    start: GPT | None = None
    if base is None:
        assert model_config is not None  # checked above: exactly one of the two
        tokenizer = CharTokenizer.from_text(corpus.text)
        config = dataclasses.replace(model_config, vocab_size=tokenizer.vocab_size, causal=cfg.causal)
    else:
        start, tokenizer = extend_vocabulary(*base, corpus.text)
        config = dataclasses.replace(start.config, causal=cfg.causal)
    train_docs, val_docs = split_documents(corpus, cfg.val_fraction, cfg.seed)
    train_stream = document_stream(train_docs, tokenizer)  # (N_train,)
    val_stream = document_stream(val_docs, tokenizer)  # (N_val,)
    check_split_size(train_stream.numel(), val_stream.numel(), config.context_length)
    with _torch_threads(cfg.num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = GPT(config)  # the same initial weights on every rank
        if start is not None:
            model.load_state_dict(start.state_dict())  # the base's weights, its vocabulary grown
        if ranks.rank > 0:
            torch.manual_seed(rank_seed(cfg.seed, ranks.rank))  # each rank's own dropout; rank 0 keeps its stream
        run = _Run(model, cfg, train_stream, val_stream, callback if ranks.is_main else None, ranks)
        run.loop(should_stop)
        run.forward_model = model  # drops the DDP wrapper and its gradient hooks: the caller gets a plain GPT
    model.eval()
    return TrainResult(
        model,
        tokenizer,
        tuple(run.history),
        run.metrics(),
        tuple(run.step_losses),
        tuple(d.name for d in train_docs),
        tuple(d.name for d in val_docs),
    )


class _Run:
    """The mutable state of one training run (never kept on configs or modules)."""

    def __init__(
        self,
        model: GPT,
        cfg: TrainConfig,
        train_stream: Tensor,
        val_stream: Tensor,
        callback: Callable[[TrainEvent], None] | None,
        ranks: Ranks,
    ):
        self.model, self.cfg, self.callback, self.ranks = model, cfg, callback, ranks
        self.train_stream, self.val_stream = train_stream, val_stream
        self.T = model.config.context_length
        # forward and backward go through DDP, whose backward all-reduces the gradients; evaluation and the
        # callback see the plain model. No buffers to broadcast: RoPE's tables are computed, not stored.
        self.forward_model: GPT | DistributedDataParallel = (
            DistributedDataParallel(model, forward_sync_buffers=False) if ranks.distributed else model
        )
        self.shard = check_batch_size(cfg.batch_size, ranks)  # windows per rank per step
        self.optimizer = make_optimizer(model, cfg)
        self.data_generator = rank_generator(cfg.seed, ranks.rank)  # rank 0: the single process's
        self.history: list[EvalRecord] = []
        self.step_losses: list[float] = []
        self.step = 0
        self.step_seconds = 0.0  # time inside optimizer steps only
        self.stop_reason = "max_iters"
        self.start = 0.0
        self.last_lr = learning_rate_at(0, cfg)  # reported until the first step sets it
        self.eval_batch_seconds: float | None = None  # seconds per evaluation batch, as last measured
        self.last_eval = 0.0  # elapsed() when the last evaluation ended
        self.last_full = False  # the last evaluation read eval_iters batches and probed the whole context

    def loop(self, should_stop: Callable[[], bool] | None) -> None:
        cfg = self.cfg
        self.start = time.perf_counter()
        self.model.train()
        self.evaluate(final=False)
        while self.step < cfg.max_iters:
            wanted = self.stop_wanted(should_stop)
            agreed = agree_stop([wanted == reason for reason in _STOP_REASONS], self.ranks)  # the same on every rank
            if any(agreed):
                self.stop_reason = _STOP_REASONS[agreed.index(True)]
                break
            loss = self.optimizer_step()
            self.emit("step", loss, self.history[-1].val_loss)
            if not math.isfinite(loss):  # the weights are lost too: stop rather than burn the budget
                self.stop_reason = "diverged"
                break
            if self.step == cfg.max_iters:
                self.evaluate(final=True)
            elif self.evaluation_due():
                self.evaluate(final=False)
        if self.history[-1].step != self.step or not self.last_full:
            self.evaluate(final=True)  # stopped, out of time or diverged after a cheaper one: the last is full
        last = self.history[-1]
        self.emit("done", last.train_loss, last.val_loss)

    def stop_wanted(self, should_stop: Callable[[], bool] | None) -> str | None:
        """This rank's reason to stop before the next step, checked in _STOP_REASONS' order, or None."""
        cfg = self.cfg
        if cfg.leak_stop and first_failed_probe(self.history) is not None:
            return "leak"
        if should_stop is not None and should_stop():
            return "stopped"
        if cfg.max_seconds is not None and self.elapsed() >= cfg.max_seconds:
            return "max_seconds"
        return None

    def optimizer_step(self) -> float:
        cfg = self.cfg
        t0 = time.perf_counter()
        elapsed = self.elapsed()
        if cfg.max_seconds is not None:
            elapsed = all_max(elapsed, self.ranks)  # one clock, so every rank takes the same learning rate
        lr = learning_rate_at(self.step, cfg, elapsed=elapsed)
        self.last_lr = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, y = sample_batch(self.train_stream, self.shard, self.T, self.data_generator)  # (B / N, T), (B / N, T)
        loss = next_token_loss(self.forward_model, x, y, fast_attention=self.cfg.fast_attention)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # under DDP the gradients arrive averaged over the ranks: the global batch's
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.step += 1
        value = all_mean(loss.item(), self.ranks)  # the global batch's loss (equal shards); NaN on one is NaN on all
        self.step_losses.append(value)
        self.step_seconds += time.perf_counter() - t0
        return value

    def evaluation_due(self) -> bool:
        """An evaluation before the last: every eval_interval steps, and with eval_seconds once that much wall
        time passed since the last one (agreed over the ranks, so they all evaluate together)."""
        cfg = self.cfg
        if self.step % cfg.eval_interval == 0:
            return True
        if cfg.eval_seconds is None:
            return False
        return agree_stop([self.elapsed() - self.last_eval >= cfg.eval_seconds], self.ranks)[0]

    def evaluate(self, *, final: bool) -> None:
        """Losses on both streams and a causality probe, recorded and reported. With interim_eval_iters set, an
        evaluation before the last reads that many batches and probes INTERIM_PROBE_LENGTH tokens; the last (and
        every one without it) reads eval_iters and probes the whole context. A full evaluation at the step of a
        cheaper one (a stop right after it) replaces it in the history; both are reported."""
        cfg = self.cfg

        def loss_on(stream: Tensor, seed: int, iters: int) -> float:
            began = time.perf_counter()
            share = evaluate_loss(
                self.model,
                stream,
                batch_size=cfg.batch_size,
                iters=iters,
                seed=seed,
                context_length=self.T,
                fast_attention=cfg.fast_attention,
                shard=(self.ranks.rank, self.ranks.world_size),
            )
            self.eval_batch_seconds = (time.perf_counter() - began) / iters
            return all_sum(share, self.ranks)  # the shares of every rank add up to the mean

        if cfg.max_seconds is not None and self.eval_batch_seconds is None and cfg.eval_iters > 1:
            loss_on(self.train_stream, cfg.seed + 1, 1)  # the pace of one batch, before the budget goes on more
        cheap = not final and cfg.interim_eval_iters is not None
        iters = self.eval_batches(cfg.interim_eval_iters if cfg.interim_eval_iters and cheap else cfg.eval_iters)
        train_loss, val_loss = (
            loss_on(self.train_stream, cfg.seed + 1, iters),
            loss_on(self.val_stream, cfg.seed + 2, iters),
        )
        length = min(self.T, INTERIM_PROBE_LENGTH) if cheap else self.T
        probe = causality_probe(self.model, sequences=TRAINING_PROBE_SEQUENCES, length=length, seed=cfg.seed % 2**63)
        record = EvalRecord(self.step, train_loss, val_loss, self.lr(), self.elapsed(), probe, iters)
        if self.history and self.history[-1].step == self.step:
            self.history[-1] = record
        else:
            self.history.append(record)
        self.model.eval()
        try:
            self.emit("eval", train_loss, val_loss, model=self.model, probe=probe)
        finally:
            self.model.train()
        self.last_eval, self.last_full = self.elapsed(), not cheap

    def eval_batches(self, wanted: int) -> int:
        """Batches of each stream this evaluation reads: `wanted`; under a time budget, as many of them as
        fit in what is left of it at the pace measured last (at least one), the fewest of any rank. evaluate_loss
        draws its seeded batches in order, so a shorter evaluation reads the first of the same batches: the same
        estimate on fewer of them. (Evaluation once ignored the budget: `--eval-iters 1000000000 --max-seconds 5`
        ran past two minutes at step 0.)"""
        cfg = self.cfg
        if cfg.max_seconds is None or self.eval_batch_seconds is None:
            return wanted
        left = cfg.max_seconds - self.elapsed()
        pace = 2 * self.eval_batch_seconds  # a batch of each stream
        fit = wanted if pace <= 0 else max(1, int(min(wanted, left / pace)))  # min first: no inf
        return int(-all_max(-fit, self.ranks))  # every rank reads the same batches

    def emit(
        self, kind: str, loss: float, val_loss: float, model: GPT | None = None, probe: CausalityProbe | None = None
    ) -> None:
        if self.callback is None:
            return
        self.callback(
            TrainEvent(
                kind,
                self.step,
                self.cfg.max_iters,
                loss,
                val_loss,
                self.lr(),
                self.tokens_per_second(),
                self.elapsed(),
                self.eta(),
                model,
                probe,
            )
        )

    def lr(self) -> float:
        """The rate of the last step taken (the first step's before any)."""
        return self.last_lr

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def tokens_per_second(self) -> float:
        tokens = self.step * self.cfg.batch_size * self.T
        return tokens / self.step_seconds if self.step_seconds > 0 else 0.0

    def eta(self) -> float:
        if self.step == 0:
            return float("nan")
        elapsed = self.elapsed()
        remaining = (self.cfg.max_iters - self.step) * elapsed / self.step
        if self.cfg.max_seconds is not None:
            remaining = min(remaining, self.cfg.max_seconds - elapsed)
        return max(0.0, remaining)

    def metrics(self) -> dict:
        last = self.history[-1]
        return {
            "train_loss": last.train_loss,
            "val_loss": last.val_loss,
            "iters": self.step,
            "seconds": round(self.elapsed(), 3),
            "tokens_per_second": round(self.tokens_per_second(), 1),
            "stop_reason": self.stop_reason,
        }


_STOP_REASONS = ("leak", "stopped", "max_seconds")  # checked in this order before every step


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
