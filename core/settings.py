"""The server's own settings, read from LAB_* environment variables in one place, each bounded.

    registry_dir()        LAB_REGISTRY_DIR       the release registry          default <repo>/registry
    runs_dir()            LAB_RUNS_DIR           page-trained runs             default <repo>/runs
    max_training_runs()   LAB_MAX_TRAINING_RUNS  training runs at once         1..MAX_TRAINING_RUNS, default 1
    torch_threads()       LAB_TORCH_THREADS      torch threads of the server   1..MAX_TORCH_THREADS, default 1
    teacher_passcode(environ, secrets)
                          LAB_TEACHER_PASSCODE   from the environment, else Streamlit's secrets; "" = none

A number that is not an integer in its range raises SettingError, whose message names the variable, the value
given (cut to 40 characters), the range and the default, so the operator knows what to change. The server
(ui.startup) uses the default and shows that message above every page; the CLI stops with it.

Settings that belong to one wing are read there, next to what they set: LAB_CLASS_DB (core.classroom.store),
LAB_TELEMETRY_* (core.telemetry.store), LAB_RUNS_MAX_BYTES (the run record), LAB_DIST_TIMEOUT_S
(core.model.distributed), LAB_WARMUP (ui.warmup), LAB_JOIN_URL (ui.join), LAB_TLS_CERT and LAB_RUN_DIR
(cli.serve), LAB_DATABASE_URL (core.database), LAB_TEACHER_ATTEMPTS (ui.teacher).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.numbers import is_int

ROOT = Path(__file__).resolve().parent.parent  # the repository: the defaults do not depend on the working directory
MAX_TRAINING_RUNS = 64  # far above what one machine trains at once; bounds the number read
MAX_TORCH_THREADS = 256  # also bounds `train --threads` and TrainConfig.num_threads: 100,000 crashed torch


class SettingError(ValueError):
    """A LAB_* variable holds a value that cannot be used; the message says what to set instead."""


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def _directory(name: str, default: Path, environ: Mapping[str, str] | None) -> Path:
    raw = _env(environ).get(name, "").strip()
    return Path(raw) if raw else default


def _integer(name: str, default: int, lo: int, hi: int, environ: Mapping[str, str] | None) -> int:
    raw = _env(environ).get(name, "").strip()
    if not raw:
        return default
    # Plain ASCII digits only (int() would also take "1_0" and other scripts' digits), at most 20 of them.
    value = int(raw) if re.fullmatch(r"[0-9]{1,20}", raw) else None
    if value is None or not lo <= value <= hi:
        raise SettingError(
            f"{name}={raw[:40]!r} is not a whole number from {lo} to {hi}; set one, or unset it for the default of "
            f"{default}"
        )
    return value


def registry_dir(environ: Mapping[str, str] | None = None) -> Path:
    """LAB_REGISTRY_DIR, else <repo>/registry."""
    return _directory("LAB_REGISTRY_DIR", ROOT / "registry", environ)


def runs_dir(environ: Mapping[str, str] | None = None) -> Path:
    """LAB_RUNS_DIR, else <repo>/runs."""
    return _directory("LAB_RUNS_DIR", ROOT / "runs", environ)


def max_training_runs(environ: Mapping[str, str] | None = None) -> int:
    """LAB_MAX_TRAINING_RUNS: how many training runs a server runs at once (the rest wait in line)."""
    return _integer("LAB_MAX_TRAINING_RUNS", 1, 1, MAX_TRAINING_RUNS, environ)


def torch_threads(environ: Mapping[str, str] | None = None) -> int:
    """LAB_TORCH_THREADS: torch threads of the server."""
    return _integer("LAB_TORCH_THREADS", 1, 1, MAX_TORCH_THREADS, environ)


PASSCODE_ENV = "LAB_TEACHER_PASSCODE"


def teacher_passcode(environ: Mapping[str, str] | None = None, secrets: Mapping[str, Any] | None = None) -> str:
    """The teacher passcode the operator configured: LAB_TEACHER_PASSCODE from the environment first, then from
    Streamlit's secrets (`st.secrets` in a worker; the class server parses the same files); "" when neither is set
    (or only to blanks), meaning teacher actions are off. A TOML number is read as its digits. A secrets mapping that
    cannot be read (Streamlit raises when the file is missing or bad) gives no passcode."""
    value: Any = _env(environ).get(PASSCODE_ENV, "")
    if not value.strip() and secrets is not None:
        try:
            value = secrets.get(PASSCODE_ENV, "")
        except (OSError, ValueError):  # StreamlitSecretNotFoundError (a FileNotFoundError), a bad TOML or file
            value = ""
    if is_int(value):
        value = str(value)
    return value if isinstance(value, str) and value.strip() else ""
