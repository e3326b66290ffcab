"""What recording a suggestion costs: N suggestions served with and without the telemetry store, in one run.

    python bench/bench_telemetry.py [--n 200] [--bundle DIR]

Serves the same N prompts (prefixes of a Python text) through core.release.serving.autocomplete.suggest, without
recording and then recorded (core.telemetry.record.record_suggestion) in a fresh TelemetryStore in a temporary
folder, interleaved in rounds so drift of the machine hits both sides alike, and prints both totals and the overhead
per suggestion; then the store's own write alone (TelemetryStore.record), a write that opens and closes its own
connection (the pattern the store moved away from), and the extra forward pass served_completion makes for a
completion's distribution. Default bundle: the shipped one (models/default), else a tiny model trained for a few
steps.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from core.model.bundle import load_bundle  # noqa: E402
from core.model.engine import next_token_logits  # noqa: E402
from core.model.prompt import start_ids  # noqa: E402
from core.release.serving.autocomplete import prompt_for, suggest  # noqa: E402
from core.release.serving.policy import policy_from_manifest  # noqa: E402
from core.release.serving.transformer_predictor import TransformerPredictor  # noqa: E402
from core.telemetry.record import record_suggestion  # noqa: E402
from core.telemetry.schema import Event  # noqa: E402
from core.telemetry.store import TelemetryStore  # noqa: E402

TEXT = '''def add(a, b):
    """Return the sum of a and b."""
    return a + b


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="suggestions per side (1..5000)")
    parser.add_argument("--bundle", default=None)
    args = parser.parse_args()
    if not 1 <= args.n <= 5000:
        parser.error("--n must lie in 1..5000")
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-telemetry-"))
    path = Path(args.bundle) if args.bundle else ROOT / "models" / "default"
    if not path.is_dir():
        from bundles import train_tiny_bundle

        path = train_tiny_bundle(tmp / "bundle")
    bundle = load_bundle(path)
    predictor = TransformerPredictor(bundle.model, bundle.tokenizer)
    policy = policy_from_manifest(bundle.manifest)
    template = bundle.manifest["prompt_template"]
    prompts = [TEXT[: 1 + (i * 7) % len(TEXT)] for i in range(args.n)]
    store = TelemetryStore(tmp / "telemetry.db")
    seconds = {"without": 0.0, "with": 0.0}
    for i, prompt in enumerate(prompts):  # interleaved: one of each per prompt, the order alternating
        for side in ("without", "with") if i % 2 == 0 else ("with", "without"):
            began = time.perf_counter()
            measured = suggest(predictor, prompt_for(predictor, prompt, policy, template=template), policy)
            if side == "with":
                record_suggestion(store, measured, version=bundle.version, surface="cli")
            seconds[side] += time.perf_counter() - began
    assert store.count() == args.n and store.health().ok, store.health()
    n = args.n
    print(f"bundle {bundle.version} ({path}), {n} suggestions per side, 1 torch thread")
    print(f"without recording: {seconds['without']:.3f} s = {1000 * seconds['without'] / n:.3f} ms per suggestion")
    print(f"with recording:    {seconds['with']:.3f} s = {1000 * seconds['with'] / n:.3f} ms per suggestion")
    print(f"overhead: {1000 * (seconds['with'] - seconds['without']) / n:+.3f} ms per suggestion "
          f"({100 * (seconds['with'] / seconds['without'] - 1):+.1f}%)")  # fmt: skip

    event = Event("cli", "suggestion", bundle.version, "def add(", 8, 0, False, 1.0, top1_prob=0.5, shown=True)
    pooled = [_timed(lambda: store.record(event)) for _ in range(n)]
    fresh_db = tmp / "fresh.db"
    setup = TelemetryStore(fresh_db)
    setup.record(event)
    setup.close()  # no connection left open: each write below is the file's only one, as a store without reuse

    def fresh_write() -> None:
        with sqlite3.connect(fresh_db, isolation_level=None) as conn:
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO events (at, surface, kind, version, prompt_chars, unseen_chars, truncated, "
                "prompt_hash, latency_ms) VALUES ('t', 'cli', 'suggestion', 'v', 1, 0, 0, 'h', 1.0)"
            )
            conn.execute("COMMIT")
        conn.close()

    fresh = [_timed(fresh_write) for _ in range(n)]
    print(f"store.record alone (a reused connection): median {statistics.median(pooled):.3f} ms, "
          f"p95 {sorted(pooled)[int(0.95 * n) - 1 if n > 1 else 0]:.3f} ms")  # fmt: skip
    print(f"one write on its own new connection:      median {statistics.median(fresh):.3f} ms, "
          f"p95 {sorted(fresh)[int(0.95 * n) - 1 if n > 1 else 0]:.3f} ms")  # fmt: skip
    ids = start_ids(bundle.tokenizer.encode(template.replace("{prompt}", TEXT)))
    extra = [_timed(lambda: next_token_logits(bundle.model, ids)) for _ in range(min(n, 50))]
    print(f"served_completion's extra forward pass (its distribution): median {statistics.median(extra):.3f} ms")


def _timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return 1000 * (time.perf_counter() - began)


if __name__ == "__main__":
    main()
