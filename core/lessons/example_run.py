"""The worked example as the lesson shows it: its source beside what it prints.

Only this predefined file is run, in a separate Python process (it seeds torch's global generator and sets its print
options, which must not leak into the server), with a time limit. Nothing a learner types is ever run.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from core.i18n import _

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "attention_by_hand.py"
TIMEOUT_S = 120  # importing torch in a fresh process takes a few seconds on a busy 2-core machine


@dataclass(frozen=True)
class ExampleRun:
    source: str
    output: str  # what it printed (stdout), or why it could not run
    ok: bool


def run_worked_example() -> ExampleRun:
    source = EXAMPLE.read_text(encoding="utf-8")
    try:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=EXAMPLE.parent
        )
    except subprocess.TimeoutExpired:
        return ExampleRun(source, _("the example did not finish within {seconds} s").format(seconds=TIMEOUT_S), False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [_("no message")])[-1]
        return ExampleRun(
            source,
            _("the example stopped with exit code {code}: {message}").format(code=done.returncode, message=last),
            False,
        )
    return ExampleRun(source, done.stdout, True)
