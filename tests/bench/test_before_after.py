"""bench/before_after.py: the worktree of an older commit is a real checkout of it, and it is gone afterwards however
the block ends (normally, by an exception, Ctrl-C or SIGTERM); the side-by-side table pairs rows and divides right."""

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from before_after import ratio, side_by_side, strip_before, worktree  # noqa: E402

pytestmark = pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout (worktrees)")


def _commit(ref: str) -> str:
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", ref], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip()


# Any ref works; one other than the checked-out commit shows the checkout is REF's (a clone of depth 1 has only HEAD).
# Resolved once to a commit: HEAD moves when someone commits while the tests run.
FIRST_PARENT = _commit("HEAD~1") or _commit("HEAD") if (ROOT / ".git").exists() else ""


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def listed(tree: Path) -> bool:
    return str(tree) in git("worktree", "list", "--porcelain")


def test_worktree_is_the_ref_checked_out_with_its_model_then_removed():
    with worktree(FIRST_PARENT) as tree:
        assert git("rev-parse", "HEAD", cwd=tree) == FIRST_PARENT
        assert not tree.is_relative_to(ROOT)  # never inside this tree
        shipped = ROOT / "models" / "default" / "model.safetensors"
        checked_out = tree / "models" / "default" / "model.safetensors"
        assert checked_out.read_bytes()[:64] == shipped.read_bytes()[:64]  # tracked in git, not an LFS pointer
        assert git("status", "--porcelain", cwd=tree) == ""
        assert listed(tree)
    assert not tree.exists()
    assert not listed(tree)


def test_worktree_is_removed_when_the_block_raises():
    with pytest.raises(RuntimeError, match="bench failed"), worktree(FIRST_PARENT) as tree:
        assert tree.is_dir()
        raise RuntimeError("bench failed")
    assert not tree.exists()
    assert not listed(tree)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_worktree_is_removed_when_the_process_is_interrupted(sig):
    script = (
        "import signal, sys, time\n"
        # Ctrl-C as in a terminal: a shell without job control starts a background job with SIGINT ignored, and a
        # suite run from one would hand that on (Python then installs no KeyboardInterrupt).
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        f"sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
        "from before_after import worktree\n"
        f"with worktree({FIRST_PARENT!r}) as tree:\n"
        "    print(tree, flush=True)\n"
        "    time.sleep(120)  # until the test interrupts it\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    tree = Path(proc.stdout.readline().strip())  # blocks until the worktree exists
    assert tree.is_dir() and listed(tree)
    os.kill(proc.pid, sig)
    proc.wait(timeout=60)
    assert proc.returncode != 0
    assert not tree.exists()
    assert not listed(tree)


def test_an_unknown_ref_stops_with_a_message_naming_it():
    with pytest.raises(SystemExit, match="no-such-ref-26"), worktree("no-such-ref-26"):
        pass


def test_side_by_side_pairs_rows_by_key_and_divides_after_by_before():
    masks_b = {"page": "Masks", "mode": "full script", "p50": 80.0}
    masks_a = {"page": "Masks", "mode": "fragment", "p50": 20.0}
    before = {"rows": [masks_b, {"page": "Gone", "mode": "x", "p50": 5.0}]}
    after = {"rows": [{"page": "New", "mode": "x", "p50": 7.0}, masks_a]}
    lines = side_by_side(before, after, ["page"], ["p50"], texts=["mode"]).splitlines()
    cells = [line.split() for line in lines[1:]]
    assert cells[0] == ["Masks", "full", "script", "->", "fragment", "80.0", "20.0", "0.25"]
    assert cells[1] == ["Gone", "x", "->", "-", "5.0", "-", "-"]  # only before had it
    assert cells[2] == ["New", "-", "->", "x", "-", "7.0", "-"]  # only after has it
    assert ratio(50.0, 10.0) == pytest.approx(0.2)
    assert math.isnan(ratio(0.0, 1.0)) and math.isnan(ratio(None, 1.0))


@pytest.mark.parametrize(
    ("argv", "passed_on"),
    [
        (["--before", "abc123", "--repeats", "2"], ["--repeats", "2"]),
        (["--repeats", "2", "--before"], ["--repeats", "2"]),
        (["--before", "--pages", "masks", "--json"], ["--pages", "masks"]),
        (["--before=v1", "--modes", "warm,cold"], ["--modes", "warm,cold"]),
    ],
)
def test_each_side_gets_every_argument_but_before_and_json(argv, passed_on):
    assert strip_before(argv) == passed_on


FAKE_BENCH = """
import os, sys, time
try:
    print("started", file=sys.stderr, flush=True)  # inside the try: a signal right after it is caught too
    time.sleep(120)  # until interrupted
except KeyboardInterrupt:
    open(os.environ["FAKE_BENCH_MARKER"], "w").write("stopped its servers")
    raise
"""


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_side_interrupted_cleans_up_before_its_worktree_goes(tmp_path, how):
    """Stopping a --before run mid-side lets the bench's own `finally` blocks run (they stop the servers it started
    in process groups of their own) and removes the worktree; Ctrl-C reaches the whole group, SIGTERM only us."""
    bench, marker = tmp_path / "fake_bench.py", tmp_path / "marker"
    bench.write_text(FAKE_BENCH)
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
        "from pathlib import Path\n"
        "from before_after import run_side, worktree\n"
        f"with worktree({FIRST_PARENT!r}) as tree:\n"
        "    print(tree, flush=True)\n"
        f"    run_side(Path({str(bench)!r}), tree, [])\n"
    )
    env = dict(os.environ, FAKE_BENCH_MARKER=str(marker))
    # SIGTERM comes to a bench run in the background, which a shell starts with SIGINT ignored: the side's bench
    # must be interruptible all the same.
    ignore_sigint = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if how == "sigterm" else None
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True, preexec_fn=ignore_sigint,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    tree = Path(proc.stdout.readline().strip())
    assert proc.stderr.readline().strip() == "started"  # the side's bench is running in the worktree
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the parent and the bench both get it
    else:
        os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=90)
    assert marker.read_text() == "stopped its servers"
    assert not tree.exists()
    assert not listed(tree)
