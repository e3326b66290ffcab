"""What a Monitoring page rerun costs on a full telemetry database, with nothing new recorded and after one new
event (which is what every rerun cost before the page cached its figures on the store's stamp), in one run.

    python bench/bench_monitoring.py [--events 200000] [--repeats 5]

Fills a temporary database with `--events` seeded suggestion events of two versions spread over a day (rows
written straight with sqlite3, as many a class records), then times, interleaved so drift of the machine hits
both sides alike: the Monitoring page's rerun in AppTest (a) when nothing changed and (b) right after one new
event was recorded; and the parts of (b): TelemetryStore.stamp, monitor.load and monitor.figures. Prints medians.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from core.telemetry.schema import COLUMNS, Event  # noqa: E402
from core.telemetry.store import ENV, MAX_READ, TelemetryStore  # noqa: E402

VERSIONS = ("0123456789abcdef", "fedcba9876543210")
EVENT = dict(
    surface="page", kind="suggestion", version=VERSIONS[0], text="x = ", prompt_chars=4, unseen_chars=0,
    truncated=False, latency_ms=15.0, predictor="transformer", top1_prob=0.8, entropy_nats=0.6, shown=True,
    suggestion_chars=3,
)  # fmt: skip


def fill(store: TelemetryStore, events: int, seed: int = 0) -> None:
    """`events` rows like the ones serving records, written in one transaction."""
    store.record(Event(**EVENT))  # creates the schema
    rng = random.Random(seed)
    start = dt.datetime(2026, 12, 1, 8, tzinfo=dt.UTC)
    rows = []
    for i in range(events - 1):
        at = (start + dt.timedelta(seconds=86_400 * i / events)).isoformat()
        shown = rng.random() < 0.6
        rows.append(
            {
                "at": at, "surface": "page", "kind": "suggestion", "version": VERSIONS[i % 2],
                "predictor": "transformer", "policy_version": 1, "session": f"s{rng.randrange(30)}",
                "prompt_chars": rng.randrange(1, 400), "unseen_chars": 0, "truncated": 0, "prompt_hash": f"{i:016x}",
                "top1_prob": rng.random(), "entropy_nats": 2 * rng.random(), "suggestion_chars": rng.randrange(24),
                "shown": int(shown), "latency_ms": rng.expovariate(1 / 16), "error": None,
                "outcome": rng.choice(("accepted", "typed_other", None)) if shown else None,
                "char_class": rng.choice(("letter", "digit", "whitespace", "punctuation")),
                "column_bucket": rng.choice(("0-3", "4-7", "8-15", "16+")), "indent": rng.choice(("0", "1", "2")),
                "document": None,
            }
        )  # fmt: skip
    names = [c for c in COLUMNS if c not in ("id", "text")]
    with sqlite3.connect(store.path) as conn:
        conn.executemany(
            f"INSERT INTO events ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            [tuple(r[n] for n in names) for r in rows],
        )


def ms(seconds: list[float]) -> str:
    return f"{1000 * statistics.median(seconds):,.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=MAX_READ, help=f"events in the database (1..{MAX_READ})")
    parser.add_argument("--repeats", type=int, default=5, help="reruns per side (1..50)")
    args = parser.parse_args()
    if not 1 <= args.events <= MAX_READ or not 1 <= args.repeats <= 50:
        parser.error(f"--events must lie in 1..{MAX_READ} and --repeats in 1..50")
    path = Path(tempfile.mkdtemp(prefix="bench-monitoring-")) / "telemetry.db"
    os.environ[ENV] = str(path)
    os.environ.setdefault("LAB_WARMUP", "0")
    store = TelemetryStore(path)
    fill(store, args.events)
    print(f"{store.count():,} events in {path} ({path.stat().st_size / 2**20:.0f} MiB)")

    from apptest import open_page

    from core.telemetry import monitor

    at = open_page("monitoring", timeout=600)
    unchanged, changed, stamp, load, figures = [], [], [], [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        at.run()
        unchanged.append(time.perf_counter() - t)
        store.record(Event(**EVENT))
        t = time.perf_counter()
        at.run()
        changed.append(time.perf_counter() - t)
        t = time.perf_counter()
        store.stamp()
        t1 = time.perf_counter()
        rows = monitor.load(store)
        t2 = time.perf_counter()
        monitor.figures(rows)
        t3 = time.perf_counter()
        stamp.append(t1 - t)
        load.append(t2 - t1)
        figures.append(t3 - t2)
    assert not at.exception, [e.value for e in at.exception]
    print(f"Monitoring rerun, nothing new recorded (cached figures):   {ms(unchanged)}")
    print(f"Monitoring rerun after one new event (every rerun before): {ms(changed)}")
    print(f"  of which: stamp {ms(stamp)}, load {ms(load)}, figures {ms(figures)}")
    print(f"ratio: {statistics.median(changed) / statistics.median(unchanged):.1f}x  (medians of {args.repeats})")


if __name__ == "__main__":
    main()
