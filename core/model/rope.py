"""Rotary position embedding (RoPE, Su et al. 2021 "RoFormer"), in real arithmetic.

A head vector of width D is read as D/2 adjacent pairs (x[2i], x[2i+1]). At absolute position m, pair i
is rotated counter-clockwise by the angle

    theta_{m,i} = m * base^(-2i / D)        i = 0 .. D/2 - 1

with the 2x2 rotation written out:

    [x'_2i  ]   [cos θ  -sin θ] [x_2i  ]
    [x'_2i+1] = [sin θ   cos θ] [x_2i+1]

Rotations keep lengths, and rotating q by θ_m and k by θ_n changes q·k only through θ_m - θ_n: the
score between a query and a key depends on their offset m - n, never on where the pair sits. This is
the layout of RoFormer and meta-llama (which writes it with complex numbers). GPT-NeoX and Hugging Face
pair dimension i with i + D/2 instead ("split half", `rotate_half`); `to_split_half` shows the two are
the same rotation after a fixed permutation of the feature dimensions.

Keys are rotated once, at their own absolute position, before they enter the KV cache.
Shapes use the legend of `core/__init__.py` (T positions, D head width).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from core.numbers import is_int

# ---- the validators: written once, used here and by core.lessons.rope ---------------------------


def check_width(D: object) -> None:
    """ValueError unless D is an even integer >= 2 (RoPE rotates pairs)."""
    if not is_int(D) or D < 2 or D % 2:
        raise ValueError(f"RoPE needs an even head width D >= 2 (it rotates pairs), got D={D!r}")


def check_base(base: object) -> None:
    """ValueError unless base is a finite number > 1 (a bool is not a number here)."""
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base) or base <= 1:
        raise ValueError(f"RoPE base must be a finite number > 1, got {base!r}")


def check_position(name: str, value: object) -> None:
    """ValueError unless value is an integer absolute position >= 0; `name` says which one it is."""
    if not is_int(value) or value < 0:
        raise ValueError(f"{name} must be an integer position >= 0, got {value!r}")


# ---- the rotation --------------------------------------------------------------------------------


def rope_frequencies(D: int, base: float = 10000.0) -> Tensor:
    """base^(-2i/D) for i = 0 .. D/2 - 1, float64 (D/2,). Pair 0 turns fastest (1 radian per position)."""
    check_width(D)
    check_base(base)
    i = torch.arange(D // 2, dtype=torch.float64)  # (D/2,)
    return base ** (-2.0 * i / D)  # (D/2,)


def rope_angles(positions: Tensor, D: int, base: float = 10000.0) -> Tensor:
    """theta[t, i] = positions[t] * base^(-2i/D), float64 (T, D/2)."""
    if not isinstance(positions, Tensor) or positions.dim() != 1 or positions.dtype.is_floating_point:
        got = tuple(positions.shape) if isinstance(positions, Tensor) else type(positions).__name__
        raise ValueError(f"positions must be a 1-D integer tensor of absolute positions (T,), got {got}")
    if positions.numel() and int(positions.min()) < 0:
        raise ValueError(f"positions must be >= 0, got minimum {int(positions.min())}")
    freqs = rope_frequencies(D, base).to(positions.device)  # (D/2,)
    return positions.to(torch.float64).unsqueeze(1) * freqs.unsqueeze(0)  # (T, D/2)


def _check_x(x: Tensor, positions: Tensor) -> None:
    if not isinstance(x, Tensor) or x.dim() < 2 or not x.is_floating_point():
        got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"x must be a floating-point tensor (..., T, D), got {got}")
    check_width(x.shape[-1])
    if isinstance(positions, Tensor) and positions.dim() == 1 and positions.shape[0] != x.shape[-2]:
        raise ValueError(
            f"positions has {positions.shape[0]} entries but x {tuple(x.shape)} has T={x.shape[-2]} positions"
        )


def apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """Rotate each adjacent pair (x[..., 2i], x[..., 2i+1]) of x (..., T, D) by +theta[t, i].

    positions (T,) are absolute positions: 0..T-1 for a fresh sequence, cache.length + 0..T-1 with a cache.
    """
    _check_x(x, positions)
    return rotate_pairs(x, *rope_cos_sin(positions, x.shape[-1], base, x.dtype))


def rope_cos_sin(
    positions: Tensor, D: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> tuple[Tensor, Tensor]:
    """The rotation tables (T, D) that `rotate_pairs` reads, computed in float64 then cast: the model computes them
    once per forward pass and every layer's q and k share them. Each pair (2i, 2i+1) holds
    cos = (cos θ_i, cos θ_i) and sin = (-sin θ_i, +sin θ_i), the two rows of the 2x2 rotation."""
    angles = rope_angles(positions, D, base)  # (T, D/2)
    cos = angles.cos().repeat_interleave(2, dim=-1)  # (T, D): cos θ_i at 2i and 2i + 1
    sin = torch.stack((-angles.sin(), angles.sin()), dim=-1).flatten(-2)  # (T, D/2, 2) -> (T, D): -sin, +sin
    return cos.to(dtype), sin.to(dtype)  # (T, D) each


@functools.lru_cache(maxsize=16)
def rope_table(
    context_length: int, D: int, base: float = 10000.0, dtype: torch.dtype = torch.float32, device=None
) -> tuple[Tensor, Tensor]:
    """rope_cos_sin (context_length, D) for positions 0 .. context_length - 1, computed once per shape and
    kept (never modify them): the model slices it in every forward pass instead of recomputing its angles.
    Row m is rope_cos_sin at position m (the same float64 angle, cast after cos and sin)."""
    check_position("context_length", context_length)
    # Plain tensors even when first asked for inside torch.inference_mode (generation): training uses
    # the same table, and autograd refuses inference tensors.
    with torch.inference_mode(False), torch.no_grad():
        positions = torch.arange(context_length, device=device)  # (L,)
        return rope_cos_sin(positions, D, base, dtype)  # (L, D) each


def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """The 2x2 rotation of every adjacent pair of x (..., T, D) by the tables of rope_cos_sin (T, D):

        x'_2i   = x_2i   cos θ - x_2i+1 sin θ
        x'_2i+1 = x_2i+1 cos θ + x_2i   sin θ

    written as x * cos + swapped * sin, where swapped exchanges the members of each pair and the table's sin
    carries the signs: four tensor operations, the fewest for the step of generation that runs it per layer."""
    swapped = x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (..., T, D/2, 2) -> (..., T, D): (x_2i+1, x_2i)
    return x * cos + swapped * sin  # (..., T, D)


# ---- the same rotation in the split-half (GPT-NeoX / Hugging Face) layout ------------------------


def split_half_permutation(D: int) -> Tensor:
    """Feature order that moves pair members apart: [0, 2, 4, ..., D-2, 1, 3, ..., D-1], long (D,).

    After `x[..., perm]`, the first member of pair i sits at i and the second at i + D/2.
    """
    check_width(D)
    return torch.cat((torch.arange(0, D, 2), torch.arange(1, D, 2)))  # (D,)


def to_split_half(x: Tensor) -> Tensor:
    """x (..., D) in adjacent-pair layout -> split-half layout (..., D)."""
    return x[..., split_half_permutation(x.shape[-1]).to(x.device)]  # (..., D)


def from_split_half(x: Tensor) -> Tensor:
    """Inverse of `to_split_half`: split-half layout (..., D) -> adjacent-pair layout (..., D)."""
    perm = split_half_permutation(x.shape[-1])  # (D,)
    inverse = torch.argsort(perm)  # (D,)
    return x[..., inverse.to(x.device)]  # (..., D)


def apply_rope_split_half(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """RoPE as GPT-NeoX / Hugging Face write it: x * cos + rotate_half(x) * sin, pairs (i, i + D/2).

    apply_rope_split_half(to_split_half(x)) == to_split_half(apply_rope(x)).
    """
    _check_x(x, positions)
    angles = rope_angles(positions, x.shape[-1], base)  # (T, D/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, D)
    first, second = x.chunk(2, dim=-1)  # (..., T, D/2) each
    rotated_half = torch.cat((-second, first), dim=-1)  # (..., T, D)
    return x * angles.cos().to(x.dtype) + rotated_half * angles.sin().to(x.dtype)  # (..., T, D)


# ---- a trace for the RoPE page: one vector, one position, every pair drawn -----------------------


@dataclass(frozen=True)
class RopeTrace:
    """What rotating one head vector at position m does to each of its D/2 pairs."""

    position: int
    frequencies: tuple[float, ...]  # (D/2,) base^(-2i/D)
    angles: tuple[float, ...]  # (D/2,) m * frequencies[i], radians
    rotations: tuple[tuple[tuple[float, float], tuple[float, float]], ...]  # (D/2,) [[cos, -sin], [sin, cos]]
    before: tuple[tuple[float, float], ...]  # (D/2,) pairs (x_2i, x_2i+1)
    after: tuple[tuple[float, float], ...]  # (D/2,) rotated pairs

    @property
    def rotated(self) -> tuple[float, ...]:
        """The rotated vector, flattened back to (D,)."""
        return tuple(value for pair in self.after for value in pair)


def rope_trace(vec: Sequence[float], position: int, base: float = 10000.0) -> RopeTrace:
    """Rotate one vector (D,) at one position with plain Python floats and `math`, pair by pair.

    A separate implementation from `apply_rope` (loops over pairs, no tensors); tests hold them together.
    """
    values = [float(value) for value in vec]
    D = len(values)
    check_width(D)
    check_base(base)
    check_position("position", position)
    frequencies, angles, rotations, before, after = [], [], [], [], []
    for i in range(D // 2):
        frequency = base ** (-2.0 * i / D)
        theta = position * frequency
        c, s = math.cos(theta), math.sin(theta)
        x0, x1 = values[2 * i], values[2 * i + 1]
        frequencies.append(frequency)
        angles.append(theta)
        rotations.append(((c, -s), (s, c)))
        before.append((x0, x1))
        after.append((c * x0 - s * x1, s * x0 + c * x1))
    return RopeTrace(
        position=position,
        frequencies=tuple(frequencies),
        angles=tuple(angles),
        rotations=tuple(rotations),
        before=tuple(before),
        after=tuple(after),
    )
