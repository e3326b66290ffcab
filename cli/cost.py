"""`python -m core cost`: what a bundle costs to keep, train and serve, and the largest class one machine serves
within a latency target.

The registry, telemetry database and training slots default to the app's settings, and suggestions are timed on
one torch thread by default, as the app serves them, so the figures are the app's.
"""

from __future__ import annotations

import argparse
import json

import torch

from cli.arguments import real_number, whole_number
from cli.progress import progress_bars
from cli.release import REGISTRY_HELP, format_table
from core import settings
from core.telemetry.class_queue import MAX_LEARNERS
from core.telemetry.cost import (
    DEFAULT_LATENCY_TARGET_MS,
    DEFAULT_LEARNERS,
    DEFAULT_SAMPLES,
    MAX_LATENCY_TARGET_MS,
    MAX_RATE,
    MAX_SAMPLES,
    MAX_SEED,
    MAX_TRAINING_SLOTS,
    MIN_SAMPLES,
    cost_report,
)
from core.telemetry.store import telemetry_location

MAX_THREADS = 64


def register_commands(subparsers: argparse._SubParsersAction) -> None:
    # Every number is bounded by the parser (its error names the flag), with core.telemetry.cost's own limits,
    # which cost_report checks again for its other callers. A training slot is at least one, as
    # LAB_MAX_TRAINING_RUNS is: with none, training never runs, and the report said nobody waited for it.
    p = subparsers.add_parser("cost", help="storage, compute and queueing cost of a bundle")
    p.add_argument("--bundle", required=True, help="transformer bundle directory")
    p.add_argument("--corpus", default=None, help="'stdlib', 'pydoc' or a text file (default: the bundle's own)")
    p.add_argument("--registry", default=None, help=REGISTRY_HELP)
    p.add_argument(
        "--learners",
        type=whole_number(1, MAX_LEARNERS),
        default=DEFAULT_LEARNERS,
        help=f"class size, 1 to {MAX_LEARNERS} (default {DEFAULT_LEARNERS})",
    )
    p.add_argument(
        "--rate",
        type=real_number(0.0, MAX_RATE),
        default=None,
        help="suggestions per learner per second (default: measured from the telemetry database, else 1)",
    )
    p.add_argument(
        "--latency-target-ms",
        type=real_number(0.0, MAX_LATENCY_TARGET_MS),
        default=DEFAULT_LATENCY_TARGET_MS,
        help=f"p95 time to a suggestion the class must get (default {DEFAULT_LATENCY_TARGET_MS:g})",
    )
    p.add_argument(
        "--samples",
        type=whole_number(MIN_SAMPLES, MAX_SAMPLES),
        default=DEFAULT_SAMPLES,
        help=f"suggestions timed, {MIN_SAMPLES} to {MAX_SAMPLES} (default {DEFAULT_SAMPLES})",
    )
    p.add_argument(
        "--seed",
        type=whole_number(0, MAX_SEED),
        default=0,
        help="seed of the timed prompts and the queue simulation",
    )
    p.add_argument(
        "--threads",
        type=whole_number(1, MAX_THREADS),
        default=1,
        help=f"torch threads while timing, 1 to {MAX_THREADS} (default 1, as the app)",
    )
    p.add_argument(
        "--training-slots",
        type=whole_number(1, MAX_TRAINING_SLOTS),
        default=None,
        help=f"training runs at once, 1 to {MAX_TRAINING_SLOTS} (default: LAB_MAX_TRAINING_RUNS, else 1)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=_run_cost)


def _training_slots(given: int | None) -> int:
    if given is not None:
        return given  # bounded by the parser
    return settings.max_training_runs()  # the server's own setting; a SettingError is a ValueError


def _run_cost(args: argparse.Namespace) -> int:
    torch.set_num_threads(args.threads)  # bounded by the parser
    with progress_bars(args.json) as progress:
        report = cost_report(
            args.bundle,
            registry=args.registry or settings.registry_dir(),
            telemetry=telemetry_location(),
            corpus=args.corpus,
            learners=args.learners,
            rate=args.rate,
            latency_target_ms=args.latency_target_ms,
            samples=args.samples,
            seed=args.seed,
            training_slots=_training_slots(args.training_slots),
            progress=progress,
        )
    if args.json:
        print(json.dumps(report.to_dict(), allow_nan=False))
        return 0
    print(f"cost of {report.bundle} (version {report.version})")
    print(format_table(report.table(), ["figure", "value", "unit"]))
    for note in report.notes:
        print(f"note: {note}")
    return 0
