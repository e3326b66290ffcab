"""The server process's own set-up, done once before the first page runs and after each page's first run; nothing
runs at import.

Threads: one torch thread by default; this model's small matmuls barely gain from a second, which a training run or
another learner needs (5.8 ms/token on one thread, 57 on two, under load). Freezing: Streamlit runs a full garbage
collection after every script run, walking about 270,000 objects (150-250 ms); gc.freeze() moves the server's
start-up objects, and then each page's first-run objects (issue 26), out of its walk. A LAB_* setting that does not
read is a banner above every page, never a failed server.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable

import pandas  # noqa: F401  (loaded before start() freezes, so that their long-lived objects are frozen too)
import plotly.graph_objects  # noqa: F401
import streamlit  # noqa: F401
import torch

from core import i18n, settings
from core.i18n import N_

# What the banner says of a LAB_* value the server could not use: written when the server starts, before any reader's
# language is known, so kept as its parts and put in the reader's words when shown.
USING_DEFAULT = N_("{problem}. Using {default} until the server restarts.")


class SettingProblem(str):
    """A LAB_* value the server could not use and the default used instead: the English sentence (a log's, a test's),
    and `shown()`, the same in the language of the run that shows it (the problem itself is core's English)."""

    problem: str
    default: int

    def __new__(cls, problem: str, default: int) -> SettingProblem:
        self = super().__new__(cls, USING_DEFAULT.format(problem=problem, default=default))
        self.problem, self.default = problem, default
        return self

    def shown(self) -> str:
        return i18n._(USING_DEFAULT).format(problem=self.problem, default=self.default)


SETTING_PROBLEMS: list[SettingProblem] = []  # LAB_* values the server could not use; ui.models.banner shows them


def setting(read: Callable[[], int], default: int) -> int:
    """`read()` (a settings reader), or `default` when the operator's value cannot be used (kept to be shown)."""
    try:
        return read()
    except settings.SettingError as e:
        SETTING_PROBLEMS.append(SettingProblem(str(e), default))
        return default


@functools.cache  # once per process: not st.cache_resource, which a test's fixture (or an operator) may clear
def start() -> None:
    """The first call of a server process: torch's threads (LAB_TORCH_THREADS, default 1), then the heap frozen."""
    torch.set_num_threads(setting(settings.torch_threads, 1))
    gc.freeze()


@functools.cache  # not st.cache_resource: clearing the caches (a test's fixture does) must not freeze again
def settle(page: str) -> bool:
    """After a run of `page` (app.py's page.run()): on the first one of this server, freeze what is alive; cached,
    so at most one freeze per page of app.py's navigation per process."""
    gc.freeze()
    return True
