"""The KV cache, one concept in one module: the cache itself, every write to its buffers, and the window policy.

    prompt_window(L, room)         how many of a prompt's last tokens the model reads: the context window, written once
    window_start(N, L, room)       where that window begins in N tokens (the ids the model reads are ids[start:])
    KVCache                        per-layer k and v, preallocated; `append` is the one write to its buffers

Whether cached and uncached generation agree is measured once, by the engine's cache_parity, and decided by
core.agreement's rule (float64); the KV-cache lesson and the release gate both read that measurement.

Why a cache: when generating, the keys and values of earlier tokens never change (the model is causal),
so each new token needs only its own q, k, v. The cache stores every layer's k and v; a step feeds one
new token (T = 1) and attends over all S = cache + 1 keys. The cost of a step then no longer grows with
the number of tokens already generated (apart from the S-long dot products).

What is stored: keys AFTER RoPE, rotated once at their own absolute position, and values. A new query at
position m is rotated by m, so its scores with the stored keys depend on the offsets m - n, as without
a cache.

The mask with a cache is bottom-right aligned (`core.attention.causal_mask(T, S)`). In the words of
meta-llama's model.py:

    # When performing key-value caching, we compute the attention scores
    # only for the new sequence. Thus, the matrix of scores is of size
    # (seqlen, cache_len + seqlen), and the only masked entries are (i, j) for
    # j > cache_len + i, since row i corresponds to token cache_len + i.

Past the context length: sliding window, re-encoded. The model only ever sees positions
0 .. context_length - 1 (the range RoPE was trained on), so the cache holds at most context_length
tokens. The tokens the model sees are `ids[start:]`; generation starts with start = window_start(N, L), that is
max(0, N - L) (N tokens so far, L = context_length). When feeding the next token would make the window longer than
L, the window slides: start = N - keep, the cache is reset, and the last `keep` tokens are encoded
again from scratch at positions 0 .. keep - 1. The window then grows one token per step until it is
full again. `keep` defaults to L // 2 (the engine's `default_keep`): a re-encode every L // 2 + 1 steps, while the
model always sees at least L // 2 tokens of context. keep = L - 1 sees more context but re-encodes
every other step. The uncached path follows the same windows (`next_window_start`), so cached and
uncached generation agree token for token, also across the boundary. Whether cached and uncached logits
agree is core.agreement's rule (decided in float64), not this module's.

Shapes use the legend of `core/__init__.py`: B batch, H heads, T new positions, S cached + new, D head width.
"""

from __future__ import annotations

import torch
from torch import Tensor

from core.numbers import integer, is_int


