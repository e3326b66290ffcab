"""The command line: `python -m core <command>` (`--help` lists the commands and their options).

Train (single process, or under torchrun with DistributedDataParallel, where rank 0 alone prints and writes) and
generate live here; the other commands have their own modules. Ctrl-C during training still writes the bundle
from the weights so far. Bad arguments, a missing or tampered bundle and an unusable corpus print one line
`error: ...` on stderr and exit with status 2, without a traceback.

Adding a command: write `register_<name>(subparsers)`, which adds a subparser and sets its handler (a function of
the parsed args returning an exit status) with `parser.set_defaults(handler=...)`, and append it to COMMANDS.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from cli.arguments import UsageError, whole_number
from cli.version import lab_version
from core.settings import MAX_TORCH_THREADS

EXIT_USAGE = 2
DEFAULT_PRESET = "default"  # train's model size without --preset or --init-from
PROGRESS_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal
TTY_REFRESH = 0.1  # seconds between rewrites of the progress line on a terminal


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one `error:` line (no usage block) and exits 2."""

    def error(self, message: str):  # noqa: D401 - argparse's API
        raise UsageError(f"{self.prog}: {message}")


# ---- train ---------------------------------------------------------------------------------------


def register_train(subparsers) -> None:
    from core.model.gpt import PRESETS
    from core.model.train_config import MAX_EVAL_ITERS

    p = subparsers.add_parser("train", help="train a model on a corpus and write a bundle")
    p.add_argument(
        "--corpus",
        required=True,
        help="'stdlib' (the pinned Python standard library), 'pydoc' (Python's reference prose) or a UTF-8 text file",
    )
    p.add_argument("--out", required=True, help="bundle directory to write: new or empty (checked before training)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing bundle at --out")
    p.add_argument(
        "--preset",
        default=None,
        choices=sorted(PRESETS),
        help=f"model size (default: {DEFAULT_PRESET}; not with --init-from, which trains the base's architecture)",
    )
    p.add_argument(
        "--init-from",
        default=None,
        metavar="BUNDLE|VERSION",
        help="continue from a trained model: a bundle folder (models/default, models/prose) or a version of the "
        "release registry (LAB_REGISTRY_DIR); its weights and architecture, its vocabulary grown by the corpus's "
        "new characters",
    )
    p.add_argument(
        "--context-length",
        type=int,
        default=None,
        metavar="N",
        help="with --init-from: continue at a context of N characters instead of the base's (RoPE has no position "
        "weights, so every weight carries over; distances past the base's context are learned in this run)",
    )
    p.add_argument("--max-iters", type=int, default=2000, help="optimizer steps (default 2000)")
    p.add_argument("--max-seconds", type=float, default=None, help="wall-clock budget for the training loop")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=12)
    p.add_argument("--learning-rate", type=float, default=2e-3)
    p.add_argument(
        "--eval-interval",
        type=int,
        default=None,
        help="steps between evaluations (default: max_iters / 10, at most 250)",
    )
    p.add_argument(
        "--eval-iters",
        type=whole_number(1, MAX_EVAL_ITERS),
        default=20,
        help=f"batches per evaluation, at most {MAX_EVAL_ITERS} (under --max-seconds, as many as fit in the time left)",
    )
    p.add_argument("--val-fraction", type=float, default=0.1, help="share of documents held out")
    # torch's own thread count by default: the command has the machine. The lab's server trains each page run
    # on one thread (views/training.py), since several sessions share the cores. The bound is the server's own
    # (LAB_TORCH_THREADS): more threads than cores is slow but safe, 100,000 crashed torch; os.cpu_count() is not
    # the bound, since it need not be what this process may use (affinity, a container's quota).
    p.add_argument(
        "--threads",
        type=whole_number(1, MAX_TORCH_THREADS),
        default=None,
        help=f"torch threads during training, 1 to {MAX_TORCH_THREADS} (default: torch's own)",
    )
    p.add_argument(
        "--core-attention",
        action="store_true",
        help="train through core.attention, the function the lessons show (slower; by default training attends with "
        "PyTorch's fused SDPA, held to parity with it)",
    )
    p.add_argument(
        "--no-causal-mask",
        action="store_true",
        help="remove the causal mask (the leakage lesson); the bundle is marked unsafe",
    )
    p.add_argument(
        "--no-tune",
        action="store_true",
        help="skip choosing the suggestion threshold on the validation documents (`tune` does it later)",
    )
    p.add_argument(
        "--no-leak-stop",
        action="store_true",
        help="keep training when the causality probe fails, to watch the leak happen (the bundle is "
        "still marked unsafe)",
    )
    p.set_defaults(handler=_run_train)


