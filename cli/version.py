"""`python -m core --version`: the lab's version.

Run from a source checkout (a pyproject.toml beside core/), the version is the source's own, core.__version__
(tests/kernel/test_version.py holds it equal to pyproject.toml's): an editable install's metadata keeps the version
it was installed with and goes stale when pyproject.toml moves on. Installed from a wheel, it is the installed
distribution's (importlib.metadata "attention-lab"), else core.__version__.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import core

DISTRIBUTION = "attention-lab"


def lab_version() -> str:
    if (Path(core.__file__).resolve().parents[1] / "pyproject.toml").is_file():
        return core.__version__
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return core.__version__
