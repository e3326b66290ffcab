"""A class through the proxy: learners over Streamlit's protocol against `python -m core serve --class` (HAProxy in
front of 1 or 2 Streamlit workers), side by side in one run.

Run:  .venv/bin/python bench/bench_class.py [--workers 1,2] [--sessions 30,60] [--trainers 2] [--think 2]
                                            [--largest 10,20,30,45,60]

Each configuration gets a fresh class server on 127.0.0.1 (its own runs, registry and databases in a temporary
folder; every worker warmed before the class arrives, as `make class` does). The class is bench_load_protocol's:
trainers press Start training on the Training page (the runs train in processes of their own, at most
LAB_MAX_TRAINING_RUNS=1 at a time across the workers), learners open a lab page each (round-robin) and move its slider
`--moves` times about `--think` seconds apart; each websocket goes through HAProxy, which pins it to one worker.
First run and rerun are timed from the request to the server's `script_finished`. `--largest` then looks for the
largest class each configuration serves with a rerun p95 under 1 s, trying the sizes given in order until one fails.

The learners' client runs on the same 2 cores as the servers (a classroom's browsers run on the learners' own
machines), so these figures are an upper bound on what the server alone would take. Nothing passes or fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_browser import percentile  # noqa: E402
from bench_load_protocol import Results, drive_class, summary  # noqa: E402
from conftest import _free_run, _healthy  # noqa: E402

RERUN_P95_TARGET_S = 1.0
WARMED = "warm-up: "  # what ui/warmup.py writes to a worker's log once it has opened every lab page


@contextmanager
def class_server(tmp: Path, workers: int, timeout: float):
    """`python -m core serve --class --workers N` on 127.0.0.1, every worker warmed; yields the proxy's URL."""
    port = _free_run(workers + 1)
    env = dict(
        os.environ,
        LAB_TEACHER_PASSCODE="bench-class-passcode",
        LAB_RUN_DIR=str(tmp / "run"),
        LAB_RUNS_DIR=str(tmp / "runs"),
        LAB_REGISTRY_DIR=str(tmp / "registry"),
        LAB_CLASS_DB=str(tmp / "class.db"),
        LAB_TELEMETRY_DB=str(tmp / "telemetry.db"),
        LAB_MAX_TRAINING_RUNS="1",
        LAB_WARMUP="1",
    )
    command = [sys.executable, "-m", "core", "serve", "--class", "--workers", str(workers), "--port", str(port)]
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [*command, "--address", "127.0.0.1"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        logs = [tmp / "run" / f"worker-w{i + 1}.log" for i in range(workers)]
        while not (_healthy(url) and all(p.exists() and WARMED in p.read_text(errors="replace") for p in logs)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the class server did not come up warmed:\n{(tmp / 'serve.log').read_text()}")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # serve stops every worker's and the proxy's group itself
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def one_class(workers: int, sessions: int, args) -> tuple[Results, float]:
    args.sessions = sessions
    r = Results()
    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp, class_server(Path(tmp), workers, 600) as url:
        elapsed = asyncio.run(drive_class(url.replace("http://", "ws://") + "/_stcore/stream", args, r))
        for path in sorted(Path(tmp, "run").glob("worker-*.log")):
            r.errors += [f"{path.name}: {line}" for line in path.read_text(errors="replace").splitlines()
                         if line.startswith("Traceback")]  # fmt: skip
    return r, elapsed


def pct(xs: list[float], q: float) -> float:
    return percentile(xs, q) if xs else float("nan")


def line(workers: int, sessions: int, r: Results, elapsed: float) -> str:
    return (
        f"{workers} worker{'s' if workers > 1 else ' '} {sessions:3d} learners: "
        f"first run p50 {pct(r.first_run, 0.5):5.2f} / p95 {pct(r.first_run, 0.95):5.2f} s   "
        f"rerun p50 {pct(r.rerun, 0.5):5.2f} / p95 {pct(r.rerun, 0.95):5.2f} s   errors {len(r.errors)}   "
        f"isolation {'ok' if not r.isolation else 'FAILED'}   ({elapsed:.0f} s)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts to compare (default 1,2)")
    parser.add_argument("--sessions", default="30,60", help="class sizes, trainers included (default 30,60)")
    parser.add_argument("--trainers", type=int, default=2, help="sessions that train (default 2)")
    parser.add_argument("--moves", type=int, default=3, help="slider moves per learner (default 3)")
    parser.add_argument("--think", type=float, default=2.0, help="mean seconds between moves (default 2)")
    parser.add_argument("--ramp", type=float, default=0, help="seconds over which learners arrive (default 0)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one script run may take (default 300)")
    parser.add_argument("--largest", default="", help="sizes to try for the largest class with rerun p95 < 1 s")
    args = parser.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",")]
    sizes = [int(s) for s in args.sessions.split(",") if s]  # "" with --largest: only the search
    if not all(1 <= w <= 8 for w in counts) or not all(args.trainers < s <= 200 for s in sizes):
        parser.error("workers 1..8; class sizes larger than --trainers and at most 200")
    print(f"Class through HAProxy on {os.cpu_count()} cores; {args.trainers} training, {args.moves} moves each about "
          f"{args.think:g} s apart; clients on the same machine.")  # fmt: skip
    for workers in counts:
        for sessions in sizes:
            r, elapsed = one_class(workers, sessions, args)
            print(line(workers, sessions, r, elapsed), flush=True)
            print("   " + summary("rerun", r.rerun))
            for e in r.errors[:5]:
                print("   error: " + e)
    if args.largest:
        tries = [int(s) for s in args.largest.split(",")]
        for workers in counts:
            best = None
            for sessions in tries:
                r, elapsed = one_class(workers, sessions, args)
                print("   " + line(workers, sessions, r, elapsed), flush=True)
                if r.errors or not r.rerun or pct(r.rerun, 0.95) >= RERUN_P95_TARGET_S:
                    break
                best = sessions
            print(f"largest class with rerun p95 < {RERUN_P95_TARGET_S:g} s on {workers} worker(s): "
                  f"{best if best is not None else f'fewer than {tries[0]}'}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
