"""Inside a trained model, for one text: its tokens, the q, k, v of one head, and every attention map.

Everything is computed by calling the model's own modules in the order its forward pass uses them, so what the
pages draw is what the model computes. One query row is then recomputed by hand and compared with the attention
kernel in float64 (the verdict); the model's own float32 weights are compared too, as a figure only.
Shapes: T positions, C model width, D head width, H heads, L layers.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from core import handcheck
from core.agreement import Agreement, allowance, model_terms, row_agreement
from core.attention import causal_mask, scaled_dot_product_attention
from core.model.gpt import GPT, Block, ModelConfig
from core.model.rope import apply_rope, rope_cos_sin
from core.numbers import is_int

# ---- q, k, v of one head ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Projections:
    """One layer's and one head's view of a text; every tensor float32 on the CPU, detached."""

    layer: int
    head: int
    positions: Tensor  # (T,) absolute positions 0 .. T-1
    embeddings: Tensor  # (T, C) rows of the token embedding (the block-0 input)
    block_input: Tensor  # (T, C) the residual stream entering block `layer`
    normed: Tensor  # (T, C) block.norm_attn(block_input): what the q, k, v layers read
    q_raw: Tensor  # (T, D) queries before RoPE
    k_raw: Tensor  # (T, D) keys before RoPE
    q: Tensor  # (T, D) queries after RoPE (what the scores use)
    k: Tensor  # (T, D) keys after RoPE
    v: Tensor  # (T, D) values (RoPE never touches them)
    scale: float  # 1/√D
    scores: Tensor  # (T, T) q kᵀ · scale, before the mask (the future entries are still there)
    mask: Tensor  # (T, T) bool, True = may attend (causal, or all True for a causal=False model)

    @property
    def head_dim(self) -> int:
        return self.q.shape[-1]


def checked_ids(model: GPT, ids: Sequence[int] | Tensor) -> Tensor:
    """ids as a (1, T) long tensor on the model's device, checked."""
    if not isinstance(model, GPT):
        raise ValueError(f"expected a core.model.gpt.GPT, got {type(model).__name__}")
    if model.training and model.config.dropout > 0:
        raise ValueError("the model is in training mode with dropout: call model.eval() first")
    if isinstance(ids, Tensor):
        if ids.dim() == 2 and ids.shape[0] == 1:
            ids = ids[0]  # (T,)
        if ids.dim() != 1 or ids.dtype.is_floating_point:
            raise ValueError(f"ids must be a 1-D sequence of token ids (T,), got shape {tuple(ids.shape)}")
        ids = ids.tolist()
    ids = list(ids)
    if any(isinstance(i, bool) or not isinstance(i, numbers.Integral) for i in ids):
        raise ValueError(f"token ids must be integers, got {ids[:5]!r}")
    ids = [int(i) for i in ids]
    if not ids:
        raise ValueError("there are no tokens to look at (T = 0): type some text first")
    config = model.config
    if len(ids) > config.context_length:
        raise ValueError(
            f"{len(ids)} tokens exceed the model's context_length={config.context_length}; "
            "keep the last context_length tokens (encode_for_model does)"
        )
    bad = [i for i in ids if not 0 <= i < config.vocab_size]
    if bad:
        raise ValueError(f"token ids must be integers in 0..{config.vocab_size - 1}, got {bad[:5]!r}")
    device = model.token_embedding.weight.device
    return torch.tensor([ids], dtype=torch.long, device=device)  # (1, T)


def _check_layer_head(model: GPT, layer: int, head: int) -> None:
    L, H = model.config.n_layer, model.config.n_head
    for name, value, n in (("layer", layer, L), ("head", head, H)):
        if not is_int(value) or not 0 <= value < n:
            raise ValueError(
                f"{name} must be an integer in 0..{n - 1} (the model has {L} layers, {H} heads), got {value!r}"
            )


