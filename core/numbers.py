"""Numbers from outside and numbers reported: the one integer check and the one percentile rule.

Percentiles are nearest-rank, so every percentile the lab prints (latency p50 and p95, queue waits, the live
monitor) is one of the values measured and can be found by hand; an interpolated one can report a time no request
took. numpy's `method="inverted_cdf"` is the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeGuard


def is_int(x: object) -> TypeGuard[int]:
    """An int that is not a bool (a TypeGuard, so a type checker reads `x` as an int where this held)."""
    return isinstance(x, int) and not isinstance(x, bool)


def integer(name: str, value: object, low: int | None = None, high: int | None = None) -> int:
    """`value` if it is an integer (not a bool) within [low, high] (either bound may be None), else ValueError."""
    in_range = is_int(value) and (low is None or value >= low) and (high is None or value <= high)
    if not in_range:
        if low is not None and high is not None:
            want = f"an integer in {low}..{high}"
        elif low is not None:
            want = f"an integer >= {low}"
        elif high is not None:
            want = f"an integer <= {high}"
        else:
            want = "an integer"
        raise ValueError(f"{name} must be {want}, got {value!r}")
    return value  # type: ignore[return-value]


def percentile(values: Iterable[float], q: float) -> float | None:
    """The nearest-rank q-th percentile (0 < q <= 100) of `values`; None when there are none."""
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q <= 100:
        raise ValueError(f"q must lie in (0, 100], got {q!r}")
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]
