"""The KV cache: per-layer keys and values, preallocated; `append` is the one write to its buffers.

Why a cache: when generating, the keys and values of earlier tokens never change (the model is causal),
so each new token needs only its own q, k, v. A step feeds one new token (T = 1) and attends over all
S = cache + 1 keys, so its cost no longer grows with the tokens already generated (apart from the S-long dot
products).

What is stored: keys AFTER RoPE, rotated once at their own absolute position, and values. A new query at
position m is rotated by m, so its scores with the stored keys depend on the offsets m - n, as without
a cache. The mask with a cache is bottom-right aligned (`causal_mask(T, S)`): row i is token cache_len + i
and sees keys j <= cache_len + i.

The cache never holds more than context_length tokens: past the context the engine slides the window, resets the
cache and re-encodes the last `keep` tokens. Whether cached and uncached generation agree is measured once, by the
engine's cache_parity, and decided in float64 by the agreement rule.

Shapes use the legend of `core/__init__.py`: B batch, H heads, T new positions, S cached + new, D head width.
"""

from __future__ import annotations

import torch
from torch import Tensor

from core.numbers import integer, is_int


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

    def select(self, rows: Tensor) -> KVCache:
        """A new cache holding only batch rows `rows` (B',) of this one, at the same positions, written through
        `append`: a batch whose finished rows drop out (the typist's greedy completions) computes only the rest."""
        if self._next_layer != 0:
            raise ValueError("select between forward passes only, not while a pass is appending its layers")
        n_layer, _, H, capacity, D = self.k.shape
        kept = KVCache(n_layer, len(rows), H, D, capacity, dtype=self.k.dtype, device=self.k.device)
        if self._length == 0:
            return kept
        for layer in range(n_layer):
            k, v = self.layer_k[layer][rows], self.layer_v[layer][rows]  # (B', H, capacity, D) each
            kept.append(layer, k.narrow(2, 0, self._length), v.narrow(2, 0, self._length))  # (B', H, S, D) each
        return kept

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
