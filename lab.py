"""Set up and start Attention Lab with nothing but Python: the Makefile's targets call this, and so can Windows.

    python lab.py run [--port 8501]      make .venv, install the lab, serve it on http://localhost:PORT
    python lab.py class [--workers N]    the same, then serve a class: Streamlit workers behind HAProxy on the network
    python lab.py test [pytest args]     make .venv with the test tools, Chromium, HAProxy and PostgreSQL; run pytest
                                         (no args: every test, the ones without a browser on every core first)
    python lab.py lint                   ruff (lint and format) and mypy, as pyproject.toml sets them
    python lab.py setup [--dev]          only make the environment (--venv DIR, --python EXE for another Python)

Only the standard library is used here: this file runs before anything is installed. The environment is a venv
(`.venv` unless --venv says otherwise); it is installed again only when requirements.txt or pyproject.toml change
(a stamp file in the venv records their hash). Installing takes the runtime dependencies from requirements.txt, whose
`--extra-index-url` brings the CPU build of torch on Linux and Windows, then the lab itself without dependencies.
A machine that cannot reach that index (an offline mirror, a proxy that allows PyPI only) still installs: pip is told
to give up on an unreachable index after one retry instead of five, and takes torch from PyPI or a local wheel.

System programs the tests or a class need (Debian's chromium, haproxy, postgresql, and the fonts-noto-cjk the tests
draw Chinese in) are installed with apt-get when this runs as root on Debian or Ubuntu; otherwise it says what to
install and stops.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
MIN_PYTHON = (3, 11)
PIP = ["-m", "pip", "install", "--disable-pip-version-check", "--retries", "1"]
# What each command needs from the system: a program to look for, and the Debian package that brings it.
CHROMIUM = ("chromium", "chromium")
HAPROXY = ("haproxy", "haproxy")
POSTGRESQL = ("initdb", "postgresql")
# Not a program: the Chinese faces the browser tests expect Chinese drawn in (ui/projector.py's FONT_FAMILY). Looked
# for with fontconfig on Linux; macOS and Windows ship one of the faces that stack names (PingFang SC, Microsoft YaHei).
CJK_FONTS = ("Noto Sans CJK SC", "fonts-noto-cjk")
CJK_FACES = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC")
# `test` with no pytest arguments runs every test in two runs. First the tests without a browser, spread over the
# cores by pytest-xdist (at most 4 workers: each trains its own session fixtures). Then the browser and install tests,
# one at a time on a quiet machine: a click in Chromium is lost now and then when both cores are busy.
ALONE = ["tests/e2e", "tests/install"]
MAX_WORKERS = 4


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def check_python(python: str) -> None:
    """Stop with a message unless `python` is a Python the lab supports."""
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        sys.exit(f"error: cannot run the Python {python!r}; give another with --python (3.11 or newer)")
    if tuple(int(part) for part in found.split(".")) < MIN_PYTHON:
        sys.exit(f"error: Attention Lab needs Python 3.11 or newer; {python!r} is {found}. Install a newer Python.")


def stamp(dev: bool) -> str:
    """What the environment was installed from: a new requirements.txt or pyproject.toml means install again."""
    h = hashlib.sha256(b"dev" if dev else b"runtime")
    for name in ("requirements.txt", "pyproject.toml"):
        h.update((ROOT / name).read_bytes())
    return h.hexdigest()


def setup(venv: Path, python: str = sys.executable, *, dev: bool = False) -> Path:
    """Create `venv` if needed and install the lab (and with `dev` its test tools) unless already installed."""
    py = venv_python(venv)
    if not py.exists():
        check_python(python)
        print(f"Creating {venv} with {python} ...", flush=True)
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    stamp_file = venv / (".installed-dev" if dev else ".installed")
    wanted = stamp(dev)
    if stamp_file.exists() and stamp_file.read_text(encoding="utf-8") == wanted:
        compile_catalogs(py)
        return py
    print("Installing the lab's dependencies (the first time takes a few minutes) ...", flush=True)
    pip = [str(py), *PIP]
    subprocess.run([*pip, "--quiet", "-r", str(ROOT / "requirements.txt")], check=True)
    subprocess.run([*pip, "--quiet", "--no-deps", "-e", str(ROOT)], check=True)
    if dev:
        subprocess.run([*pip, "--quiet", "-e", f"{ROOT}[dev]"], check=True)
        (venv / ".installed").write_text(stamp(False), encoding="utf-8")  # the runtime is in it too
    stamp_file.write_text(wanted, encoding="utf-8")
    compile_catalogs(py)
    return py


COMPILE_CATALOGS = "from core.i18n import compile_all; print(*compile_all(), sep=chr(10))"


def compile_catalogs(py: Path) -> None:
    """Compile each language's messages.po into the messages.mo the app reads (core/i18n.py), when it is missing
    or older than its .po: the compiled catalogs are built here, never committed."""
    stale = [
        po
        for po in (ROOT / "locales").glob("*/LC_MESSAGES/messages.po")
        if not po.with_suffix(".mo").exists() or po.with_suffix(".mo").stat().st_mtime < po.stat().st_mtime
    ]
    if stale:
        subprocess.run([str(py), "-c", COMPILE_CATALOGS], check=True, cwd=ROOT)


def has_program(program: str) -> bool:
    if program == CJK_FONTS[0]:
        return has_cjk_font()
    if program == "chromium":
        return any(shutil.which(name) for name in ("chromium", "chromium-browser"))
    if program == "initdb":  # Debian keeps PostgreSQL's server programs off PATH
        return shutil.which("initdb") is not None or any(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return shutil.which(program) is not None


def system_programs(needed: list[tuple[str, str]], why: str) -> None:
    """Install missing system programs with apt-get when we are root on Debian/Ubuntu; otherwise say what to do."""
    missing = [(program, package) for program, package in needed if not has_program(program)]
    if not missing:
        return
    packages = [package for _, package in missing]
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if root and shutil.which("apt-get"):
        print(f"Installing Debian's {', '.join(packages)} for {why} ...", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", *packages], check=True, env=env, stdout=subprocess.DEVNULL)
        return
    sys.exit(
        f"error: {why} needs {', '.join(packages)}, which is not installed. "
        f"Install it (Debian/Ubuntu: sudo apt-get install {' '.join(packages)}; macOS: brew install "
        f"{' '.join(p.replace('chromium', '--cask chromium') for p in packages)}) and run this again."
    )


def has_cjk_font() -> bool:
    """Whether a Chinese face of ui/projector.py's FONT_FAMILY is installed (always, off Linux: see CJK_FONTS)."""
    if not sys.platform.startswith("linux"):
        return True
    fc_list = shutil.which("fc-list")
    if fc_list is None:  # no fontconfig: look where Debian puts the files
        return any(Path("/usr/share/fonts").rglob("NotoSansCJK*"))
    found = subprocess.run([fc_list, ":lang=zh", "family"], capture_output=True, text=True, check=False).stdout
    return any(face in found for face in CJK_FACES)


