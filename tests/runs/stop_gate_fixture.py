"""The Training page's own run process (the page's job: train, tune, keep), held at one evaluation until a stop
is requested: `python -m tests.runs.stop_gate_fixture RUN_DIR SLOTS`, started by the queue.

Why a gate: a run takes tens of steps a second, so a test that reads the log and then writes the stop would measure
its own reaction time. Held at the evaluation of step k (the first after step 0) until the stop file is there, the
run is asked to stop at a step the test knows, and the step it ends on says how soon the stop acted."""

import sys
import time
from pathlib import Path

from core.runs.events import progress_to_json
from core.runs.job import page_work
from core.runs.queue import Work, serve

HOLD_LIMIT_S = 300  # a test that never stops the run must not leave it held forever


def gated(run_dir: Path) -> Work:
    work = page_work(run_dir)

    def held_work(report, should_stop):
        def report_then_hold(event) -> None:
            report(event)
            if event.kind == "eval" and event.step > 0 and not (run_dir / "held").exists():
                (run_dir / "held").write_text(str(event.step))  # once: the step the stop is asked at
                deadline = time.monotonic() + HOLD_LIMIT_S
                while not should_stop() and time.monotonic() < deadline:
                    time.sleep(0.01)

        return work(report_then_hold, should_stop)

    return held_work


if __name__ == "__main__":
    run_dir, slots = Path(sys.argv[1]), int(sys.argv[2])
    serve(run_dir, slots, gated(run_dir), write_event=progress_to_json)
