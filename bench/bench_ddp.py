"""Training throughput of one process against two DistributedDataParallel ranks (torchrun, gloo) on this machine.

    .venv/bin/python bench/bench_ddp.py [--steps 150] [--preset baby] [--batch-size 12] [--corpus stdlib]

The same short run three ways, each through the real command line (`python -m core train`), with the same
preset, step count, global batch and schedule:
  1 rank, 1 thread      python -m core train --threads 1
  1 rank, 2 threads     python -m core train --threads 2 (the whole of a 2-core machine to one process)
  2 ranks, 1 thread     torchrun --standalone --nproc_per_node=2 -m core train --threads 1 (each rank computes
                        half of every batch; DDP all-reduces the gradients)
Reported: tokens/s as the run itself reports it (every rank's training tokens per second of optimizer-step
time, evaluation excluded: core.model.training), the wall seconds of the whole command (start-up, the two
evaluations and the bundle included), the final validation loss (the same global batch and schedule, so it
should agree to within the noise of other windows), and the ratios of 2 ranks to each single process.

Benchmarks print figures; no test passes or fails on them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.model.distributed import TORCHRUN_ENV

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 300  # seconds per run: a hang ends the benchmark instead of stalling the machine


def run(launcher: list[str], train_args: list[str], threads: int, out: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ENV}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(threads))
    cmd = [sys.executable, *launcher, "-m", "core", "train", *train_args, "--threads", str(threads), "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**line, "wall": wall, "command": " ".join(["python", *cmd[1:]])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--preset", default="baby")
    parser.add_argument("--batch-size", type=int, default=12, help="the global batch (even: it splits over 2 ranks)")
    parser.add_argument("--corpus", default="stdlib")
    args = parser.parse_args()
    train_args = ["--corpus", args.corpus, "--preset", args.preset, "--max-iters", str(args.steps)]
    train_args += ["--batch-size", str(args.batch_size), "--eval-interval", str(args.steps), "--eval-iters", "2"]
    train_args += ["--no-tune", "--seed", "0"]
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-ddp-") as tmp:
        for name, launcher, threads in [
            ("1 rank, 1 thread", [], 1),
            ("1 rank, 2 threads", [], 2),
            ("2 ranks, 1 thread each", torchrun, 1),
        ]:
            rows.append((name, run(launcher, train_args, threads, Path(tmp) / f"b{len(rows)}")))
    setup = f"preset {args.preset}, {args.steps} steps, global batch {args.batch_size}, corpus {args.corpus}"
    print(f"{setup}, cpus {os.cpu_count()}")
    print(f"{'run':<24} {'tokens/s':>10} {'wall s':>8} {'val loss':>9}")
    for name, r in rows:
        print(f"{name:<24} {r['tokens_per_second']:>10,.0f} {r['wall']:>8.1f} {r['val_loss']:>9.4f}")
    one, both, ranks = (r["tokens_per_second"] for _, r in rows)
    print(f"tokens/s, 2 ranks / 1 rank with 1 thread:  {ranks:,.0f} / {one:,.0f} = {ranks / one:.2f}x")
    print(f"tokens/s, 2 ranks / 1 rank with 2 threads: {ranks:,.0f} / {both:,.0f} = {ranks / both:.2f}x")
    print("commands:")
    for name, r in rows:
        print(f"  {name}: {r['command']}")


if __name__ == "__main__":
    main()
