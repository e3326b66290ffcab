"""The tiny-batch overfit exercise: train a fresh model on one small batch until its loss is near zero, and watch
the held-out loss meanwhile.

A model that can drive one batch's loss to about zero has the capacity and a working gradient path (the first thing
to check when training misbehaves), and doing so teaches nothing general: the held-out loss does not follow. It uses
training's own pieces, a constant learning rate and no warmup.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from core.model.batches import document_stream, next_token_loss, sample_batch
from core.model.corpus import Corpus, split_documents
from core.model.gpt import GPT, ModelConfig, preset
from core.model.tokenizer import CharTokenizer
from core.model.train_config import TrainConfig
from core.model.training import make_optimizer

MAX_STEPS = 1000  # a form's number is bounded before the loop: ~1 s of the tiny preset per 100 steps
NEAR_ZERO = 0.05  # nats per token: the batch is memorised (ln V is about 4.6 for the shipped vocabulary)


@dataclass(frozen=True)
class Overfit:
    steps: tuple[int, ...]  # 0 .. n: 0 is before any step
    batch_loss: tuple[float, ...]  # the one training batch, after each step
    held_out_loss: tuple[float, ...]  # batches the model never trains on, the same ones at every step
    batch_tokens: int  # B * T tokens in the batch
    reached: int | None  # the first step whose batch loss is below NEAR_ZERO, None if none

    @property
    def gap(self) -> float:
        """Held-out minus batch loss at the end: how much of the fit is memorisation."""
        return self.held_out_loss[-1] - self.batch_loss[-1]


def overfit_tiny_batch(
    config: ModelConfig,
    train_stream: Tensor,
    val_stream: Tensor,
    *,
    batch_size: int = 2,
    steps: int = 300,
    learning_rate: float = 3e-3,
    seed: int = 0,
    held_out_batches: int = 4,
) -> Overfit:
    """Train GPT(config) from seed on one batch of `batch_size` windows for `steps` steps (1 .. MAX_STEPS)."""
    if not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"steps must be an integer from 1 to {MAX_STEPS}, got {steps!r}")
    if not isinstance(batch_size, int) or not 1 <= batch_size <= 16:
        raise ValueError(f"batch_size must be an integer from 1 to 16, got {batch_size!r}")
    T = config.context_length
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT(config)
    optimizer = make_optimizer(model, TrainConfig(learning_rate=learning_rate, weight_decay=0.0))
    x, y = sample_batch(train_stream, batch_size, T, torch.Generator().manual_seed(seed))  # (B, T) each
    g = torch.Generator().manual_seed(seed + 1)
    held = [sample_batch(val_stream, batch_size, T, g) for _ in range(held_out_batches)]

    def losses() -> tuple[float, float]:
        model.eval()
        with torch.no_grad():
            batch = next_token_loss(model, x, y).item()
            other = sum(next_token_loss(model, hx, hy).item() for hx, hy in held) / len(held)
        model.train()
        return batch, other

    batch_losses, held_losses = [], []
    for _ in range(steps + 1):
        batch, other = losses()
        batch_losses.append(batch)
        held_losses.append(other)
        if len(batch_losses) > steps:
            break
        loss = next_token_loss(model, x, y, fast_attention=True)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if not math.isfinite(loss.item()):
            break
    reached = next((i for i, v in enumerate(batch_losses) if v < NEAR_ZERO), None)
    return Overfit(tuple(range(len(batch_losses))), tuple(batch_losses), tuple(held_losses), batch_size * T, reached)


def overfit_on_corpus(corpus: Corpus, *, preset_name: str = "tiny", steps: int = 300, seed: int = 0) -> Overfit:
    """overfit_tiny_batch on a corpus as training splits it: the batch from its training documents, the held-out
    batches from its validation documents (`split_documents`, 10% held out)."""
    tokenizer = CharTokenizer.from_text(corpus.text)
    train_docs, val_docs = split_documents(corpus, 0.1, seed)
    config = preset(preset_name, tokenizer.vocab_size)
    return overfit_tiny_batch(
        config, document_stream(train_docs, tokenizer), document_stream(val_docs, tokenizer), steps=steps, seed=seed
    )
