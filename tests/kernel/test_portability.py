"""Windows has no O_NOFOLLOW, O_NONBLOCK or O_DIRECTORY, no fcntl, no process groups: the lab's file code must work
without them, and no POSIX-only call may sit in the first-party source unguarded.

(a) The run record (the run record), the file kernel (core.files) and the registry
(core.release.registry.registry)
    run with those `os` attributes deleted, as on Windows, and a run record that is a symlink (or a FIFO, or a file
    swapped for a link between the check and the open) is still refused.
(b) The rule, held by parsing every module as tests/kernel/test_layout.py does:

    A POSIX-only (or Windows-only) name of PLATFORM_NAMES (an attribute of os, signal, select or subprocess, a
    `from os import ...` of one, an import of a module of PLATFORM_MODULES, the keyword preexec_fn=) may appear only
      - inside an `if`/`elif`/`while` or a conditional expression (either branch) whose test checks the platform:
        it calls hasattr(...) or reads sys.platform, os.name or platform.system();
      - after such a check in an `and`/`or` (`hasattr(os, "killpg") and os.killpg(...)`);
      - after such an `if` that ends in return or raise, in the same block (`if sys.platform == "win32": ...
        return`, then the POSIX code);
      - inside a `try` whose handlers catch AttributeError, ImportError or ModuleNotFoundError.
    getattr(os, "O_NOFOLLOW", 0) names the attribute as a string, so it is not a use: it is the usual way to take a
    flag where it exists.
"""

import ast
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
from filelock import SoftFileLock

from core import files
from core.model.bundle import load_bundle
from core.model.corpus import corpus_from_text
from core.release.evaluation.eval_report import EvalConfig
from core.release.gate.gate import check_release
from core.release.gate.rubric import ReleasePolicy
from core.release.registry import registry
from core.release.registry.registry_log import read_log
from core.release.registry.served import read_current, resolve_version
from core.runs import run_record

ROOT = Path(__file__).resolve().parents[2]
# What Windows lacks (or only Windows has), by module. os.symlink exists there but needs a privilege most
# accounts lack; os.lchmod is missing on Linux too.
PLATFORM_NAMES = {
    "os": {
        "O_NOFOLLOW", "O_NONBLOCK", "O_DIRECTORY", "O_CLOEXEC", "O_NOCTTY", "O_SYNC", "O_DSYNC", "O_NOATIME",
        "O_PATH", "O_TMPFILE", "O_BINARY", "getuid", "geteuid", "getgid", "getegid", "getgroups", "setuid", "setgid",
        "killpg", "setsid", "getsid", "getpgid", "setpgid", "getpgrp", "setpgrp", "fork", "forkpty", "mkfifo",
        "mknod", "chown", "lchown", "fchown", "lchmod", "sync", "statvfs", "fstatvfs", "uname", "nice",
        "getloadavg", "sched_getaffinity", "sched_setaffinity", "pipe2", "wait3", "wait4", "WNOHANG", "symlink",
        "startfile",
    },
    "signal": {
        "SIGHUP", "SIGKILL", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD", "SIGPIPE", "SIGSTOP", "SIGCONT",
        "SIGTSTP", "SIGWINCH", "SIGBREAK", "CTRL_C_EVENT", "CTRL_BREAK_EVENT", "alarm", "setitimer", "getitimer",
        "pause", "siginterrupt", "pthread_kill", "pthread_sigmask", "sigwait",
    },
    "select": {"poll", "epoll", "kqueue", "devpoll"},
    "subprocess": {
        "CREATE_NEW_PROCESS_GROUP", "CREATE_NO_WINDOW", "DETACHED_PROCESS", "STARTUPINFO", "CREATE_NEW_CONSOLE",
    },
}  # fmt: skip
PLATFORM_MODULES = {"fcntl", "pwd", "grp", "resource", "termios", "tty", "pty", "posix", "syslog", "msvcrt", "winreg"}
PLATFORM_KEYWORDS = {"preexec_fn"}  # subprocess: "not supported on Windows" (ValueError)
CAUGHT = {"AttributeError", "ImportError", "ModuleNotFoundError"}


