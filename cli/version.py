"""`python -m core --version`: the lab's version.

From a source checkout it is the source's own version (a test holds it equal to pyproject.toml's), since an
editable install's metadata keeps the version it was installed with and goes stale. Installed from a wheel, it is
the installed distribution's.
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
