"""A decoder-only transformer, from scratch, for character-level autocomplete.

Read top-down, as nanoGPT's model.py:

    ids (B, T) -> token embedding (B, T, C)            no learned positions: RoPE rotates q and k
       -> n_layer x Block:  x = x + Attention(LayerNorm(x))     causal, multi-head, RoPE
                            x = x + MLP(LayerNorm(x))           Linear, GELU, Linear
       -> LayerNorm -> LM head tied to the token embedding -> logits (B, T, V)

One forward pass for training, generation and the lessons. Every block's attention writes the new k and v into the
KV cache when one is given, then attends with the lab's own kernel (the one the lesson pages show, which returns the
weights) when return_weights=True, so the app draws the maps of the real model, and with PyTorch's fused SDPA
otherwise. tests/model/test_gpt.py holds the two to parity in float64 (logits, gradients, the cache).

`ModelConfig.causal=False` exists only for the leakage lesson: without the mask every position sees
the token it has to predict and the training loss becomes impossibly good.

Shapes use the legend of `core/__init__.py`: B batch, H heads, T query positions, S key positions
(cache + new), D head width, C model width (d_model), V vocabulary size.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from core.attention import causal_mask, scaled_dot_product_attention
from core.model.kv_cache import KVCache
from core.model.rope import rope_table, rotate_pairs
from core.numbers import integer

# Bounds on every architecture number a config (and so a bundle's manifest) may declare, checked before anything
# is allocated. Each is far above the largest preset ("large": context 256, 6 layers, 6 heads, d_model 192, mlp
# ratio 4, ~2.7 M parameters) and far below what this machine can hold (24 GB, 2 cores).
MAX_CONTEXT_LENGTH = 4096  # 16x "large"; RoPE tables and a KV cache grow with it
MAX_D_MODEL = 2048  # ~10x "large"
MAX_LAYERS = 48  # 8x "large"
MAX_HEADS = 64  # ~10x "large"
MAX_VOCAB = 65536  # a character vocabulary: the whole Basic Multilingual Plane
MAX_MLP_RATIO = 16  # 4x the usual 4
# The product matters as much as the factors: 100 M parameters are 0.4 GB in float32 (~37x "large").
MAX_PARAMETERS = 100_000_000
_BOUNDS = {
    "vocab_size": ("MAX_VOCAB", MAX_VOCAB),
    "context_length": ("MAX_CONTEXT_LENGTH", MAX_CONTEXT_LENGTH),
    "n_layer": ("MAX_LAYERS", MAX_LAYERS),
    "n_head": ("MAX_HEADS", MAX_HEADS),
    "d_model": ("MAX_D_MODEL", MAX_D_MODEL),
    "mlp_ratio": ("MAX_MLP_RATIO", MAX_MLP_RATIO),
}


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int  # V; 0 only in PRESETS, filled from the tokenizer with preset(name, vocab_size)
    context_length: int  # longest sequence the model sees (RoPE positions 0 .. context_length - 1)
    n_layer: int
    n_head: int  # H
    d_model: int  # C; head width D = C / H
    mlp_ratio: int = 4  # MLP hidden width = mlp_ratio * C
    rope_base: float = 10000.0
    dropout: float = 0.0
    causal: bool = True  # False only for the leakage lesson

    def __post_init__(self):
        for name in ("vocab_size", "context_length", "n_layer", "n_head", "d_model", "mlp_ratio"):
            value = getattr(self, name)
            integer(name, value)
            if value < (0 if name == "vocab_size" else 1):
                raise ValueError(f"{name} must be {'>= 0' if name == 'vocab_size' else '>= 1'}, got {value}")
            bound_name, bound = _BOUNDS[name]
            if value > bound:
                raise ValueError(f"{name} must be <= {bound} ({bound_name}), got {value}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_head={self.n_head}")
        if self.head_dim % 2:
            raise ValueError(
                f"head width d_model / n_head = {self.d_model}/{self.n_head} = {self.head_dim} must be even "
                "(RoPE rotates pairs of dimensions)"
            )
        V, C, L, R = self.vocab_size, self.d_model, self.n_layer, self.mlp_ratio
        params = V * C + L * (4 * C + (4 + 2 * R) * C * C) + 2 * C  # embedding (tied head), blocks, final norm
        if params > MAX_PARAMETERS:
            raise ValueError(
                f"this architecture has {params:,} parameters, more than MAX_PARAMETERS="
                f"{MAX_PARAMETERS:,} ({4 * MAX_PARAMETERS / 1e9:.1f} GB in float32); make it smaller"
            )
        if not isinstance(self.rope_base, (int, float)) or not math.isfinite(self.rope_base) or self.rope_base <= 1:
            raise ValueError(f"rope_base must be a finite number > 1, got {self.rope_base!r}")
        if not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout!r}")
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal must be a bool, got {self.causal!r}")

    @property
    def head_dim(self) -> int:
        """D = C / H."""
        return self.d_model // self.n_head


# Named presets; vocab_size is filled from the tokenizer: preset("default", tok.vocab_size).
PRESETS: dict[str, ModelConfig] = {
    # Unit tests: a few thousand parameters, milliseconds per step.
    "tiny": ModelConfig(vocab_size=0, context_length=32, n_layer=2, n_head=2, d_model=32),
    # Benchmarks at short context.
    "baby": ModelConfig(vocab_size=0, context_length=64, n_layer=4, n_head=4, d_model=128),
    # The shipped model: ~0.8 M parameters (~3.2 MB in fp32), trains in ~10 minutes on 2 CPU cores;
    # 128 characters of context covers one or two lines of domain text.
    "default": ModelConfig(vocab_size=0, context_length=128, n_layer=4, n_head=4, d_model=128),
    # The context-256 generation benchmark.
    "large": ModelConfig(vocab_size=0, context_length=256, n_layer=6, n_head=6, d_model=192),
}


def preset(name: str, vocab_size: int) -> ModelConfig:
    """PRESETS[name] with its vocabulary size filled in."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return dataclasses.replace(PRESETS[name], vocab_size=vocab_size)