def run(command: list[str]) -> int:
    """Run a child to its end; Ctrl-C stops it (the child gets the signal too) without a traceback here."""
    try:
        return subprocess.run(command, cwd=ROOT).returncode
    except KeyboardInterrupt:
        return 130


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python lab.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv", help="the environment to use (default .venv)")
    parser.add_argument("--python", default=sys.executable, help="the Python that creates a new environment")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("run", help="serve the lab on this computer (localhost)")
    serve.add_argument("--port", type=int, default=8501)
    # `class` and `test` pass every other argument on: to `python -m core serve --class`, and to pytest
    commands.add_parser("class", help="serve a class on the network (needs LAB_TEACHER_PASSCODE and HAProxy)")
    commands.add_parser("test", help="run every test (browser tests included)")
    commands.add_parser("lint", help="ruff and mypy")
    setup_cmd = commands.add_parser("setup", help="only make the environment")
    setup_cmd.add_argument("--dev", action="store_true", help="with the test tools")
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("class", "test"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    venv = args.venv if args.venv.is_absolute() else Path.cwd() / args.venv

    if args.command == "setup":
        setup(venv, args.python, dev=args.dev)
        return 0
    if args.command == "run":
        py = setup(venv, args.python)
        return run([str(py), "-m", "core", "serve", "--port", str(args.port)])
    if args.command == "class":
        system_programs([HAPROXY], "serving a class")
        py = setup(venv, args.python)
        return run([str(py), "-m", "core", "serve", "--class", *extra])
    if args.command == "lint":
        py = setup(venv, args.python, dev=True)
        checks = [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["mypy"]]
        return max(run([str(py), "-m", *check]) for check in checks)
    # test
    system_programs([CHROMIUM, HAPROXY, POSTGRESQL, CJK_FONTS], "the test suite (browser, proxy and database tests)")
    py = setup(venv, args.python, dev=True)
    return max(run([str(py), "-m", "pytest", *pytest_args]) for pytest_args in test_runs(extra))


def test_runs(extra: list[str]) -> list[list[str]]:
    """The pytest runs of `test`: the arguments given, as one run, or every test in the two runs ALONE describes."""
    if extra:
        return [extra]
    workers = min(MAX_WORKERS, os.cpu_count() or 1)
    return [["-n", str(workers), *(f"--ignore={folder}" for folder in ALONE)], ALONE]


if __name__ == "__main__":
    sys.exit(main())
