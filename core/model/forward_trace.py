"""Inside the model, for one text: every stage of one forward pass, and what each layer would predict.

The pass is the model's own `GPT.forward` (with return_weights=True, so attention goes through the lessons' kernel and
hands back its weights); forward hooks keep what each module hands on, so nothing here re-spells the forward pass.
What each layer would predict (the "logit lens", nostalgebraist 2020): the residual stream after that layer, at the
last position, through the model's own final norm and output head. After the last layer that *is* the model's
prediction; tests hold it to the model's real output.
Shapes: T positions, C model width, H heads, V vocabulary, L layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from core.model.gpt import GPT, Block
from core.model.introspect import checked_ids


@dataclass(frozen=True)
class BlockTrace:
    """One block's work on the stream: pre-norm attention, then the pre-norm MLP, each added to the stream."""

    layer: int
    weights: Tensor  # (H, T, T) attention weights; row t sums to one over keys 0..t
    attention_out: Tensor  # (T, C) what attention adds to the stream (after its output projection)
    mlp_hidden: Tensor  # (T, mlp_ratio * C) GELU(fc(norm(x))): the MLP's hidden units
    mlp_out: Tensor  # (T, C) what the MLP adds to the stream
    stream: Tensor  # (T, C) the residual stream after the block


@dataclass(frozen=True)
class ForwardTrace:
    """One text through the model, every tensor float32 on the CPU and detached; `probs` and `layer_probs` float64."""

    ids: tuple[int, ...]  # (T,)
    embeddings: Tensor  # (T, C) token embedding rows: the stream entering block 0
    blocks: tuple[BlockTrace, ...]  # (L,)
    final_normed: Tensor  # (T, C) norm_final(stream after the last block)
    logits: Tensor  # (V,) the output head's scores for the character after the last position
    probs: Tensor  # (V,) float64 softmax of `logits`
    layer_probs: Tensor  # (L + 1, V) float64: what the stream after the embeddings (row 0) and after each block
    # (row l + 1) would predict through the final norm and the output head; the last row is `probs`, recomputed

    @property
    def streams(self) -> list[Tensor]:
        """The residual stream entering block 0 and after every block: L + 1 tensors (T, C)."""
        return [self.embeddings, *(b.stream for b in self.blocks)]


@torch.no_grad()
def trace_forward(model: GPT, ids: Sequence[int] | Tensor) -> ForwardTrace:
    """Run `ids` through `model` once, keeping every stage (see the module docstring)."""
    idx = checked_ids(model, ids)  # (1, T)
    kept: dict[tuple[str, int], Tensor] = {}
    hooks = []

    def keep(name: str, layer: int):
        def hook(module: nn.Module, args: tuple, output: Tensor | tuple) -> None:
            value = output[0] if isinstance(output, tuple) else output  # (out, weights) modules: out
            kept[(name, layer)] = value[0].detach().float().cpu()  # (T, ...) the batch's one element

        return hook

    def keep_input(name: str, layer: int):
        def hook(module: nn.Module, args: tuple) -> None:
            kept[(name, layer)] = args[0][0].detach().float().cpu()  # (T, ...) the batch's one element

        return hook

    try:
        hooks.append(model.token_embedding.register_forward_hook(keep("embeddings", -1)))
        for layer, block in enumerate(model.blocks):
            assert isinstance(block, Block)
            hooks.append(block.attn.register_forward_hook(keep("attention_out", layer)))  # (out, weights): out
            hooks.append(block.mlp.proj.register_forward_pre_hook(keep_input("mlp_hidden", layer)))
            hooks.append(block.mlp.register_forward_hook(keep("mlp_out", layer)))
            hooks.append(block.register_forward_hook(keep("stream", layer)))  # (x, weights): x
        hooks.append(model.norm_final.register_forward_hook(keep("final_normed", -1)))
        out = model(idx, return_weights=True)  # logits (1, T, V), weights L x (1, H, T, T)
    finally:
        for h in hooks:
            h.remove()
    assert out.weights is not None  # return_weights=True
    blocks = tuple(
        BlockTrace(
            layer=layer,
            weights=out.weights[layer][0].detach().float().cpu(),  # (H, T, T)
            attention_out=kept[("attention_out", layer)],
            mlp_hidden=kept[("mlp_hidden", layer)],
            mlp_out=kept[("mlp_out", layer)],
            stream=kept[("stream", layer)],
        )
        for layer in range(len(model.blocks))
    )
    logits = out.logits[0, -1].detach().float().cpu()  # (V,)
    embeddings = kept[("embeddings", -1)]  # (T, C)
    streams = torch.stack([embeddings[-1], *(b.stream[-1] for b in blocks)])  # (L + 1, C): the last position
    weight = model.token_embedding.weight  # the model's device and dtype
    lens = model.lm_head(model.norm_final(streams.to(weight)))  # (L + 1, V) the model's own norm and head
    return ForwardTrace(
        ids=tuple(int(i) for i in idx[0].tolist()),
        embeddings=embeddings,
        blocks=blocks,
        final_normed=kept[("final_normed", -1)],
        logits=logits,
        probs=torch.softmax(logits.double(), dim=-1),  # (V,)
        layer_probs=torch.softmax(lens.double().cpu(), dim=-1),  # (L + 1, V)
    )


def top_choices(probs: Tensor, k: int, skip: Sequence[int] = ()) -> list[tuple[int, float]]:
    """The k most likely ids of a (V,) distribution, most likely first (ties: the lower id), leaving out `skip`."""
    order = sorted(range(probs.shape[0]), key=lambda i: (-float(probs[i]), i))  # V ids
    return [(i, float(probs[i])) for i in order if i not in set(skip)][:k]
