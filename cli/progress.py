"""Progress bars of the long commands (evaluate, release check, tune, cost) on stderr, drawn with tqdm from
core's progress callbacks (core never prints).

Drawn on a terminal and not under --json; LAB_PROGRESS=1 draws them always (still on stderr, so stdout stays one
JSON object), 0 never. A report with done == 0 begins a new bar.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import TextIO

from tqdm import tqdm

from core.progress import Progress

ENV_VAR = "LAB_PROGRESS"


def wanted(json_output: bool, stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to draw bars on `stream` (module docstring); a LAB_PROGRESS other than 0, 1 or empty is refused."""
    value = environ.get(ENV_VAR, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(
            f"{ENV_VAR} must be 1 (always show progress), 0 (never) or unset (on a terminal, not with --json); "
            f"got {value!r}"
        )
    if value:
        return value == "1"
    return not json_output and stream.isatty()


class Bars:
    """A Progress callback drawing one tqdm bar per stage on `stream`."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.bar: tqdm | None = None

    def __call__(self, done: int, total: int, what: str) -> None:
        if self.bar is None or done == 0 or self.bar.total != total:
            self.close()
            self.bar = tqdm(total=total, desc=what, file=self.stream, unit="step", dynamic_ncols=True, leave=True)
        self.bar.set_description_str(what, refresh=False)
        self.bar.update(done - self.bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


@contextlib.contextmanager
def progress_bars(json_output: bool = False, stream: TextIO | None = None) -> Iterator[Progress | None]:
    """The callback to hand to core (None when no bars are wanted); the last bar is closed on the way out, so an
    error line printed after it starts on a line of its own."""
    stream = sys.stderr if stream is None else stream
    if not wanted(json_output, stream):
        yield None
        return
    bars = Bars(stream)
    try:
        yield bars
    finally:
        bars.close()
