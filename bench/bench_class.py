"""A class through the proxy: learners over Streamlit's protocol against `python -m core serve --class` (HAProxy in
front of 1 or 2 Streamlit workers), side by side in one run.

Run:  .venv/bin/python bench/bench_class.py [--workers 1,2] [--sessions 30,60] [--trainers 2] [--think 2]
                                            [--largest 10,20,30,45,60] [--before [REF]] [--root DIR] [--json]

Before and after in one run: `--before REF` measures REF's tree (a temporary git worktree, bench/before_after.py;
bare `--before` is 7a68661, where issue 26 started), then this tree, with the same arguments, each configuration
on a fresh class server of that side's tree, and prints one table: per workers and class size, both sides' first
run and rerun p50/p95 with after/before. `--root DIR` serves another checkout (`python -m core serve --class` from
its folder, what `--before` does for each side); `--json` prints one JSON object (progress goes to stderr).

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
import json
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

from before_after import add_side_arguments, both_sides, side_by_side, strip_before, use_root  # noqa: E402
from bench_browser import percentile  # noqa: E402
from bench_load_protocol import Results, drive_class, summary  # noqa: E402
from conftest import _free_run, _healthy  # noqa: E402

RERUN_P95_TARGET_S = 1.0
WARMED = "warm-up: "  # what ui/warmup.py writes to a worker's log once it has opened every lab page


@contextmanager
def class_server(tmp: Path, workers: int, timeout: float, root: Path = ROOT):
    """`python -m core serve --class --workers N` of `root`'s tree on 127.0.0.1, every worker warmed; yields the
    proxy's URL."""
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
        PYTHONPATH=str(root),  # `-m core` is root's core, whose serve starts root's app.py from root
    )
    command = [sys.executable, "-m", "core", "serve", "--class", "--workers", str(workers), "--port", str(port)]
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [*command, "--address", "127.0.0.1"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
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
    with (
        tempfile.TemporaryDirectory(prefix="bench-class-") as tmp,
        class_server(Path(tmp), workers, 600, args.root) as url,
    ):
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
        f"first run p50 {pct(r.first_run, 50):5.2f} / p95 {pct(r.first_run, 95):5.2f} s   "
        f"rerun p50 {pct(r.rerun, 50):5.2f} / p95 {pct(r.rerun, 95):5.2f} s   errors {len(r.errors)}   "
        f"isolation {'ok' if not r.isolation else 'FAILED'}   ({elapsed:.0f} s)"
    )


def row(workers: int, sessions: int, r: Results, elapsed: float) -> dict:
    """One configuration's figures, in seconds, as --json prints them."""
    return {
        "workers": workers,
        "learners": sessions,
        "first p50": pct(r.first_run, 50),
        "first p95": pct(r.first_run, 95),
        "rerun p50": pct(r.rerun, 50),
        "rerun p95": pct(r.rerun, 95),
        "errors": len(r.errors),
        "isolation": "ok" if not r.isolation else "FAILED",
        "seconds": elapsed,
    }


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts to compare (default 1,2)")
    parser.add_argument("--sessions", default="30,60", help="class sizes, trainers included (default 30,60)")
    parser.add_argument("--trainers", type=int, default=2, help="sessions that train (default 2)")
    parser.add_argument("--moves", type=int, default=3, help="slider moves per learner (default 3)")
    parser.add_argument("--think", type=float, default=2.0, help="mean seconds between moves (default 2)")
    parser.add_argument("--ramp", type=float, default=0, help="seconds over which learners arrive (default 0)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one script run may take (default 300)")
    parser.add_argument("--largest", default="", help="sizes to try for the largest class with rerun p95 < 1 s")
    add_side_arguments(parser)
    args = parser.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",")]
    sizes = [int(s) for s in args.sessions.split(",") if s]  # "" with --largest: only the search
    if not all(1 <= w <= 8 for w in counts) or not all(args.trainers < s <= 200 for s in sizes):
        parser.error("workers 1..8; class sizes larger than --trainers and at most 200")
    if args.before:
        before, after = both_sides(Path(__file__).resolve(), args.before, strip_before(argv))
        numbers = ["first p50", "first p95", "rerun p50", "rerun p95", "errors"]
        print(side_by_side(before, after, ["workers", "learners"], numbers, texts=["isolation"], digits=2))
        for workers in counts:
            if args.largest:
                b, a = before["largest"].get(str(workers)), after["largest"].get(str(workers))
                print(f"largest class with rerun p95 < {RERUN_P95_TARGET_S:g} s on {workers} worker(s): {b} -> {a}")
        print(f"seconds; before: {args.before}; after: this tree; {after['notes']}")
        return
    args.root = use_root(args.root)
    out = sys.stderr if args.json else sys.stdout  # with --json the table is progress, the JSON line the result
    notes = (
        f"class through HAProxy on {os.cpu_count()} cores; {args.trainers} training, {args.moves} moves each about "
        f"{args.think:g} s apart; clients on the same machine"
    )
    print(notes[0].upper() + notes[1:] + ".", file=out)
    rows, largest = [], {}
    for workers in counts:
        for sessions in sizes:
            r, elapsed = one_class(workers, sessions, args)
            rows.append(row(workers, sessions, r, elapsed))
            print(line(workers, sessions, r, elapsed), file=out, flush=True)
            print("   " + summary("rerun", r.rerun), file=out)
            for e in r.errors[:5]:
                print("   error: " + e, file=out)
    if args.largest:
        tries = [int(s) for s in args.largest.split(",")]
        for workers in counts:
            best = None
            for sessions in tries:
                r, elapsed = one_class(workers, sessions, args)
                print("   " + line(workers, sessions, r, elapsed), file=out, flush=True)
                if r.errors or not r.rerun or pct(r.rerun, 95) >= RERUN_P95_TARGET_S:
                    break
                best = sessions
            largest[str(workers)] = best if best is not None else f"fewer than {tries[0]}"
            print(f"largest class with rerun p95 < {RERUN_P95_TARGET_S:g} s on {workers} worker(s): "
                  f"{largest[str(workers)]}", file=out, flush=True)  # fmt: skip
    if args.json:
        print(json.dumps({"bench": "class", "root": str(args.root), "rows": rows, "largest": largest, "notes": notes}))


if __name__ == "__main__":
    main()