@torch.no_grad()
def projections(model: GPT, ids: Sequence[int] | Tensor, layer: int, head: int) -> Projections:
    """The embeddings, the normed block input and q, k (before and after RoPE), v and the scaled scores
    of one head, computed with the model's own modules (its forward pass, stopped inside block `layer`)."""
    idx = checked_ids(model, ids)  # (1, T)
    _check_layer_head(model, layer, head)
    config = model.config
    T, C, D = idx.shape[1], config.d_model, config.head_dim
    positions = torch.arange(T, device=idx.device)  # (T,) a fresh sequence: no cache
    embeddings = model.token_embedding(idx)  # (1, T, C)
    x = model.dropout(embeddings)  # (1, T, C), identity in eval mode
    cos, sin = rope_cos_sin(positions, D, config.rope_base, x.dtype)  # (T, D) each, as forward computes them
    mask = causal_mask(T, T, device=idx.device) if config.causal else None  # (T, T), as forward builds it
    for i, block in enumerate(model.blocks[:layer]):
        x, _ = block(x, cos, sin, mask, False, None, i, True)  # (1, T, C): the residual stream after block i
    block = model.blocks[layer]
    if not isinstance(block, Block):  # nn.ModuleList gives a Module: every GPT's blocks are Blocks
        raise ValueError(f"layer {layer} of the model is a {type(block).__name__}, not a core.model.gpt.Block")
    normed = block.norm_attn(x)  # (1, T, C)
    q_all, k_all, v_all = block.attn.qkv(normed).split(C, dim=2)  # (1, T, C) each: heads side by side
    cols = slice(head * D, (head + 1) * D)  # this head's D columns, as forward's view(B, T, H, D) splits them
    q_raw, k_raw, v = q_all[0, :, cols], k_all[0, :, cols], v_all[0, :, cols]  # (T, D) each
    q = apply_rope(q_raw, positions, config.rope_base)  # (T, D)
    k = apply_rope(k_raw, positions, config.rope_base)  # (T, D)
    scale = 1.0 / math.sqrt(D)
    scores = (q @ k.transpose(0, 1)) * scale  # (T, T)
    mask = causal_mask(T, device=idx.device) if config.causal else torch.ones(T, T, dtype=torch.bool)  # (T, T)
    return Projections(
        layer=layer,
        head=head,
        positions=positions.cpu(),
        embeddings=embeddings[0].cpu(),
        block_input=x[0].cpu(),
        normed=normed[0].cpu(),  # (T, C) each
        q_raw=q_raw.cpu(),
        k_raw=k_raw.cpu(),
        q=q.cpu(),
        k=k.cpu(),
        v=v.cpu(),  # (T, D) each
        scale=scale,
        scores=scores.cpu(),
        mask=mask.cpu(),
    )


@torch.no_grad()
def attention_grid(model: GPT, ids: Sequence[int] | Tensor) -> Tensor:
    """Every layer's and head's attention weights for one text, from forward(return_weights=True):
    float32 (L, H, T, T); row t sums to one over keys 0..t and is exactly 0 to the right of t."""
    idx = checked_ids(model, ids)  # (1, T)
    out = model(idx, return_weights=True)
    return torch.stack([w[0] for w in out.weights]).cpu()  # L x (1, H, T, T) -> (L, H, T, T)


# ---- one row by hand -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RowCheck:
    """Query row t of one head, recomputed by hand and compared with the model's attention code."""

    t: int
    q_row: tuple[float, ...]  # (D,) q[t] after RoPE
    k_rows: tuple[tuple[float, ...], ...]  # (t+1, D) the keys query t may see: 0 .. t
    v_rows: tuple[tuple[float, ...], ...]  # (t+1, D) their values
    trace: handcheck.RowTrace  # dots term by term, scores, softmax, weighted values, out
    tensor_weights: tuple[float, ...]  # (t+1,) core.attention's weights on the same q, k, v in float64
    decided: Agreement  # hand vs tensor_weights, float64: the verdict
    model_weights: tuple[float, ...]  # (t+1,) the model's own float32 weights for keys 0 .. t
    model_float32: Agreement  # hand vs model_weights, float32 allowance: a figure, not a verdict
    future_weight: float  # forward's total weight on keys t+1 .. T-1 (0 for causal)
    differences: tuple[float, ...]  # (t+1,) |hand - model float32| per key (shown)
    weight_sum: float  # the hand-computed weights' sum (math.fsum)

    @property
    def within_tolerance(self) -> bool:
        return self.decided.passed