@dataclass(frozen=True)
class ModelOutput:
    logits: Tensor  # (B, T, V)
    weights: list[Tensor] | None  # per layer (B, H, T, S), only with return_weights=True


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention: project to q, k, v, rotate q and k (RoPE), store k and v in the cache, attend,
    merge heads. Attends with the lessons' kernel when the weights are asked for, with PyTorch's fused kernel
    otherwise; the mask arrives from GPT.forward, built once per pass."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=False)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        mask: Tensor | None,
        is_causal: bool,
        cache: KVCache | None,
        layer: int,
        return_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        B, T, C = x.shape
        H, D = self.config.n_head, self.config.head_dim
        qkv = self.qkv(x).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)  # (3, B, H, T, D): q, k, v
        q, k = rotate_pairs(qkv[:2], cos, sin)  # (B, H, T, D) each: RoPE at the new tokens' absolute positions
        v = qkv[2]  # (B, H, T, D); k is rotated before it enters the cache
        if cache is not None:
            k, v = cache.append(layer, k, v)  # (B, H, S, D) each: cached keys + the T new ones
        weights = None
        if return_weights:
            result = scaled_dot_product_attention(q, k, v, mask)  # out (B, H, T, D), weights (B, H, T, S)
            out, weights = result.out, result.weights
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)  # (B, H, T, D)
        out = self.proj(out.transpose(1, 2).reshape(B, T, C))  # (B, T, C): heads side by side, then mixed
        return (self.resid_dropout(out) if self.training else out), weights