# ---- (b) the rule ----------------------------------------------------------------------------------------


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> module for `import os`, `import signal as sg` ... of the modules PLATFORM_NAMES covers."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update({a.asname or a.name: a.name for a in node.names if a.name in PLATFORM_NAMES})
    return out


def _checks_platform(test: ast.AST) -> bool:
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr":
            return True
        if isinstance(node, ast.Attribute) and (
            (node.attr == "platform" and isinstance(node.value, ast.Name) and node.value.id == "sys")
            or (node.attr == "name" and isinstance(node.value, ast.Name) and node.value.id == "os")
            or (node.attr == "system" and isinstance(node.value, ast.Name) and node.value.id == "platform")
        ):
            return True
    return False


def _catches(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id in CAUGHT for k in kinds)


def _exits_early(statement: ast.stmt) -> bool:
    """`if <platform check>: ... return` (or raise): the statements after it run on the other platforms only."""
    return (
        isinstance(statement, ast.If)
        and _checks_platform(statement.test)
        and isinstance(statement.body[-1], (ast.Return, ast.Raise))
    )


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    child, parent = node, parents.get(node)
    while parent is not None:
        for block in (getattr(parent, name, None) for name in ("body", "orelse", "finalbody")):
            if isinstance(block, list) and child in block and any(map(_exits_early, block[: block.index(child)])):
                return True
        if isinstance(parent, (ast.If, ast.While, ast.IfExp)) and child is not parent.test:
            if _checks_platform(parent.test):
                return True
        if isinstance(parent, ast.BoolOp):
            before = parent.values[: parent.values.index(child)] if child in parent.values else []
            if any(_checks_platform(v) for v in before):
                return True
        if isinstance(parent, ast.Try) and child in parent.body and any(_catches(h) for h in parent.handlers):
            return True
        child, parent = parent, parents.get(parent)
    return False


