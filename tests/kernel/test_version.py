"""`python -m core --version` prints the lab's version, and the source's constant (core.__version__) is the one
pyproject.toml declares."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import core
from cli.version import lab_version

ROOT = Path(__file__).resolve().parents[2]


def declared() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def test_the_constant_is_pyprojects_version():
    assert core.__version__ == declared()


@pytest.mark.smoke
def test_python_m_core_version_prints_it_and_exits_0():
    proc = subprocess.run(
        [sys.executable, "-m", "core", "--version"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == f"attention-lab {declared()}\n", proc.stderr


def test_a_source_checkout_reports_its_own_version_not_stale_install_metadata(monkeypatch):
    """An editable install's metadata keeps the version it was installed with (this venv's said 0.2.0 for a
    0.3.0 tree); from a source checkout the source's constant wins."""
    monkeypatch.setattr("importlib.metadata.version", lambda name: "0.0.1-stale")
    assert lab_version() == declared()
