"""Before and after in one run: a bench measured on an older commit's tree and on this one, printed side by side.

Issue 26 asks for the two sides of a change "in one run", on the same machine minutes apart, not two figures
taken on different days. `worktree(ref)` checks `ref` out into a temporary folder (`git worktree add --detach`),
and `run_side(script, root, args)` runs one of our bench scripts against that tree's app in a process of its own,
reading its `--json` output. The script is always this tree's (the older tree may not have `--json`); the app, ui
and core it measures are the other tree's: the subprocess starts with cwd and PYTHONPATH at `root`, and every
bench puts `--root` first on sys.path. The worktree has no .venv: the subprocess runs on this interpreter
(sys.executable), so both sides run on the same libraries. The shipped models (models/) are tracked in git, so
the worktree serves the same model.

The worktree is removed when the block ends, also on an exception, Ctrl-C or SIGTERM (`git worktree remove
--force`, then `git worktree prune`); `git worktree add` writes only the worktree's own folder and its entry under
.git/worktrees, never this tree's files or index.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # this tree: the benches' own code always comes from here
SESSION_START = "7a68661"  # main when issue 26's capacity work started: the "before" of its figures


def add_side_arguments(parser: argparse.ArgumentParser) -> None:
    """The three options every before/after bench takes."""
    parser.add_argument("--root", type=Path, default=HERE, help="the tree whose app is measured (default: this one)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument(
        "--before",
        metavar="REF",
        nargs="?",
        const=SESSION_START,
        help=f"also measure REF's tree (a git worktree; bare --before: {SESSION_START}) and print both sides",
    )


def use_root(root: Path) -> Path:
    """Make `root`'s app, ui and core the ones imported, and its folder the working directory; the resolved root."""
    root = root.resolve()
    if not (root / "app.py").is_file():
        raise SystemExit(f"--root {root}: no app.py there; give the top folder of an Attention Lab checkout")
    sys.path.insert(0, str(root))
    os.chdir(root)
    return root


@contextmanager
def worktree(ref: str = SESSION_START, repo: Path = HERE) -> Iterator[Path]:
    """A detached checkout of `ref` in a temporary folder, removed afterwards whatever happens."""
    commit = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if not commit:
        raise SystemExit(f"--before {ref}: not a commit of {repo}; give a commit, tag or branch (git log --oneline)")
    tmp = Path(tempfile.mkdtemp(prefix="lab-before-"))
    tree = tmp / "tree"
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so `finally` runs on a kill too, not only on Ctrl-C
    try:
        _git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        yield tree
    finally:
        _git(repo, "worktree", "remove", "--force", str(tree), check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        _git(repo, "worktree", "prune", check=False)
        signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip() if done.returncode == 0 else ""


def run_side(script: Path, root: Path, args: Sequence[str]) -> dict:
    """Run bench `script` (this tree's) on `root`'s app in its own process with `--json`; its parsed output.

    Its stderr passes through (progress, errors); a failure names the side and stops the comparison. If this
    process is stopped meanwhile, the bench is interrupted as Ctrl-C would (never killed outright), so that it
    stops the servers and browser it started in process groups of their own before the worktree goes."""
    env = dict(os.environ, PYTHONPATH=str(root))
    command = [sys.executable, str(script), "--root", str(root), "--json", *args]
    proc = subprocess.Popen(
        command, cwd=root, env=env, stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
        preexec_fn=_interruptible,
    )  # fmt: skip
    try:
        stdout, _ = proc.communicate()
    except KeyboardInterrupt:  # a Ctrl-C at the terminal reached the bench too: let it finish cleaning up
        _stop(proc, interrupt=False)
        raise
    except BaseException:
        _stop(proc, interrupt=True)
        raise
    if proc.returncode != 0:
        raise SystemExit(f"{script.name} on {root} failed (exit {proc.returncode}); its messages are above")
    try:
        return json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as err:
        raise SystemExit(f"{script.name} on {root} printed no JSON line at the end ({err}):\n{stdout}") from err


def _interruptible() -> None:
    """In the bench's process before it starts: SIGINT back to its default, so Python turns it into KeyboardInterrupt
    (a shell starts a background job with SIGINT ignored, and the bench would inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop(proc: subprocess.Popen, *, interrupt: bool, grace: float = 60) -> None:
    """Interrupt the bench (KeyboardInterrupt runs its `finally` blocks), wait for it, kill it only if it hangs."""
    if interrupt and proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def both_sides(script: Path, ref: str, args: Sequence[str]) -> tuple[dict, dict]:
    """(REF's result, this tree's result) of the same bench with the same arguments, REF first."""
    with worktree(ref) as old:
        print(f"before: {ref} ({_git(HERE, 'rev-parse', '--short', ref)}) in {old}", file=sys.stderr, flush=True)
        before = run_side(script, old, args)
    print(f"after: this tree ({HERE})", file=sys.stderr, flush=True)
    return before, run_side(script, HERE, args)


def strip_before(argv: Sequence[str]) -> list[str]:
    """The arguments to pass on to each side: all but --before (and its REF) and --json."""
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == "--json":
            continue
        elif arg == "--before":
            skip = i + 1 < len(argv) and not argv[i + 1].startswith("-")
        elif not arg.startswith("--before="):
            out.append(arg)
    return out


def ratio(before: float | None, after: float | None) -> float:
    """after / before: under 1 is faster (or fewer); NaN when a side is missing or before is 0."""
    if before is None or after is None or before == 0 or math.isnan(before) or math.isnan(after):
        return math.nan
    return after / before


def side_by_side(
    before: dict, after: dict, keys: Sequence[str], numbers: Sequence[str], texts: Sequence[str] = (), digits: int = 1
) -> str:
    """One table of both sides' rows, matched on `keys`: each of `texts` once ("before -> after" when they differ),
    then for each of `numbers` before, after and after/before.

    A row only one side has (a page added or removed) shows "-" on the other side."""
    rows_b = {tuple(r[k] for k in keys): r for r in before["rows"]}
    rows_a = {tuple(r[k] for k in keys): r for r in after["rows"]}
    order = list(rows_b) + [k for k in rows_a if k not in rows_b]
    rows_t = {key: [_text(rows_b.get(key, {}).get(t), rows_a.get(key, {}).get(t)) for t in texts] for key in order}
    widths = [max([len(k)] + [len(str(row[i])) for row in order]) for i, k in enumerate(keys)]
    widths_t = [max([len(t)] + [len(rows_t[key][i]) for key in order]) for i, t in enumerate(texts)]
    head = [f"{k:<{w}}" for k, w in zip(keys, widths, strict=True)]
    head += [f"{t:<{w}}" for t, w in zip(texts, widths_t, strict=True)]
    for n in numbers:
        head += [f"{n + ' before':>{max(len(n) + 7, 9)}}", f"{'after':>9}", f"{'after/before':>12}"]
    lines = ["  ".join(head)]
    for key in order:
        b, a = rows_b.get(key, {}), rows_a.get(key, {})
        cells = [f"{str(v):<{w}}" for v, w in zip(key, widths, strict=True)]
        cells += [f"{t:<{w}}" for t, w in zip(rows_t[key], widths_t, strict=True)]
        for n in numbers:
            vb, va = b.get(n), a.get(n)
            cells += [
                f"{_num(vb, digits):>{max(len(n) + 7, 9)}}",
                f"{_num(va, digits):>9}",
                f"{_num(ratio(vb, va), 2):>12}",
            ]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _text(before: object, after: object) -> str:
    b, a = "-" if before is None else str(before), "-" if after is None else str(after)
    return b if b == a else f"{b} -> {a}"