def _run_train(args: argparse.Namespace) -> int:
    from core.model.bundle import check_out_dir
    from core.model.bundle_checks import MANIFEST, read_manifest
    from core.model.corpus import load_corpus
    from core.model.distributed import check_batch_size, from_env, launch_command, process_group, timeout_seconds
    from core.model.gpt import PRESETS
    from core.model.leak import first_failed_probe
    from core.model.train_config import check_train_size, train_config_for
    from core.runs.job import train_and_save

    ranks = from_env()  # a single process unless torchrun started this one; a half-set environment is refused
    timeout = timeout_seconds() if ranks.distributed else None  # a bad LAB_DIST_TIMEOUT_S: refused before any wait
    if args.max_iters < 1:
        raise UsageError(f"--max-iters must be >= 1, got {args.max_iters}")
    if args.init_from is not None and args.preset is not None:
        raise UsageError(
            "--preset cannot be given with --init-from: the run trains the base model's architecture; drop --preset"
        )
    if args.context_length is not None and args.init_from is None:
        raise UsageError("--context-length needs --init-from (a preset's context is part of the preset)")
    base = None if args.init_from is None else _load_base(args.init_from)  # a bad base: one line, before anything
    if base is not None and args.context_length is not None:
        from core.model.init_from import with_context_length

        try:
            base = with_context_length(base, args.context_length)
        except ValueError as e:
            raise UsageError(f"--context-length: {e}") from None
    preset_name = None if base is not None else (args.preset or DEFAULT_PRESET)
    config = base.config if base is not None else PRESETS[args.preset or DEFAULT_PRESET]
    check_train_size(args.seed, args.batch_size, config.context_length, flags=True)  # generate's words
    check_batch_size(args.batch_size, ranks, name="--batch-size")  # on every rank, before any rank waits
    if ranks.is_main:  # before anything is trained: a bad --out costs a second (torchrun then stops the others)
        check_out_dir(args.out, overwrite=args.overwrite)
    # One rule with the app (the runs wing's job) for what the flags leave open: evaluation interval, warmup, final lr.
    train_config = train_config_for(
        args.max_iters,
        max_seconds=args.max_seconds,
        seed=args.seed,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        eval_interval=args.eval_interval,
        eval_iters=args.eval_iters,
        val_fraction=args.val_fraction,
        causal=not args.no_causal_mask,
        num_threads=args.threads,
        fast_attention=not args.core_attention,
        leak_stop=not args.no_leak_stop,
    )
    corpus = load_corpus(args.corpus)
    progress = _Progress(sys.stderr)
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set()) if _main_thread() else None
    try:  # Ctrl-C stops training early (on every rank: the stop is agreed); the bundle is saved from the weights so far
        with process_group(ranks, timeout):
            result, path = train_and_save(
                corpus,
                preset_name,
                train_config,
                args.out,
                base=base,
                command=args.command_line,
                callback=progress,
                should_stop=stop.is_set,
                overwrite=args.overwrite,
                ranks=ranks,
                launch_command=launch_command(args.command_line[3:]),
            )
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if path is None:  # a rank other than 0: rank 0 writes, tunes and reports
        return 0
    if (
        not args.no_tune
    ):  # the suggestion threshold, chosen on the validation documents (core.release.evaluation.tuning)
        import torch

        from core.release.evaluation.tuning import tune_bundle, tuning_config_for

        if args.threads:  # the typist keeps to --threads as training did (two threads on one free core crawled)
            torch.set_num_threads(args.threads)
        policy, _, _ = tune_bundle(path, corpus=corpus, config=tuning_config_for(result.metrics["iters"]))
        print(f"suggestion threshold {policy.threshold} tuned on the validation documents", file=sys.stderr)
    manifest = read_manifest(path / MANIFEST)  # the one bounded JSON reader (core.jsonfile)
    version = manifest["version"]
    leaked = first_failed_probe(result.history)
    if leaked is not None:
        how = "stopped the run" if result.metrics["stop_reason"] == "leak" else "failed (--no-leak-stop: trained on)"
        print(f"leak: the causality probe {how} at step {leaked.step}: {leaked.probe.describe()}", file=sys.stderr)
    if not manifest["safe"]:
        print(f"warning: the bundle is marked unsafe: {manifest['unsafe_reason']}", file=sys.stderr)
    started = "" if base is None else f", started from version {base.version}"
    print(f"wrote {path} (version {version}, {result.model.num_parameters():,} parameters{started})", file=sys.stderr)
    line = {k: result.metrics[k] for k in ("train_loss", "val_loss", "iters", "seconds", "tokens_per_second")}
    line.update(stop_reason=result.metrics["stop_reason"], bundle=str(path), version=version, safe=manifest["safe"])
    print(json.dumps(line))
    return 0


