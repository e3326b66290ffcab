"""`python -m core suggest` and `python -m core tune`: the one suggestion policy from the command line.

`suggest` serves as an editor would: nothing when nothing reaches the threshold; `--best-guess` prints the model's best
guess then too, as the Autocomplete page shows it.

`tune` chooses the threshold with the most net keystrokes saved at the given price of attention (among those whose
suggestions are taken at least MIN_ACCEPTANCE of the time, if any) and records both in the bundle. Every suggestion
is recorded in the telemetry database (surface 'cli'); when that fails, stderr says so and the suggestion is printed
as ever.
"""

from __future__ import annotations

import argparse
import json
import sys

from cli.progress import progress_bars
from cli.release import _threads, add_attention_cost, attention_cost_arg, format_table
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.tuning import MIN_ACCEPTANCE, tune_bundle
from core.release.serving.autocomplete import prompt_for, suggest
from core.release.serving.policy import policy_from_manifest
from core.release.serving.transformer_predictor import load_predictor
from core.telemetry.record import record_suggestion
from core.telemetry.store import TelemetryStore


def register_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("suggest", help="the suggestion a bundle offers after a prompt")
    p.add_argument("--bundle", required=True, help="bundle directory (transformer, ngram or rule)")
    p.add_argument("--prompt", required=True, help="the text before the cursor")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--best-guess",
        action="store_true",
        help="when nothing is offered, the model's best guess anyway (as the Autocomplete page shows it; a few "
        "more model steps)",
    )
    p.set_defaults(handler=_run_suggest)

    p = subparsers.add_parser("tune", help="choose a bundle's suggestion threshold on its validation documents")
    p.add_argument("--bundle", required=True, help="bundle directory to tune (its manifest is rewritten)")
    p.add_argument("--corpus", default=None, help="'stdlib', 'pydoc' or a text file (default: the bundle's own corpus)")
    p.add_argument("--typing-chars", type=int, default=EvalConfig.typing_chars)
    add_attention_cost(p, "tune at this price and record it (default: the price the bundle records)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: a shared machine)")
    p.set_defaults(handler=_run_tune)


def _run_suggest(args: argparse.Namespace) -> int:
    predictor, manifest = load_predictor(args.bundle)
    policy = policy_from_manifest(manifest)
    prompt = prompt_for(predictor, args.prompt, policy, template=manifest.get("prompt_template", "{prompt}"))
    measured = suggest(predictor, prompt, policy, best_guess=args.best_guess)
    store = TelemetryStore()
    event_id = record_suggestion(store, measured, version=manifest["version"], surface="cli")
    s = measured.suggestion_or_raise()  # an error in serving: recorded above, raised here
    if event_id is None:
        print(f"note: telemetry is not being recorded: {store.health().last_error}", file=sys.stderr)
    record = {**s.to_dict(), "predictor": predictor.kind, "version": manifest["version"]}
    if args.json:
        print(json.dumps(record, allow_nan=False))
        return 0
    if not s.tuned:
        print(
            f"note: this bundle's threshold was never tuned (default {s.threshold}); run `python -m core tune`",
            file=sys.stderr,
        )
    if not s.text and not args.best_guess:
        print("note: nothing reaches the threshold; --best-guess prints the model's best guess anyway", file=sys.stderr)
    verdict = "shown" if s.shown else "not shown"
    shown_text = json.dumps(s.text)  # quoted, with escapes: a newline or a space at the end stays visible
    print(f"suggestion: {shown_text}")
    print(f"probability: {s.probability:.4f} (threshold {s.threshold:.2f}): {verdict}")
    return 0


def _run_tune(args: argparse.Namespace) -> int:
    _threads(args.threads)
    cost = attention_cost_arg(args.attention_cost)
    with progress_bars() as progress:
        policy, rows, manifest = tune_bundle(
            args.bundle,
            corpus=args.corpus,
            config=EvalConfig(typing_chars=args.typing_chars),
            attention_cost=cost,
            progress=progress,
        )
    print(tradeoff_table(rows))
    print(
        f"threshold {policy.threshold} (the most net keystrokes saved at an attention cost of "
        f"{policy.attention_cost:g} keystrokes per suggestion shown and not taken, among the thresholds whose "
        f"suggestions are taken at least {MIN_ACCEPTANCE:.0%} of the time if any) recorded in {args.bundle} "
        f"(version {manifest['version']})"
    )
    return 0


def tradeoff_table(rows: list[dict]) -> str:
    """The trade-off against the threshold: net and gross keystrokes saved and suggestions shown per 100
    characters, the acceptance rate; the chosen row marked with '<-'."""
    columns = ["threshold", "net_keystrokes_saved_per_100", "keystrokes_saved_per_100", "acceptance_rate"]
    return format_table(
        [{**r, "chosen": "<-" if r["chosen"] else ""} for r in rows], columns + ["shown_per_100", "chosen"]
    )
