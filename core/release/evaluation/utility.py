"""The decision utility: keystrokes saved, net of the attention the suggestions cost.

    DEFAULT_ATTENTION_COST                     1.0 keystroke per suggestion shown and not taken (why: below)
    check_attention_cost(cost)                 the cost as a float, or ValueError saying what is allowed
    net_saved(saved, shown, accepted, cost)    saved - cost * (shown - accepted): numbers or numpy arrays alike
    per_100(value, covered)                    100 * value / covered, None when nothing was covered

A suggestion is worth its interruption only if what it saves pays for the look it takes. The simulated typist
(core.release.evaluation.typing_sim) saves k - 1 keystrokes when it accepts a k-character suggestion (one Tab), and pays
`attention_cost` keystrokes for every suggestion it is shown and does not take: the time to read it and go on
typing. The figure every surface reports and every threshold is tuned on is

    net keystrokes saved per 100 characters = 100 * (gross saved - cost * (shown - accepted)) / characters covered

with the gross figure, the acceptance rate (accepted / shown) and the suggestions shown per 100 characters
beside it. At a price c a suggestion of k characters that the text takes with probability p is worth showing
when p * (k - 1) > c * (1 - p), that is p > c / (k - 1 + c): the price sets the threshold a tuning lands on.

Why one keystroke by default. The keystroke-level model (Card, Moran and Newell, "The keystroke-level model for
user performance time with interactive systems", CACM 23(7), 1980) prices a keystroke K at 0.28 s for an average
non-secretarial typist (about 40 words a minute) and a mental operator M (deciding, recalling) at 1.35 s, about
five keystrokes. A suggestion the typist reads and dismisses takes at least a glance and a decision (perceiving
and comparing a few characters: a few hundred milliseconds in the same authors' model human processor), and
at most an M. One keystroke (0.28 s) prices it at the cheap end of that range: a conservative price, so a model
that pays its way at this price pays it for most typists; a team that finds its suggestions more distracting
records a higher one (`python -m core tune --attention-cost C`) and sees what it buys on the trade-off table.
Accepting a suggestion also takes a look, which this utility does not charge: the price is for the looks that
buy nothing.
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