def check_row(proj: Projections, weights: Tensor, t: int) -> RowCheck:
    """Recompute row t of `proj`'s head with the hand-check's `attention_row` from its q, k, v (the keys the
    mask allows) and compare it with the attention kernel's weights on the same q, k, v cast to float64 (the
    verdict) and with `weights` (T, T), the model's own float32 weights for that layer and head
    (attention_grid(...)[layer, head], shown as a figure)."""
    T = proj.q.shape[0]
    if not isinstance(weights, Tensor) or tuple(weights.shape) != (T, T):
        got = tuple(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__
        raise ValueError(f"weights must be the (T, T) = ({T}, {T}) weights of this head, got {got}")
    if not is_int(t) or not 0 <= t < T:
        raise ValueError(f"query row t must be an integer in 0..{T - 1}, got {t!r}")
    allowed = [s for s in range(T) if bool(proj.mask[t, s])]  # keys query t may see
    forbidden = [s for s in range(T) if not bool(proj.mask[t, s])]
    q_row = tuple(proj.q[t].tolist())  # (D,)
    k_rows = tuple(tuple(proj.k[s].tolist()) for s in allowed)  # (t+1, D)
    v_rows = tuple(tuple(proj.v[s].tolist()) for s in allowed)  # (t+1, D)
    trace = handcheck.attention_row(q_row, k_rows, v_rows, scale=proj.scale)
    q64, k64, v64 = (x.detach().double()[None] for x in (proj.q, proj.k, proj.v))  # (1, T, D) each, exact casts
    weights64 = scaled_dot_product_attention(q64, k64, v64, proj.mask, scale=proj.scale).weights[0, t]  # (T,)
    tensor_weights = tuple(weights64[allowed].tolist())  # (t+1,)
    row = weights[t].tolist()  # (T,)
    model_weights = tuple(row[s] for s in allowed)
    same = functools.partial(row_agreement, q_row=q_row, k_rows=k_rows, v_rows=v_rows, scale=proj.scale)
    return RowCheck(
        t=t,
        q_row=q_row,
        k_rows=k_rows,
        v_rows=v_rows,
        trace=trace,
        tensor_weights=tensor_weights,
        decided=same(trace.softmax.weights, tensor_weights),
        model_weights=model_weights,
        model_float32=same(model_weights, trace.softmax.weights, dtype=torch.float32),
        future_weight=math.fsum(row[s] for s in forbidden),
        differences=tuple(abs(a - b) for a, b in zip(trace.softmax.weights, model_weights)),
        weight_sum=math.fsum(trace.softmax.weights),
    )


def weight_allowance(config: ModelConfig) -> float:
    """How far apart two of the model's float32 attention weights (each in [0, 1]) may be from rounding alone:
    allowance(float32, model_terms(config)). Weights closer than this are not ordered by the lab."""
    return allowance(torch.float32, model_terms(config), 1.0)


def heaviest_keys(weights: Sequence[float], config: ModelConfig) -> tuple[int, ...]:
    """The keys one query row of the model's float32 weights (the allowed keys' weights, e.g.
    RowCheck.model_weights) weighs most, as indices into `weights`: every key within weight_allowance(config)
    of the largest weight. One key, unless two weights are so close that the model's float32 arithmetic need
    not order them the same way on every CPU; then all of them, in order."""
    values = [float(w) for w in weights]
    if not values or not all(math.isfinite(w) for w in values):
        raise ValueError(f"weights must be a non-empty row of finite weights, got {len(values)} values")
    top = max(values)
    near = weight_allowance(config)
    return tuple(s for s, w in enumerate(values) if w >= top - near)


# ---- what each head does, in four numbers ------------------------------------------------------


@dataclass(frozen=True)
class HeadSummary:
    """Averages over the query rows of one head's weights (T, T): where its attention goes."""

    layer: int
    head: int
    self_weight: float  # mean weight of query t on key t (itself)
    previous_weight: float  # mean weight of query t on key t-1, over rows t >= 1 (nan when T = 1)
    first_weight: float  # mean weight of query t on key 0, over rows t >= 1 (nan when T = 1)
    max_weight: float  # mean of each row's largest weight (1 = every row one-hot)


def head_summaries(grid: Tensor) -> tuple[HeadSummary, ...]:
    """One HeadSummary per (layer, head) of `grid` (L, H, T, T), layer-major."""
    if not isinstance(grid, Tensor) or grid.dim() != 4 or grid.shape[-1] != grid.shape[-2] or grid.shape[-1] < 1:
        got = tuple(grid.shape) if isinstance(grid, Tensor) else type(grid).__name__
        raise ValueError(f"grid must be attention weights (L, H, T, T) with T >= 1, got {got}")
    L, H, T, _ = grid.shape
    g = grid.double()  # (L, H, T, T)
    diagonal = g.diagonal(dim1=-2, dim2=-1)  # (L, H, T)
    previous = g.diagonal(offset=-1, dim1=-2, dim2=-1)  # (L, H, T-1): row t, key t-1 for t >= 1
    first = g[..., 1:, 0]  # (L, H, T-1): rows t >= 1, key 0 (row 0's key 0 is always 1)
    row_max = g.amax(dim=-1)  # (L, H, T)
    nan = float("nan")
    return tuple(
        HeadSummary(
            layer=layer,
            head=head,
            self_weight=diagonal[layer, head].mean().item(),
            previous_weight=previous[layer, head].mean().item() if T > 1 else nan,
            first_weight=first[layer, head].mean().item() if T > 1 else nan,
            max_weight=row_max[layer, head].mean().item(),
        )
        for layer in range(L)
        for head in range(H)
    )
