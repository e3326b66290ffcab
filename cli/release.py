"""The release commands of `python -m core`: evaluate, baseline, release {check, promote, rollback, status}.

The release wing does the work; this module only parses arguments and prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import torch

from cli.progress import progress_bars
from core import settings
from core.model.bundle import load_bundle
from core.model.bundle_checks import BundleError
from core.release.baselines.baseline_bundle import load_baseline, save_baseline, train_baseline
from core.release.baselines.ngram import DEFAULT_ORDER
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.evaluation import evaluate_bundle
from core.release.evaluation.held_out import held_out
from core.release.evaluation.utility import DEFAULT_ATTENTION_COST, check_attention_cost
from core.release.gate.gate import check_release
from core.release.gate.rubric import EXIT_FAILED, RUBRIC, Rubric, write_release_record
from core.release.registry.registry import promote, rollback
from core.release.registry.registry_status import status

REGISTRY_HELP = "registry directory (default: LAB_REGISTRY_DIR, else the repository's registry/, as the app's)"


def format_table(rows: list[dict], columns: list[str] | None = None) -> str:
    """A plain-text table of `rows` (dicts); floats with 4 significant decimals, None as n/a."""
    columns = columns or (list(rows[0]) if rows else [])

    def cell(v: object) -> str:
        if v is None:
            return "n/a"
        if isinstance(v, float):
            return f"{v:.4f}" if abs(v) < 1000 else f"{v:.0f}"
        return str(v)

    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def register_commands(subparsers: argparse._SubParsersAction) -> None:
    """`evaluate`, `baseline` and `release {check,promote,rollback,status}`."""
    p = subparsers.add_parser("evaluate", help="held-out metrics of a bundle (any kind)")
    p.add_argument("--bundle", required=True, help="bundle directory (transformer, ngram or rule)")
    p.add_argument("--corpus", default=None, help="'stdlib', 'pydoc' or a text file (default: the bundle's own corpus)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--compare", action="store_true", help="also train the rule and the n-gram on the same split")
    p.add_argument("--max-positions", type=int, default=EvalConfig.max_positions)
    p.add_argument("--typing-chars", type=int, default=EvalConfig.typing_chars)
    p.add_argument("--latency-samples", type=int, default=EvalConfig.latency_samples)
    p.add_argument("--seed", type=int, default=0, help="seed of the position and segment samples")
    add_attention_cost(p, "measure the net figure at this price (default: the price the bundle records)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: a shared machine)")
    p.set_defaults(handler=_run_evaluate)

    p = subparsers.add_parser("baseline", help="train a rule or n-gram baseline bundle on a bundle's split")
    p.add_argument("--kind", choices=("ngram", "rule"), required=True)
    p.add_argument("--out", required=True, help="baseline bundle directory to write")
    p.add_argument("--like", default=None, help="take corpus, split and tokenizer from this bundle")
    p.add_argument("--corpus", default=None, help="'stdlib', 'pydoc' or a text file (default: the --like bundle's)")
    p.add_argument("--val-fraction", type=float, default=0.1, help="without --like (default 0.1)")
    p.add_argument("--seed", type=int, default=0, help="without --like (default 0)")
    p.add_argument("--order", type=int, default=DEFAULT_ORDER, help="n-gram order (default 5)")
    p.set_defaults(handler=_run_baseline)

    release = subparsers.add_parser("release", help="the release gate and the model registry")
    sub = release.add_subparsers(dest="release_command", required=True, metavar="ACTION", parser_class=type(release))
    p = sub.add_parser("check", help="run the rubric; exit 1 if any check fails")
    p.add_argument("bundle", help="bundle directory")
    p.add_argument("--corpus", default=None)
    p.add_argument(
        "--out", default=None, help="directory for rubric.json (default: <bundle>.release/ beside the bundle)"
    )
    p.add_argument("--save-fallback", action="store_true", help="also write the n-gram fallback bundle there")
    p.add_argument("--json", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(handler=_run_check)
    p = sub.add_parser("promote", help="check a bundle and, if it passes, make it the current version")
    p.add_argument("bundle")
    p.add_argument("--registry", default=settings.registry_dir(), help=REGISTRY_HELP)
    p.add_argument("--corpus", default=None)
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(handler=_run_promote)
    p = sub.add_parser("rollback", help="switch current back to the version before it")
    p.add_argument("--registry", default=settings.registry_dir(), help=REGISTRY_HELP)
    p.add_argument("--to", default=None, help="a promoted version to switch to (default: the previous one)")
    p.add_argument("--reason", default="manual rollback")
    p.set_defaults(handler=_run_rollback)
    p = sub.add_parser("status", help="current version, history, what would be served and why")
    p.add_argument("--registry", default=settings.registry_dir(), help=REGISTRY_HELP)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_run_status)


def add_attention_cost(p: argparse.ArgumentParser, what: str) -> None:
    """--attention-cost C: keystrokes a suggestion shown and not taken costs (the decision utility's price)."""
    p.add_argument(
        "--attention-cost",
        type=float,
        default=None,
        metavar="C",
        help=f"keystrokes a suggestion shown and not taken costs the typist; {what}; "
        f"the lab's default price is {DEFAULT_ATTENTION_COST:g}",
    )


def attention_cost_arg(value: float | None) -> float | None:
    return None if value is None else check_attention_cost(value)  # ValueError: one `error:` line, exit 2


def _threads(n: int | None) -> None:
    if n is not None:
        if not 1 <= n <= settings.MAX_TORCH_THREADS:  # torch crashes (exit 139) on 100,000
            raise ValueError(f"--threads must be an integer from 1 to {settings.MAX_TORCH_THREADS}, got {n}")
        torch.set_num_threads(n)


def _run_evaluate(args: argparse.Namespace) -> int:
    _threads(args.threads)
    config = EvalConfig(
        max_positions=args.max_positions,
        typing_chars=args.typing_chars,
        latency_samples=args.latency_samples,
        seed=args.seed,
    )
    with progress_bars(args.json) as progress:
        result = evaluate_bundle(
            args.bundle,
            corpus=args.corpus,
            config=config,
            with_baselines=args.compare,
            attention_cost=attention_cost_arg(args.attention_cost),
            progress=progress,
        )
    for warning in result.report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:  # one object: a key per predictor (the headline figures), and the whole report
        print(json.dumps({**result.summaries(), "report": result.to_dict()}, allow_nan=False))
        return 0
    r = result.report
    o = r.overall
    print(
        f"{r.predictor} {r.version}: {len(r.held_out['documents'])} held-out documents, "
        f"{o.positions} positions scored, {o.typed_chars} characters typed ({r.seconds:.1f} s)"
    )
    rows = [
        {"metric": k, "value": v, "95% interval": _interval(ci)}
        for k, v, ci in (
            ("loss (nats/char)", o.loss, o.loss_ci),
            ("bits per character", o.bits_per_char, None),
            ("top-1 accuracy", o.top1, o.top1_ci),
            ("top-3 accuracy", o.top3, o.top3_ci),
            ("net keystrokes saved per 100 chars", o.net_keystrokes_saved_per_100, o.net_keystrokes_saved_ci),
            ("gross keystrokes saved per 100 chars", o.keystrokes_saved_per_100, o.keystrokes_saved_ci),
            ("acceptance rate of shown suggestions", o.acceptance_rate, o.acceptance_ci),
            ("suggestions shown per 100 chars", o.shown_per_100, None),
            ("suggestion threshold", r.policy["threshold"], None),
            ("attention cost (keystrokes per suggestion not taken)", r.policy["attention_cost"], None),
        )
    ]
    print(format_table(rows))
    print()
    print(
        format_table(
            r.slice_table(),
            [
                "slice",
                "positions",
                "loss",
                "top1",
                "top1_ci_low",
                "top1_ci_high",
                "shown_per_100",
                "offered",
                "acceptance_rate",
                "net_keystrokes_saved_per_100",
                "keystrokes_saved_per_100",
            ],
        )
    )
    for w in r.worst:
        ci = f" [{w.ci.low:.4f}, {w.ci.high:.4f}]" if w.ci else ""
        print(f"worst slice by {w.metric}: {w.slice} = {w.value:.4f}{ci} over {w.positions} positions")
    if r.latency is not None:
        lat = r.latency
        print(f"latency per suggestion: p50 {lat.p50_ms:.2f} ms, p95 {lat.p95_ms:.2f} ms ({lat.samples} samples)")
    if result.comparison:
        print()
        kinds = [b.predictor for b in result.baselines] + [r.predictor]
        rows = [
            {**row, **{f"{k} 95%": _interval(row.get(f"{k}_ci")) for k in kinds if f"{k}_ci" in row}}
            for row in result.comparison
        ]
        columns = ["metric"] + [c for k in kinds for c in (k, f"{k} 95%")] + ["better"]
        print(format_table(rows, columns))
    return 0


def _interval(ci) -> str | None:
    """'[low, high]' of an Interval or a [low, high] list; None (n/a) without one."""
    if ci is None:
        return None
    low, high = (ci.low, ci.high) if hasattr(ci, "low") else ci
    return f"[{low:.4f}, {high:.4f}]"


def _run_baseline(args: argparse.Namespace) -> int:
    from core.model.corpus import load_corpus

    if args.like:
        bundle = load_bundle(args.like)
        split = held_out(bundle.manifest, args.corpus)
        corpus, fraction, seed, tokenizer = split.corpus, split.val_fraction, split.seed, bundle.tokenizer
    else:
        if args.corpus is None:
            raise ValueError("pass --like BUNDLE or --corpus")
        corpus, fraction, seed, tokenizer = load_corpus(args.corpus), args.val_fraction, args.seed, None
    predictor = train_baseline(
        args.kind, corpus, val_fraction=fraction, seed=seed, tokenizer=tokenizer, order=args.order
    )
    path = save_baseline(
        args.out, predictor, corpus=corpus, val_fraction=fraction, seed=seed, command=args.command_line
    )
    print(json.dumps({"bundle": str(path), "kind": args.kind, "version": load_baseline(path).version}))
    return 0


def _print_rubric(rubric: Rubric) -> None:
    print(f"release check of {rubric.bundle} (version {rubric.version}): {'PASS' if rubric.passed else 'FAIL'}")
    print(format_table(rubric.table(), ["check", "result", "figure", "threshold"]))
    for c in rubric.checks:  # the table has no room for why a check failed: one line each
        if not c.passed and c.detail:
            print(f"{c.name} FAIL: {' '.join(c.detail.split())}")


def _run_check(args: argparse.Namespace) -> int:
    _threads(args.threads)
    with progress_bars(args.json) as progress:
        check = check_release(args.bundle, corpus=args.corpus, progress=progress)
    try:
        where = write_release_record(check, args.out, save_fallback=args.save_fallback)
    except (OSError, BundleError) as e:
        where = None
        print(f"warning: could not write the rubric ({e})", file=sys.stderr)
    if args.json:
        print(json.dumps({**check.rubric.to_dict(), "written_to": str(where) if where else None}, allow_nan=False))
    else:
        _print_rubric(check.rubric)
        if where is not None:
            print(f"rubric written to {where / RUBRIC}")
    return 0 if check.rubric.passed else EXIT_FAILED


def _run_promote(args: argparse.Namespace) -> int:
    _threads(args.threads)
    result = promote(args.bundle, args.registry, corpus=args.corpus)
    _print_cleaned(result.cleaned)
    if result.rubric is not None:
        _print_rubric(result.rubric)
    print(("promoted: " if result.promoted else "refused: ") + result.reason)
    return 0 if result.promoted else EXIT_FAILED


def _run_rollback(args: argparse.Namespace) -> int:
    result = rollback(args.registry, to=args.to, reason=args.reason)
    _print_cleaned(result.cleaned)
    print(("rolled back: " if result.switched else "refused: ") + result.reason)
    return 0 if result.switched else EXIT_FAILED


def _run_status(args: argparse.Namespace) -> int:
    st = status(args.registry)
    if args.json:
        print(json.dumps(st.to_dict(), allow_nan=False))
        return 0
    print(f"registry {st.registry}: current {st.current or 'none'}; history {list(st.history) or 'empty'}")
    if st.versions:
        print(
            format_table([dataclasses.asdict(v) for v in st.versions], ["version", "promoted", "verifies", "problem"])
        )
    print(f"served: {st.served.kind or 'nothing'} {st.served.version or ''} -- {st.served.reason}")
    for leftover in st.leftovers:
        print(
            f"leftover of an interrupted promotion: {leftover.path} ({leftover.bytes:,} bytes); the next promote "
            f"or rollback removes it"
        )
    for entry in st.log:
        print(json.dumps(entry))
    return 0


def _print_cleaned(cleaned: tuple[str, ...]) -> None:
    for path in cleaned:
        print(f"removed the leftover of an interrupted promotion: {path}")