def platform_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for every unguarded POSIX- or Windows-only use in `source` (the rule of the module docstring)."""
    tree = ast.parse(source)
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    aliases = _aliases(tree)
    uses: list[tuple[ast.AST, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr in PLATFORM_NAMES[aliases[node.value.id]]:
                uses.append((node, f"{aliases[node.value.id]}.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module in PLATFORM_NAMES and node.level == 0:
            uses += [(node, f"{node.module}.{a.name}") for a in node.names if a.name in PLATFORM_NAMES[node.module]]
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            uses += [(node, f"import {n}") for n in names if n.split(".")[0] in PLATFORM_MODULES]
        elif isinstance(node, ast.Call):
            uses += [(node, f"{k.arg}=") for k in node.keywords if k.arg in PLATFORM_KEYWORDS]
    return sorted((n.lineno, what) for n, what in uses if not _guarded(n, parents))


def first_party_files() -> list[Path]:
    """As tests/kernel/test_layout.py walks them: app.py and every module of core/, cli/, ui/, views/."""
    return [ROOT / "app.py", *[p for d in ("core", "cli", "ui", "views") for p in sorted((ROOT / d).rglob("*.py"))]]


def test_no_platform_only_call_is_left_unguarded():
    found = [
        f"{path.relative_to(ROOT)}:{line} {what}"
        for path in first_party_files()
        for line, what in platform_uses(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "guard these with getattr/hasattr or a sys.platform / os.name check: " + "; ".join(found)
    assert ROOT / "core" / "runs" / "run_record.py" in first_party_files()  # the walk saw the run record


@pytest.mark.parametrize(
    "source",
    [
        "import os\nfd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)\n",
        "import os as _os\n_os.killpg(pid, 9)\n",
        "from os import getuid\n",
        "import fcntl\n",
        "import signal\nsignal.signal(signal.SIGHUP, f)\n",
        "import subprocess\nsubprocess.Popen(['x'], preexec_fn=f)\n",
        "import select\np = select.poll()\n",
        "import os\nif x:\n    os.setsid()\n",
        "import os\ntry:\n    os.killpg(pid, 9)\nexcept OSError:\n    pass\n",  # OSError is not a platform guard
        'import os, sys\nif sys.platform == "win32":\n    log()\nos.killpg(pid, 9)\n',  # the check does not exit
    ],
)
def test_an_unguarded_use_is_caught(source):
    assert platform_uses(source), f"not caught: {source!r}"


@pytest.mark.parametrize(
    "source",
    [
        'import os\nflags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)\n',
        'import os\nif hasattr(os, "killpg"):\n    os.killpg(pid, 9)\n',
        'import os\nif os.name == "nt":\n    p.kill()\nelse:\n    os.killpg(pid, 9)\n',
        'import os, sys\nkill = os.killpg if sys.platform != "win32" else None\n',
        'import os\nok = hasattr(os, "getuid") and os.getuid() == 0\n',
        "try:\n    import fcntl\nexcept ImportError:\n    fcntl = None\n",
        "import signal\nSTOP = signal.SIGTERM\nsignal.signal(signal.SIGINT, f)\n",  # both exist on Windows
        "import os\nos.open(p, os.O_RDONLY | os.O_CREAT)\n",
        'import os, sys\ndef stop(p):\n    if sys.platform == "win32":\n        return p.kill()\n'
        "    os.killpg(p.pid, 9)\n",
    ],
)
def test_a_guarded_or_portable_use_passes(source):
    assert platform_uses(source) == []


# ---- (a) the file code without the POSIX flags ----------------------------------------------------------

ABSENT = ("O_NOFOLLOW", "O_NONBLOCK", "O_DIRECTORY", "O_CLOEXEC", "O_NOCTTY", "O_BINARY")


@pytest.fixture
def like_windows(monkeypatch):
    """os without the open flags Windows lacks; returns (file name, flags) of every os.open call, and POSIX's
    O_NOFOLLOW (tempfile took its own flags at import: its calls still carry it)."""
    real_open, calls = os.open, []

    def recording_open(path, flags, *args, **kwargs):
        calls.append((Path(path).name, flags))
        return real_open(path, flags, *args, **kwargs)

    posix_nofollow = getattr(os, "O_NOFOLLOW", 0)
    for name in ABSENT:
        monkeypatch.delattr(os, name, raising=False)
    monkeypatch.setattr(os, "open", recording_open)
    # shutil.rmtree takes its fd-based walk only where os.open accepts dir_fd, never on Windows; on POSIX since 3.13
    # that walk opens with os.O_NONBLOCK, removed above. Take the walk Windows takes.
    monkeypatch.setattr(shutil, "_use_fd_functions", False)
    yield calls, posix_nofollow


# The text tests/bundles.py trains the session's tiny bundle on (the `trained_bundle_path` fixture).
TINY_TEXT = "\n\n".join(f"def add{i}(a, b):\n    return a + b * {i}\n" for i in range(60))


def _run(runs: Path, trained_bundle_path: Path, name: str = "r1") -> run_record.RunRecord:
    """A run directory as the Training page leaves one: a copy of the tiny bundle and its record."""
    bundle = runs / name / run_record.BUNDLE
    bundle.parent.mkdir(parents=True)
    shutil.copytree(trained_bundle_path, bundle)
    return run_record.write_record(
        runs / name,
        bundle_path=bundle,
        version=load_bundle(bundle).version,
        label=f"run {name}",
        owner_token="a" * 32,
        corpus_text=TINY_TEXT,
    )


def test_the_run_record_works_and_refuses_links_without_the_posix_flags(tmp_path, trained_bundle_path, like_windows):
    calls, posix_nofollow = like_windows
    runs = tmp_path / "runs"
    record = _run(runs, trained_bundle_path)
    assert run_record.read_records(runs) == [record]
    assert run_record.find(runs, record.version) == record
    corpus = run_record.corpus_of(record)  # reads corpus.txt through the same bounded, link-refusing open
    assert (
        corpus is not None and corpus.fingerprint == load_bundle(record.bundle_path).manifest["corpus"]["fingerprint"]
    )
    ours = [flags for name, flags in calls if name in (run_record.RECORD, run_record.CORPUS_COPY)]
    assert ours and not any(flags & posix_nofollow for flags in ours)  # the Windows path really ran
    target = tmp_path / "elsewhere.json"
    target.write_bytes((runs / "r1" / run_record.RECORD).read_bytes())
    (runs / "r1" / run_record.RECORD).unlink()
    (runs / "r1" / run_record.RECORD).symlink_to(target)  # a valid record, but not the run's own file
    assert run_record.read_records(runs) == [] and run_record.find(runs, record.version) is None


def test_a_record_swapped_for_a_link_after_the_check_is_refused(tmp_path, trained_bundle_path, like_windows):
    """lstat sees the regular file; by the time it is opened it is a link to a valid record elsewhere."""
    runs = tmp_path / "runs"
    _run(runs, trained_bundle_path)
    own = runs / "r1" / run_record.RECORD
    target = tmp_path / "elsewhere.json"
    target.write_bytes(own.read_bytes())
    recording_open = os.open

    def swapping_open(path, flags, *args, **kwargs):
        if Path(path) == own and not own.is_symlink():
            own.unlink()
            own.symlink_to(target)
        return recording_open(path, flags, *args, **kwargs)

    os.open = swapping_open  # restored by like_windows's monkeypatch
    assert run_record.read_records(runs) == []
    assert own.is_symlink()  # the swap happened, and was refused


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_record_is_refused_without_waiting_even_without_o_nonblock(tmp_path, trained_bundle_path, like_windows):
    runs = tmp_path / "runs"
    _run(runs, trained_bundle_path)
    (runs / "r1" / run_record.RECORD).unlink()
    os.mkfifo(runs / "r1" / run_record.RECORD)  # opening it for reading would wait for a writer
    result: list = []
    reader = threading.Thread(target=lambda: result.append(run_record.read_records(runs)), daemon=True)
    reader.start()
    reader.join(timeout=60)  # a hang detector, not a timing check: the read takes milliseconds
    assert result == [[]], "reading a FIFO record blocked"


def test_the_file_kernel_works_without_the_posix_flags(tmp_path, like_windows):
    files.write_json_atomic(tmp_path / "a.json", {"x": 1})
    assert (tmp_path / "a.json").read_text() == '{\n  "x": 1\n}\n'
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644
    out = tmp_path / "dir"
    with files.staged_dir(out) as staged:
        files.write_json(staged / "b.json", [1, 2])
        files.install_dir(staged, out)
    assert sorted(p.name for p in out.iterdir()) == ["b.json"]
    with files.staged_dir(out) as staged:
        with pytest.raises(OSError, match="appeared while it was being written"):
            files.install_dir(staged, out)  # nothing is replaced without overwrite
    assert sorted(p.name for p in out.iterdir()) == ["b.json"]


POLICY = ReleasePolicy(
    require_beats_baseline=False, evaluation=EvalConfig(max_positions=128, typing_chars=60, latency_samples=0)
)


def test_the_registry_promotes_serves_and_rolls_back_without_the_posix_flags(
    tmp_path, trained_bundle_path, like_windows, monkeypatch
):
    """filelock's own Unix backend needs O_NONBLOCK (on Windows filelock takes its msvcrt backend instead): the
    registry's lock is its portable SoftFileLock here, so what runs without the flags is the lab's own code."""
    monkeypatch.setattr(registry, "FileLock", SoftFileLock)
    check = check_release(trained_bundle_path, corpus=corpus_from_text("toy.py", TINY_TEXT), policy=POLICY)
    assert check.rubric.passed, check.rubric.failures()
    reg = tmp_path / "registry"
    result = registry.promote(trained_bundle_path, reg, check=check)
    assert result.promoted and read_current(reg)["version"] == check.rubric.version
    served = resolve_version(reg)
    assert served.version == check.rubric.version
    assert not registry.rollback(reg).switched  # nothing earlier: refused and logged, not raised
    assert [e["event"] for e in read_log(reg)] == ["promote", "rollback-refused"]
