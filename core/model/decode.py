"""The fast path of generation: the same weights and the same arithmetic as GPT.forward with a KV
cache, without what only teaching needs.

GPT.forward is the path the lab shows: every attention map returned, every intermediate checkable, every
input validated in every layer. A cached decode step of the shipped model is about 1.6 MFLOP, yet that
path spent about 3 ms per token on Python objects, masks and checks around tens of microseconds of
arithmetic, and lost to a sampler that recomputes the whole window. `decode` does the same computation:

    checked once per call     ids, batch size and room in the cache (GPT._check_idx), not per layer
    RoPE                      one complex multiply of q and k together (core.model.rope.rotate_qkv), by a
                              table computed once
    attention                 PyTorch's fused F.scaled_dot_product_attention over the cached keys; a
                              one-token step sees every key, so it needs no mask at all
    KV cache                  KVCache.write for every layer (no per-layer checks), KVCache.commit once after
    autograd                  off (torch.inference_mode), so no graph is recorded

GPT.forward runs it when called with a cache and fast_attention=True, after its checks: generation, the
typist's continuations and the served suggestion go this way. It returns the logits only (no attention
weights) and records no gradients. tests/model/test_decode.py holds it to parity with the teaching path
(logits through a prefill and token by token, the cache it fills; in float64 by core.agreement's rule),
and generation with it to the same tokens as without a cache. Eval mode only: it applies no dropout.

Shapes use the legend of `core/__init__.py`.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from core.attention import causal_mask
from core.model.kv_cache import KVCache
from core.model.rope import rope_rotations, rotate_qkv

if TYPE_CHECKING:
    from core.model.gpt import GPT, Block


class _Layer(NamedTuple):
    """One block's tensors, looked up once per model (nn.Module attribute lookups cost a microsecond each)."""

    norm_attn: tuple[Tensor, Tensor, float]  # weight (C,), bias (C,), eps
    qkv: Tensor  # (3C, C)
    proj: Tensor  # (C, C)
    norm_mlp: tuple[Tensor, Tensor, float]
    fc: Tensor  # (R C, C)
    fc_proj: Tensor  # (C, R C)


# The Parameters themselves, not copies: training and load_state_dict update them in place, so the plan stays
# true; it goes when the model does.
_PLANS: weakref.WeakKeyDictionary[GPT, tuple[list[_Layer], tuple[Tensor, Tensor, float], Tensor]] = (
    weakref.WeakKeyDictionary()
)


def _norm(module) -> tuple[Tensor, Tensor, float]:
    return module.weight, module.bias, module.eps


def _plan(model: GPT) -> tuple[list[_Layer], tuple[Tensor, Tensor, float], Tensor]:
    plan = _PLANS.get(model)
    if plan is None:
        blocks: list[Block] = list(model.blocks)  # type: ignore[arg-type]  # a ModuleList of Blocks
        layers = [
            _Layer(
                _norm(b.norm_attn),
                b.attn.qkv.weight,
                b.attn.proj.weight,
                _norm(b.norm_mlp),
                b.mlp.fc.weight,
                b.mlp.proj.weight,
            )
            for b in blocks
        ]
        plan = _PLANS[model] = (layers, _norm(model.norm_final), model.lm_head.weight)
    return plan


@torch.inference_mode()
def decode(model: GPT, idx: Tensor, cache: KVCache) -> Tensor:
    """Logits (B, T, V) of ids idx (B, T) that follow the cache's positions; the cache then holds them too.

    Called as model(idx, cache=cache, fast_attention=True), which checks idx and the cache's room first."""
    if model.training and model.config.dropout > 0:
        raise ValueError("the cached fast path applies no dropout: call model.eval() first (generate does)")
    c = model.config
    B, T = idx.shape
    H, D, C = c.n_head, c.head_dim, c.d_model
    start = cache.length
    S = start + T
    layers, norm_final, lm_head = _plan(model)
    param = lm_head
    rotations = rope_rotations(c.context_length, D, c.rope_base, param.dtype, param.device)  # (L, D/2) complex
    rotation = rotations[start:S].view(T, 1, 1, D // 2)  # (T, 1, 1, D/2): e^{i theta} at the new positions
    if not c.causal or T == 1:
        mask, is_causal = None, False  # a new last token may see every key
    elif start == 0:
        mask, is_causal = None, True  # a prefill: the square causal mask
    else:
        mask, is_causal = causal_mask(T, S), False  # (T, S) bottom-right aligned
    x = model.token_embedding.weight[idx.reshape(-1)]  # (B T, C): rows stay 2-D through every linear layer
    for layer, (norm_attn, qkv_w, proj_w, norm_mlp, fc_w, fc_proj_w) in enumerate(layers):
        qkv = F.linear(F.layer_norm(x, (C,), *norm_attn), qkv_w).view(B, T, 3, H, D)  # (B, T, 3, H, D)
        q, k, v = rotate_qkv(qkv, rotation)  # (B, H, T, D) each, q and k rotated
        keys, values = cache.write(layer, k, v)  # (B, H, S, D) each: the cached positions, then these T
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=is_causal)  # (B, H, T, D)
        x = torch.addmm(x, out.transpose(1, 2).reshape(B * T, C), proj_w.t())  # (B T, C): x + out W_proj^T
        h = F.gelu(F.linear(F.layer_norm(x, (C,), *norm_mlp), fc_w))  # (B T, R C)
        x = torch.addmm(x, h, fc_proj_w.t())  # (B T, C)
    cache.commit(T)
    logits = F.linear(F.layer_norm(x, (C,), *norm_final), lm_head)  # (B T, V)
    return logits.view(B, T, -1)  # (B, T, V)