class MLP(nn.Module):
    """Position-wise feed-forward: C -> mlp_ratio * C -> C."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.mlp_ratio * config.d_model, bias=False)
        self.proj = nn.Linear(config.mlp_ratio * config.d_model, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        h = F.gelu(self.fc(x))  # (B, T, mlp_ratio * C)
        out = self.proj(h)  # (B, T, C)
        return self.dropout(out) if self.training else out  # eval: no dropout call at all (a cached step is tiny)


class Block(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm_attn = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.norm_mlp = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        mask: Tensor | None,
        is_causal: bool,
        cache: KVCache | None,
        layer: int,
        return_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        attn_out, weights = self.attn(self.norm_attn(x), cos, sin, mask, is_causal, cache, layer, return_weights)
        x = x + attn_out  # (B, T, C)
        x = x + self.mlp(self.norm_mlp(x))  # (B, T, C)
        return x, weights


class GPT(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise ValueError(f"GPT needs a ModelConfig, got {type(config).__name__}")
        if config.vocab_size < 1:
            raise ValueError(
                f"vocab_size is {config.vocab_size}: fill it from the tokenizer, e.g. preset(name, tok.vocab_size)"
            )
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.norm_final = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # weight tying: one (V, C) matrix reads and writes
        self.apply(self._init_weights)
        # GPT-2: scale the projections that write into the residual stream by 1/sqrt(2 * n_layer),
        # so the stream's variance does not grow with depth (two residual additions per block).
        for name, param in self.named_parameters():
            if name.endswith("attn.proj.weight") or name.endswith("mlp.proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        """Trainable parameters, the tied embedding / LM head counted once."""
        return sum(p.numel() for p in self.parameters())

    def rope_table(self) -> tuple[Tensor, Tensor]:
        """cos and sin (L, D) of every position this model sees, in its weights' dtype (computed once)."""
        param = self.token_embedding.weight
        c = self.config
        return rope_table(c.context_length, c.head_dim, c.rope_base, param.dtype, param.device)

    def new_cache(self, batch_size: int = 1) -> KVCache:
        """An empty KV cache that fits this model."""
        param = self.token_embedding.weight
        return KVCache.for_model(self.config, batch_size, dtype=param.dtype, device=param.device)

    def forward(self, idx: Tensor, cache: KVCache | None = None, *, return_weights: bool = False) -> ModelOutput:
        """Logits (B, T, V) for token ids idx (B, T); the new positions follow those already in `cache` (which then
        holds them too). return_weights=True attends with the lessons' kernel and returns every layer's weights."""
        self._check_idx(idx, cache)  # once per pass: no layer checks again
        B, T = idx.shape
        start = 0 if cache is None else cache.length
        S = start + T
        cos, sin = self.rope_table()  # (L, D) each, computed once per shape
        cos, sin = cos[start:S], sin[start:S]  # (T, D) each: the new tokens' absolute positions, all layers
        # Query t sits at absolute position S - T + t and may see keys 0 .. S - T + t: the causal mask is
        # bottom-right aligned. SDPA's is_causal is top-left aligned, right only when T == S; one new token sees
        # every key, so it needs no mask; a prefill into a non-empty cache needs the explicit (T, S) mask.
        mask, is_causal = None, False
        if self.config.causal and return_weights:
            mask = causal_mask(T, S, device=idx.device)  # (T, S), True = may attend
        elif self.config.causal and T > 1:
            if T == S:
                is_causal = True
            else:
                mask = causal_mask(T, S, device=idx.device)  # (T, S)
        x = self.token_embedding(idx)  # (B, T, C)
        if self.training:
            x = self.dropout(x)
        weights = []
        for layer, block in enumerate(self.blocks):
            x, layer_weights = block(x, cos, sin, mask, is_causal, cache, layer, return_weights)  # (B, T, C)
            weights.append(layer_weights)  # (B, H, T, S) or None
        x = self.norm_final(x)
        logits = self.lm_head(x)  # (B, T, V)
        return ModelOutput(logits=logits, weights=weights if return_weights else None)

    def _check_idx(self, idx: Tensor, cache: KVCache | None) -> None:
        if not isinstance(idx, Tensor) or idx.dim() != 2 or idx.dtype != torch.long:
            got = f"{tuple(idx.shape)} {idx.dtype}" if isinstance(idx, Tensor) else type(idx).__name__
            raise ValueError(f"idx must be a 2-D long tensor (B, T), got {got}")
        B, T = idx.shape
        if T < 1:
            raise ValueError(f"idx must hold at least one position, got shape {tuple(idx.shape)}")
        start = 0 if cache is None else cache.length
        if start + T > self.config.context_length:
            where = f"{start} cached + {T} new" if cache is not None else f"T={T}"
            raise ValueError(
                f"{where} positions exceed context_length={self.config.context_length}; "
                "keep the last context_length tokens (or slide the cache window)"
            )
        if cache is not None and cache.k.shape[1] != B:
            raise ValueError(f"cache was built for batch size {cache.k.shape[1]}, got idx {tuple(idx.shape)}")
        low, high = (int(bound) for bound in torch.aminmax(idx))  # one pass, one read back
        if low < 0 or high >= self.config.vocab_size:
            raise ValueError(f"token ids must lie in 0..{self.config.vocab_size - 1}, got min {low}, max {high}")
