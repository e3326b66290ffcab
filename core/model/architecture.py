"""The architecture of a model, read off the model itself: every part in order, the tensor shape on each arrow and
each part's parameter count.

One forward pass with a hook on every part, so the shapes are the ones the code really produces (not a drawing).
The LM head shares the token embedding's matrix, so it adds no parameters and the parts add up to the model's count.
Shapes: B batch, T positions, C width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core.model.engine import eval_mode
from core.model.gpt import GPT, Block
from core.numbers import is_int


@dataclass(frozen=True)
class Part:
    name: str  # e.g. "block 0 · attention"
    what: str  # what it computes, in a few words
    shape_in: tuple[int, ...]
    shape_out: tuple[int, ...]
    parameters: int  # parameters this part owns (a tied matrix counted where it is first used)


def _own_parameters(module: torch.nn.Module, seen: set[int]) -> int:
    count = 0
    for p in module.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            count += p.numel()
    return count


def architecture(model: GPT, T: int | None = None) -> tuple[Part, ...]:
    """The model's parts in the order data flows, from one forward pass of T tokens (default: its context)."""
    T = model.config.context_length if T is None else T
    if not is_int(T) or not 1 <= T <= model.config.context_length:
        raise ValueError(f"T must be an integer in 1..{model.config.context_length}, got {T!r}")
    parts: list[tuple[str, str, torch.nn.Module]] = [("token embedding", "ids to vectors", model.token_embedding)]
    blocks: list[Block] = list(model.blocks)  # type: ignore[arg-type]  # a ModuleList of Blocks
    for i, block in enumerate(blocks):
        parts += [
            (f"block {i} · norm 1", "LayerNorm before attention", block.norm_attn),
            (f"block {i} · attention", "q, k, v, RoPE, causal attention, merge heads, + residual", block.attn),
            (f"block {i} · norm 2", "LayerNorm before the MLP", block.norm_mlp),
            (f"block {i} · MLP", "Linear, GELU, Linear, + residual", block.mlp),
        ]
    parts += [("final norm", "LayerNorm", model.norm_final), ("LM head", "vectors to logits (tied)", model.lm_head)]
    shapes: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}

    def hook(module, inputs, output):
        out = output[0] if isinstance(output, tuple) else output
        shapes[id(module)] = (tuple(inputs[0].shape), tuple(out.shape))

    handles = [module.register_forward_hook(hook) for _, _, module in parts]
    try:
        with eval_mode(model):
            idx = torch.zeros(1, T, dtype=torch.long, device=model.token_embedding.weight.device)  # (1, T)
            model(idx)  # (1, T, V): the hooks record every part's shapes
    finally:
        for handle in handles:
            handle.remove()
    seen: set[int] = set()
    return tuple(
        Part(name, what, shapes[id(module)][0], shapes[id(module)][1], _own_parameters(module, seen))
        for name, what, module in parts
    )
