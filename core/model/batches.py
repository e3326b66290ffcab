"""The data a run trains and evaluates on, and the loss it minimises (cross-entropy in nats per token).

A batch is random windows of context_length + 1 tokens, the targets the inputs shifted by one. Evaluation draws
seeded batches, so every evaluation of a run compares like with like, and a distributed run splits them over its
ranks. Shapes: B batch, T positions, V vocabulary size.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from core.model.corpus import Document
from core.model.engine import eval_mode
from core.model.gpt import GPT
from core.model.tokenizer import EOS_ID, CharTokenizer
from core.numbers import is_int


def document_stream(documents: Sequence[Document], tokenizer: CharTokenizer) -> Tensor:
    """One token stream: each document's ids followed by <eos>. Returns (N,) long."""
    ids: list[int] = []
    for doc in documents:
        ids.extend(tokenizer.encode(doc.text))
        ids.append(EOS_ID)
    return torch.tensor(ids, dtype=torch.long)  # (N,)


def sample_batch(
    stream: Tensor, batch_size: int, context_length: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """`batch_size` random windows of the stream: inputs (B, T) and targets shifted by one (B, T)."""
    if stream.dim() != 1 or stream.numel() < context_length + 1:
        raise ValueError(
            f"stream must be 1-D with at least context_length + 1 = {context_length + 1} tokens, "
            f"got shape {tuple(stream.shape)}"
        )
    starts = torch.randint(stream.numel() - context_length, (batch_size,), generator=generator)  # (B,)
    offsets = starts[:, None] + torch.arange(context_length + 1)  # (B, T + 1)
    window = stream[offsets]  # (B, T + 1)
    return window[:, :-1], window[:, 1:]  # (B, T), (B, T)


def evaluate_loss(
    model: GPT,
    token_stream: Tensor,
    *,
    batch_size: int,
    iters: int,
    seed: int,
    context_length: int | None = None,
    fast_attention: bool = False,
    shard: tuple[int, int] = (0, 1),
) -> float:
    """Mean cross-entropy (nats per token) over `iters` seeded batches of `token_stream`.

    The same seed gives the same batches. The model is evaluated in eval mode and returned to the
    mode it was in; fast_attention=True attends with PyTorch's fused SDPA, as a run that trains on it does.
    shard=(index, count) computes only batches i with i % count == index (every batch is still drawn, so each
    is the batch a single process sees) and returns their share of the mean, their sum / iters: the shares of
    index 0..count-1 add up to the mean. The default (0, 1) is every batch.
    """
    if iters < 1 or batch_size < 1:
        raise ValueError(f"iters and batch_size must be >= 1, got iters={iters}, batch_size={batch_size}")
    index, count = shard
    if not (is_int(index) and is_int(count) and 0 <= index < count):
        raise ValueError(f"shard must be (index, count) with 0 <= index < count, got {shard!r}")
    T = model.config.context_length if context_length is None else context_length
    generator = torch.Generator().manual_seed(seed)
    total = 0.0
    with eval_mode(model):
        for i in range(iters):
            x, y = sample_batch(token_stream, batch_size, T, generator)  # (B, T), (B, T)
            if i % count == index:
                total += next_token_loss(model, x, y, fast_attention=fast_attention).item()
    return total / iters


def next_token_loss(
    model: GPT | DistributedDataParallel, x: Tensor, y: Tensor, *, fast_attention: bool = False
) -> Tensor:
    """Mean cross-entropy of the model's logits for inputs x (B, T) against the targets y (B, T); `model` may be
    a GPT wrapped in DistributedDataParallel (a distributed run's forward)."""
    logits = model(x, return_weights=not fast_attention).logits  # (B, T, V): the lessons' kernel unless fast
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))  # mean over B * T
