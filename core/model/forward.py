"""The next token's logits, the way the autocomplete pages and the KV cache's parity read them.

    window(model, ids)          the ids the model sees next: its context window with no room
                                (core.model.kv_cache.window_start), (<eos>,) if none
    eval_mode(model)            eval mode and no gradients for a block, the training flag restored after: the one
                                helper every evaluation, generation and measurement of a model uses
    forward_last(model, window) the logits (V,) after `window`, recomputed from scratch (no cache)
    next_token_logits           window + eval_mode, then generation's first step: the forward pass on a fresh
                                cache, so the page's bars are exactly what generate draws its first token from
    closing(steps)              close a generation when the block ends early (its generator is released)

Shapes use the legend of `core/__init__.py`: T positions, V vocabulary size.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TypeVar

import torch
from torch import Tensor

from core.model.gpt import GPT
from core.model.prompt import start_ids, window_start

Step = TypeVar("Step")


def window(model: GPT, ids: Sequence[int]) -> list[int]:
    """The ids the model sees for the next token: the context window with no room (core.model.kv_cache.prompt_window,
    the last context_length of them), <eos> if none."""
    kept = start_ids(ids)
    V, L = model.config.vocab_size, model.config.context_length
    if min(kept) < 0 or max(kept) >= V:
        raise ValueError(f"ids must lie in 0..{V - 1}, got min {min(kept)}, max {max(kept)}")
    return kept[window_start(len(kept), L) :]


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module, *, no_grad: bool = True) -> Iterator[None]:
    """Eval mode (no dropout) for the block, without gradients; the model's training flag is restored afterwards.

    no_grad=False leaves autograd as it is: a generator that yields inside the block (core.model.sampling.generate)
    passes it, since a no_grad open at a yield would switch gradients off in its caller's code between steps."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            yield
    finally:
        model.train(was_training)


def forward_last(model: GPT, ids: list[int]) -> Tensor:
    """Uncached logits (V,) after `ids` (a window), recomputed from scratch through the lessons' kernel."""
    device = next(model.parameters()).device
    return model(torch.tensor([ids], device=device), return_weights=True).logits[0, -1]  # (1, T, V) -> (V,)


def next_token_logits(model: GPT, ids: Sequence[int]) -> Tensor:
    """The model's logits (V,) for the token after `ids` (cut to the context; empty -> <eos>), computed as
    generation computes its first step."""
    kept = window(model, ids)
    device = next(model.parameters()).device
    with eval_mode(model):
        idx = torch.tensor([kept], device=device)  # (1, T)
        return model(idx, model.new_cache()).logits[0, -1]  # (V,)


@contextlib.contextmanager
def closing(steps: Iterator[Step]) -> Iterator[Iterator[Step]]:
    """contextlib.closing for core.model.sampling.generate, which is annotated as an Iterator: a generation
    left early is closed, so its generator (and the model's eval mode it holds) is released."""
    try:
        yield steps
    finally:
        close = getattr(steps, "close", None)
        if close is not None:
            close()