def prompt_window(context_length: int, room: int = 0) -> int:
    """The context window: how many of a prompt's last tokens the model reads when `room` more tokens will be appended
    through the cache without the window sliding (0 for one next-token read, the suggestion's longest for a
    suggestion): context_length - room, but never less than half the context (and at least one token). The one rule
    every reader of a prompt uses (core.model.prompt.encode_for_model, the predictor, generation's first window)."""
    integer("context_length", context_length, 1)
    integer("room", room, 0)
    return max(context_length - room, context_length // 2, 1)


def window_start(n_tokens: int, context_length: int, room: int = 0) -> int:
    """Where the context window begins in a prompt of `n_tokens` tokens: ids[window_start(...):] are the last
    prompt_window(context_length, room) of them (all of them when the prompt is shorter). Every cut of a prompt's ids
    (generation's first window, the next-token read, the predictor's continuations) is this one."""
    integer("n_tokens", n_tokens, 0)
    return max(0, n_tokens - prompt_window(context_length, room))


class KVCache:
    """Preallocated k and v for every layer: (n_layer, B, H, capacity, D) each.

    `append(layer, k_new, v_new)` writes the T new positions of one layer and returns that layer's
    keys and values so far, views of shape (B, H, S, D). Layers are appended in order 0 .. n_layer - 1
    once per forward pass; `length` counts the positions every layer holds (it moves when the last layer is
    written). Every write to the buffers `k` and `v` is this method. Layer 0 checks the new keys' shape and the
    room left, once per pass; every later layer only that it comes next and brings the same shape (a cached step
    is a few microseconds of arithmetic per layer, so the checks are not repeated in full).
    """

    def __init__(
        self,
        n_layer: int,
        batch_size: int,
        n_head: int,
        head_dim: int,
        capacity: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ):
        sizes = dict(n_layer=n_layer, batch_size=batch_size, n_head=n_head, head_dim=head_dim, capacity=capacity)
        for name, value in sizes.items():
            integer(name, value, 1)
        shape = (n_layer, batch_size, n_head, capacity, head_dim)  # (n_layer, B, H, capacity, D)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.capacity = capacity
        # per layer (B, H, capacity, D) views, one select each (unbind's views refuse an in-place write under autograd)
        self.layer_k, self.layer_v = [self.k[i] for i in range(n_layer)], [self.v[i] for i in range(n_layer)]
        self._length = 0  # positions every layer holds
        self._next_layer = 0  # the layer whose append comes next in this pass
        self._new_shape: torch.Size | None = None  # (B, H, T, D) of this pass's new keys, set by layer 0

    @classmethod
    def for_model(cls, config, batch_size: int = 1, *, dtype=torch.float32, device=None) -> KVCache:
        """An empty cache sized for a `core.model.gpt.ModelConfig` (capacity = context_length)."""
        return cls(
            config.n_layer,
            batch_size,
            config.n_head,
            config.d_model // config.n_head,
            config.context_length,
            dtype=dtype,
            device=device,
        )

    @property
    def n_layer(self) -> int:
        return self.k.shape[0]

    @property
    def length(self) -> int:
        """Positions stored in every layer (the absolute position of the next token)."""
        return self._length

    @property
    def remaining(self) -> int:
        return self.capacity - self._length

    def reset(self) -> None:
        """Forget every position (the buffers are reused, stale values are never read)."""
        self._length, self._next_layer, self._new_shape = 0, 0, None

    def append(self, layer: int, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Store k_new, v_new (B, H, T, D) of `layer` after its cached positions; return (B, H, S, D) views."""
        if layer != self._next_layer or layer == 0:
            self._check_first(layer, k_new)
        if k_new.shape != self._new_shape or v_new.shape != self._new_shape:
            raise ValueError(
                f"layer {layer} brings k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)}; this pass "
                f"began with {tuple(self._new_shape or ())} (B, H, T, D) at layer 0"
            )
        start, T = self._length, k_new.shape[2]
        S = start + T
        self.layer_k[layer].narrow(2, start, T).copy_(k_new)  # (B, H, T, D) written at positions start .. S - 1
        self.layer_v[layer].narrow(2, start, T).copy_(v_new)
        if layer == self.n_layer - 1:
            self._length, self._next_layer = S, 0  # every layer holds the new positions
        else:
            self._next_layer = layer + 1
        return self.layer_k[layer].narrow(2, 0, S), self.layer_v[layer].narrow(2, 0, S)  # (B, H, S, D) each

    def _check_first(self, layer: int, k_new: Tensor) -> None:
        """The checks of a pass's first append (layer 0): the layer order, the new keys' shape, the room left."""
        if not is_int(layer) or not 0 <= layer < self.n_layer:
            raise ValueError(f"layer must lie in 0..{self.n_layer - 1}, got {layer!r}")
        if layer != self._next_layer:
            raise ValueError(
                f"layer {layer} appended while layer {self._next_layer} comes next: "
                "append every layer once per forward pass, in order"
            )
        _, B, H, _, D = self.k.shape
        x = k_new
        if x.dim() != 4 or x.shape[0] != B or x.shape[1] != H or x.shape[3] != D or x.shape[2] < 1:
            raise ValueError(f"k_new must be (B={B}, H={H}, T>=1, D={D}), got {tuple(x.shape)}")
        T = k_new.shape[2]
        if self._length + T > self.capacity:
            raise ValueError(
                f"cache holds {self._length} of {self.capacity} positions and cannot take {T} more; "
                "slide the window (reset and re-encode, see next_window_start)"
            )
        self._new_shape = k_new.shape

    def __repr__(self) -> str:
        n_layer, B, H, capacity, D = self.k.shape
        return f"KVCache(n_layer={n_layer}, B={B}, H={H}, D={D}, length={self.length}/{capacity})"
