"""A stand-in for a training run's process (`python -m tests.runs.job_fixture RUN_DIR SLOTS`, started by
the queue like the page's job): it reports numbered steps, polls should_stop() before each, and holds where
the test says until the test writes a file into the run folder: "go" after step `hold_at`, "finish" at the end.
With "saved" it logs a saved result (record_saved) and with "staged" it leaves a half-written save
(a `.bundle.*.tmp` folder, a staged file in its bundle) before it holds at the end."""

import sys
import time
from pathlib import Path

from core.runs.queue import Work, read_job, record_saved, serve


def hold(path: Path, should_stop=lambda: False) -> None:
    while not path.exists() and not should_stop():  # the test opens the gate by writing the file
        time.sleep(0.01)


def work_for(run_dir: Path) -> Work:
    _, payload = read_job(run_dir)
    steps, hold_at = payload.get("steps", 3), payload.get("hold_at")

    def work(report, should_stop):
        step = 0
        while steps is None or step < steps:
            if should_stop():
                return {"last_step": step - 1, "stopped": True}
            report({"step": step})
            if step == hold_at:
                hold(run_dir / "go")  # not polling the stop here: the stop must act at the next step's check
            step += 1
        if payload.get("saved"):
            record_saved(run_dir, {"last_step": step - 1, "saved": True}, payload["saved"])
        if payload.get("staged"):
            (run_dir / ".bundle.fixture.tmp").mkdir()
            (run_dir / ".bundle.fixture.tmp" / "model.safetensors").write_bytes(b"half")
            (run_dir / "bundle").mkdir(exist_ok=True)
            (run_dir / "bundle" / "model.safetensors").write_bytes(b"whole")
            (run_dir / "bundle" / ".manifest.json.fixture.tmp").write_bytes(b"{")
        if payload.get("fail"):
            raise ValueError(payload["fail"])
        if payload.get("hold_end"):
            hold(run_dir / "finish", should_stop)
        return {"last_step": step - 1, "stopped": should_stop()}

    return work


if __name__ == "__main__":
    run_dir, slots = Path(sys.argv[1]), int(sys.argv[2])
    serve(run_dir, slots, work_for(run_dir))
