"""The server process's own set-up: what it does once before the first page runs, and after each page's first run.

    start()           app.py calls it first on every run; the first call of a server process (functools.cache)
                      sets torch's threads from LAB_TORCH_THREADS and freezes the heap; later calls do nothing
    setting(read, default)   a LAB_* setting read with core.settings, or `default` with the problem kept in
                      SETTING_PROBLEMS (ui.models.banner names each above every page) instead of failing the server
    settle(page)      app.py calls it after every page run; the first run of each page on a server freezes what is
                      alive then out of the garbage collector's sight (below)

Nothing here runs at import: importing `ui` or any of its modules changes nothing in the process.

Threads: one torch thread for the server by default. A page's forward passes on this small model are small matmuls
that a second thread barely speeds up, while a background training run or another class member needs that core
(measured by the autocomplete work with the machine under load: 5.8 ms/token on one thread, 57 ms/token on two).

Freezing: Streamlit runs a full garbage collection after every script run (`runner.postScriptGC`, on by default)
while it holds the GIL, and a full collection walks every tracked object: with torch, pandas, plotly and Streamlit
loaded that is about 270,000 objects and 150-250 ms after each rerun, longer than most pages take to run
(bench/bench_pages.py). These objects live as long as the server, so `start` moves them to the permanent
generation with gc.freeze() (the standard library's recipe for a server's start-up objects), which collections
skip. What is alive after a page's first run is then mostly that page's imports, its model and its default view's
cache entries (about 40,000 more objects, 20-30 ms of every rerun, issue 26), so `settle` freezes again, once per
page per server process: a full collection then walks only what reruns allocate. Frozen objects are still freed
when nothing refers to them; only a reference cycle among them that later becomes garbage stays until the process
ends, bounded by what the start-up and the pages' first runs allocated.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable

import pandas  # noqa: F401  (loaded before start() freezes, so that their long-lived objects are frozen too)
import plotly.graph_objects  # noqa: F401
import streamlit  # noqa: F401
import torch

from core import settings

SETTING_PROBLEMS: list[str] = []  # LAB_* values the server could not use; ui.models.banner shows them on every page


def setting(read: Callable[[], int], default: int) -> int:
    """`read()` (a core.settings reader), or `default` when the operator's value cannot be used (kept to be shown)."""
    try:
        return read()
    except settings.SettingError as e:
        SETTING_PROBLEMS.append(f"{e}. Using {default} until the server restarts.")
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
