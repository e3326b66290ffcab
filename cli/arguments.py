"""What a command reads from its arguments, bounded where it enters, and the error a user can fix.

Every command module parses with these, and the command line prints a UsageError as one `error:` line with exit
status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from core.numbers import integer


class UsageError(Exception):
    """A problem the user can fix; printed as one `error:` line."""


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse `type`: an integer from `low` to `high`, else the parser's one `error:` line naming the flag. A
    number is bounded where it enters (`train --threads 100000` crashed inside torch with exit 139)."""

    def parse(raw: str) -> int:
        try:
            return integer("the value", int(raw), low, high)  # int() refuses past 4,300 digits: a ValueError too
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer from {low} to {high}, got {raw[:40]!r}") from None

    return parse


def real_number(low: float, high: float) -> Callable[[str], float]:
    """An argparse `type`: a finite number from `low` to `high` (never NaN or infinite), else one `error:` line."""

    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # False for NaN
            raise argparse.ArgumentTypeError(f"must be a number from {low:g} to {high:g}, got {raw[:40]!r}")
        return value

    return parse