def _load_base(name: str):
    """The bundle --init-from names: a bundle folder, or else a version of the release registry
    (LAB_REGISTRY_DIR: only a version the gate passed); BundleError (one line) when it does not load, is marked
    unsafe or was trained without the causal mask."""
    from pathlib import Path

    from core.model.bundle import is_version, load_bundle
    from core.model.bundle_checks import BundleError
    from core.model.init_from import check_base
    from core.release.registry.served import load_version
    from core.settings import registry_dir

    if Path(name).is_dir() or not is_version(name):
        return check_base(load_bundle(name))
    registry = registry_dir()
    try:
        return check_base(load_version(registry, name))
    except BundleError as e:
        raise BundleError(f"--init-from {name}: version of the registry {str(registry)!r} refused: {e}") from None


class _Progress:
    """Training callback that draws progress on a stream: one rewritten line on a terminal, periodic
    lines otherwise."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.tty = stream.isatty()
        self.last = -math.inf

    def __call__(self, event) -> None:
        now = time.monotonic()
        if self.tty:
            if event.kind != "step" or now - self.last >= TTY_REFRESH:
                self.stream.write("\r" + self.format(event).ljust(100))
                if event.kind == "done":
                    self.stream.write("\n")
                self.stream.flush()
                self.last = now
        elif event.kind != "step" or now - self.last >= PROGRESS_EVERY:
            self.stream.write(self.format(event) + "\n")
            self.stream.flush()
            self.last = now

    @staticmethod
    def format(event) -> str:
        width = len(str(event.max_iters))
        done = event.step / event.max_iters  # or, under a time budget, the share of time spent
        if math.isfinite(event.eta_seconds) and event.elapsed + event.eta_seconds > 0:
            done = max(done, event.elapsed / (event.elapsed + event.eta_seconds))
        bar_fill = 20 if event.kind == "done" else min(20, int(20 * done))
        label = {"step": "loss", "eval": "train", "done": "final train"}[event.kind]
        probe = getattr(event, "probe", None)
        causal = "" if probe is None else f" | causality probe {'ok' if probe.passed else 'FAILED'}"
        return (
            f"[{'#' * bar_fill}{'.' * (20 - bar_fill)}] step {event.step:>{width}}/{event.max_iters} "
            f"| {label} {event.loss:.4f} | val {event.val_loss:.4f} | lr {event.lr:.2e} "
            f"| {event.tokens_per_second:,.0f} tok/s | {_duration(event.elapsed)} elapsed "
            f"| eta {_duration(event.eta_seconds)}{causal}"
        )


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes}m{s:02d}s" if minutes else f"{s}s"


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


# ---- generate ------------------------------------------------------------------------------------


def register_generate(subparsers) -> None:
    p = subparsers.add_parser("generate", help="complete a prompt with a trained bundle")
    p.add_argument("--bundle", required=True, help="bundle directory (written by `train`)")
    p.add_argument("--prompt", required=True, help="text to complete")
    p.add_argument("--max-new-tokens", type=int, default=None, help="at most core.model.sampling.MAX_NEW_TOKENS (4096)")
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="0 = greedy; below core.model.sampling.MIN_TEMPERATURE (0.001) also greedy",
    )
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--seed", type=int, default=0, help="seed of the sampler, 0 .. 2**63 - 1 (default 0)")
    p.add_argument("--no-cache", action="store_true", help="recompute the whole window every step")
    p.add_argument("--completion-only", action="store_true", help="print only the generated text")
    p.set_defaults(handler=_run_generate)


def _run_generate(args: argparse.Namespace) -> int:
    from core.model.bundle import load_bundle
    from core.model.engine import generate
    from core.model.sampling import MIN_TEMPERATURE, check_seed
    from core.model.tokenizer import EOS_ID
    from core.telemetry.completions import recording_completion
    from core.telemetry.store import TelemetryStore

    # Every argument is checked before the first character is printed: an error never follows partial output.
    try:
        check_seed(args.seed)
    except ValueError as e:
        raise UsageError(f"--{e}") from None
    bundle = load_bundle(args.bundle)
    if not bundle.safe:
        print(f"warning: this bundle is marked unsafe: {bundle.manifest['unsafe_reason']}", file=sys.stderr)
    overrides = {
        k: getattr(args, k) for k in ("max_new_tokens", "temperature", "top_k", "top_p") if getattr(args, k) is not None
    }
    sample = dataclasses.replace(bundle.sample_config, **overrides)  # ValueError (exit 2) names a bad value
    if args.temperature is not None and 0 < args.temperature < MIN_TEMPERATURE:
        print(
            f"note: --temperature {args.temperature:g} is below {MIN_TEMPERATURE:g} (MIN_TEMPERATURE), where "
            "sampling is already argmax but for near-ties; generating greedily (temperature 0)",
            file=sys.stderr,
        )
    prompt = bundle.manifest["prompt_template"].replace("{prompt}", args.prompt)
    unknown = bundle.tokenizer.unknown_chars(prompt)
    if unknown:
        print(f"warning: characters outside the vocabulary become <unk>: {''.join(unknown)!r}", file=sys.stderr)
    ids = bundle.tokenizer.encode(prompt)
    use_cache = bundle.use_cache and not args.no_cache
    # generate checks its arguments when called, so a bad one is refused here, before any output
    steps = generate(bundle.model, ids, sample, seed=None if sample.greedy else args.seed, use_cache=use_cache)
    if not args.completion_only:
        sys.stdout.write(args.prompt)
    # The completion is recorded in the telemetry database (core.telemetry, surface 'cli'); a failure there is
    # counted by the store and changes nothing printed.
    store = TelemetryStore()
    with recording_completion(
        bundle.tokenizer, bundle.config.context_length, args.prompt, template=bundle.manifest["prompt_template"],
        version=bundle.version, surface="cli", store=store,
    ) as recorder:  # fmt: skip
        for step in steps:
            recorder.step(step)
            if step.token == EOS_ID:
                break
            sys.stdout.write(bundle.tokenizer.decode([step.token]))
            sys.stdout.flush()
    sys.stdout.write("\n")
    if not store.health().ok:
        print(f"note: telemetry is not being recorded: {store.health().last_error}", file=sys.stderr)
    return 0


# ---- entry point ---------------------------------------------------------------------------------


def register_release(subparsers) -> None:
    """`evaluate`, `baseline` and `release {check,promote,rollback,status}`: see cli/release.py."""
    from cli.release import register_commands

    register_commands(subparsers)


def register_suggest(subparsers) -> None:
    """`suggest` and `tune`: see cli/suggest.py."""
    from cli.suggest import register_commands

    register_commands(subparsers)


def register_cost(subparsers) -> None:
    """`cost`: see cli/cost.py."""
    from cli.cost import register_commands

    register_commands(subparsers)


def register_serve(subparsers) -> None:
    """`serve` (one laptop) and `serve --class` (workers behind HAProxy): see cli/serve.py."""
    from cli.serve import register_commands

    register_commands(subparsers)


COMMANDS: list[Callable] = [
    register_train,
    register_generate,
    register_suggest,
    register_release,
    register_cost,
    register_serve,
]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m core", description="Attention Lab: train and use a from-scratch transformer.")
    parser.add_argument("--version", action="version", version=f"attention-lab {lab_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for register in COMMANDS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0, or 2 for a usage, corpus or bundle error)."""
    from core.model.bundle_checks import BundleError
    from core.model.corpus import CorpusError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        args.command_line = ["python", "-m", "core", *argv]
        return args.handler(args)
    except (UsageError, CorpusError, BundleError, ValueError, OSError) as e:
        message = " ".join(str(e).split())  # one line, whatever the exception held
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USAGE
