"""How a long loop says how far it has got: through a callback, never a print (core never prints; the command
line draws the bars, cli/progress.py).

    Progress                      Callable[[done, total, what], None]: `done` of the `total` steps of the current
                                  stage are finished and `what` names what is running (at done == total, what ran).
                                  A call with done == 0 begins a stage; done never goes down within one.
    steps(items, progress, what)  the items one by one, reporting (0, n, what) before the first and (k, n, what)
                                  after the k-th, so a stage run to its end reports done == total
    within(progress, stage)       the same callback with every `what` said as "stage: what" (the evaluation of the
                                  n-gram and of the transformer run the same loops)

Callers take `progress: Progress | None = None`; None (the default, and the app's) reports nothing.
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
