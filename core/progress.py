"""How a long loop says how far it has got: through a callback, never a print (core never prints; the command line
draws the bars).

A Progress callback hears (done, total, what): a call with done == 0 begins a stage, done never goes down within
it, and a stage run to its end reports done == total. Callers take `progress: Progress | None = None`; None (the
default, and the app's) reports nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

Progress = Callable[[int, int, str], None]
Item = TypeVar("Item")


def steps(items: Sequence[Item], progress: Progress | None, what: str) -> Iterator[Item]:
    """Yield `items`, reporting to `progress` (module docstring) as each one is done."""
    total = len(items)
    if progress is not None:
        progress(0, total, what)
    for done, item in enumerate(items, 1):
        yield item
        if progress is not None:
            progress(done, total, what)


def within(progress: Progress | None, stage: str) -> Progress | None:
    """`progress` with each `what` prefixed by `stage` (None stays None)."""
    if progress is None:
        return None
    outer = progress  # bound for the closure: the checker cannot narrow the argument inside it
    return lambda done, total, what: outer(done, total, f"{stage}: {what}")
