"""The decision utility: keystrokes saved, net of the attention the suggestions cost.

    net saved per 100 characters = 100 * (gross saved - cost * (shown - accepted)) / characters covered

A suggestion of k characters taken with probability p is worth showing when p > c / (k - 1 + c). Why one keystroke
by default: the keystroke-level model (Card, Moran and Newell, CACM 23(7), 1980) prices a keystroke at 0.28 s and a
mental operator at 1.35 s; a dismissed suggestion costs between a glance and that. One keystroke is the cheap end,
a conservative price; a team that finds suggestions more distracting records a higher one.
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np

DEFAULT_ATTENTION_COST = 1.0  # keystrokes per suggestion shown and not taken (K = 0.28 s; the docstring says why)
MAX_ATTENTION_COST = 100.0  # more than a whole line of typing for one glance: surely a mistake

Number = TypeVar("Number", float, np.ndarray)


def check_attention_cost(cost: object) -> float:
    """`cost` as a float in [0, MAX_ATTENTION_COST]; ValueError naming the value otherwise."""
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not math.isfinite(cost):
        raise ValueError(f"attention_cost must be a number of keystrokes, got {cost!r}")
    if not 0.0 <= cost <= MAX_ATTENTION_COST:
        raise ValueError(
            f"attention_cost must lie in 0..{MAX_ATTENTION_COST:g} keystrokes per suggestion not taken, got {cost!r}"
        )
    return float(cost)


def net_saved(saved: Number, shown: Number, accepted: Number, cost: float) -> Number:
    """Keystrokes saved net of attention: `saved` (gross) less `cost` for every suggestion shown and not taken."""
    return saved - cost * (shown - accepted)


def per_100(value: float, covered: int) -> float | None:
    """A count per 100 characters covered by the typist."""
    return 100.0 * value / covered if covered else None
