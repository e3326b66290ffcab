"""Server-side rerun time of every lab page after a widget change, measured with streamlit.testing.v1.AppTest.

Run:  .venv/bin/python bench/bench_pages.py [--repeats 20] [--pages masks,inspector] [--cold]

What it measures, per page of app.py's navigation (views/*.py, in navigation order):
- The page is opened as tests/apptest.py's `open_page` does (run app.py, switch to the page), with the
  shipped default bundle selected in the sidebar (what a fresh server shows). torch runs on one thread,
  like the server (ui.models sets LAB_TORCH_THREADS, default 1).
- Warm-up: that first run, one plain rerun, and one change of the page's widget (below, WIDGETS: from its
  default, the second value, to the first), so the imports, the model load (st.cache_resource) and the first
  computation of both values are not counted.
- Then `--repeats` changes of that widget, alternating between the two values (back to the default first)
  so that every rerun sees a new value (a rerun with an unchanged value would only redraw). Each change is
  timed from the request to the end of the rerun (time.perf_counter around the run, which includes AppTest's
  parsing of the returned elements, and the garbage collection below).
  p50 and p95 of those times are printed, in ms, with the widget that was changed.
- Pages without a widget to change (Start here; Checkpoint, whose answers sit in forms that rerun only when
  submitted), and Training and Release (whose widgets start runs or
  change the registry), are timed on a plain rerun of their default state.

What a browser triggers: a widget inside an `st.fragment` makes the browser send a rerun request carrying
that fragment's id (AppSession turns it into RerunData(fragment_id=...)), and the server runs only the
fragment function, not app.py or the rest of the page. AppTest's own `run()` never does that: its
LocalScriptRunner builds RerunData without a fragment id, so the whole script reruns (a documented blind
spot, TESTING.md). This bench therefore looks up the changed widget's fragment id in the session's widget
metadata and, when it has one, reruns with RerunData(fragment_id=...) as the browser's request would; the
Mode column says "fragment" or "full script". The elements a fragment run returns are only the fragment's;
the bench keeps the full page's element tree for the next change (as the browser keeps the page).

Compiled scripts: a server compiles app.py and each page once (its ScriptCache lives as long as the server);
AppTest makes a new ScriptCache for every run, so it recompiles (and re-applies magic to) both scripts on every
rerun, 10-15 ms here that no browser ever waits for. The bench gives AppTest one ScriptCache for the whole
process, as a server has; `--recompile` keeps AppTest's own behaviour (the figures the brief started from).

Garbage collection: after every run a server's ScriptRunner calls gc.collect(2) (`runner.postScriptGC`, on by
default) while it holds the GIL, before the session can take the next request; AppTest's LocalScriptRunner
leaves that out. The bench does it after each rerun, inside the timed span, when the option is on.

Caches: `st.cache_data` entries stay between changes, as on a server, so alternating values hit the cache
after the warm-up once each. `--cold` clears st.cache_data (never st.cache_resource, the model load) before
every timed change: the time of a value nobody asked for yet.

Nothing passes or fails on time: this prints figures. The machine may be shared: compare runs made close
together.
"""

from __future__ import annotations

import argparse
import ast
import functools
import gc
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LAB_TORCH_THREADS", "1")


@dataclass(frozen=True)
class Change:
    """The widget a bench changes on a page: AppTest's accessor (slider, selectbox, ...), its key, two values."""

    kind: str
    key: str
    values: tuple


# The page's main interactive widget. Pages not listed are timed on a plain rerun.
WIDGETS = {
    "score_geometry": Change("slider", "geo_T", (6, 5)),
    "masks": Change("slider", "mask_len0", (5, 6)),
    "read_row": Change("slider", "row_t", (2, 3)),
    "temperature": Change("slider", "temperature", (1.5, 1.0)),
    "embeddings": Change("selectbox", "emb_head", (1, 0)),
    "rope": Change("slider", "rope_m", (6, 5)),
    "autocomplete": Change("slider", "ac_temperature", (0.8, 1.0)),
    "inspector": Change("selectbox", "insp_head", (1, 0)),
}
DEFAULT_ONLY = {"training", "release"}  # measured on their default rerun only (brief)


def pages() -> list[tuple[str, str]]:
    """(stem, title) of every st.Page("views/x.py", title=...) in app.py, in navigation order."""
    tree = ast.parse(APP.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if isinstance(node, ast.Call) and getattr(func, "attr", None) == "Page" and node.args:
            script = node.args[0].value
            title = next((k.value.value for k in node.keywords if k.arg == "title"), Path(script).stem)
            found.append((node.lineno, node.col_offset, Path(script).stem, title))
    return [(stem, title) for _, _, stem, title in sorted(found)]


def share_script_cache() -> None:
    """One ScriptCache for every AppTest run of this process, as a server keeps one (see the docstring)."""
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    shared = ScriptCache()
    for module in (app_test, local_script_runner, script_runner):
        if hasattr(module, "ScriptCache"):
            module.ScriptCache = lambda: shared


def open_page(stem: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=300)
    at.run()
    at.switch_page(f"views/{stem}.py").run()
    _check(at, stem)
    return at


def _check(at, stem: str) -> None:
    if at.exception:
        raise SystemExit(f"{stem}: the page raised: {[e.value for e in at.exception]}")


def _widget(at, change: Change):
    return getattr(at, change.kind)(key=change.key)


def fragment_of(at, widget) -> str | None:
    """The id of the st.fragment the widget was drawn in (None: outside any fragment), from the session's
    widget metadata: what the browser sends with the rerun request of a change of this widget."""
    metadata = at._session_state._state._new_widget_state.widget_metadata.get(widget.id)
    return metadata.fragment_id if metadata is not None else None


def post_script_gc() -> None:
    """What ScriptRunner._on_script_finished does after every run on a server (LocalScriptRunner does not)."""
    from streamlit import config

    if config.get_option("runner.postScriptGC"):
        gc.collect(2)


def rerun(at, widget, value, fragment_id: str | None) -> float:
    """Set `widget` to `value` and rerun as the browser would; the elapsed seconds."""
    from streamlit.testing.v1 import local_script_runner

    widget.set_value(value)
    if fragment_id is None:
        start = time.perf_counter()
        at.run()
        post_script_gc()
        return time.perf_counter() - start
    full_tree = at._tree
    states = full_tree.get_widget_states()  # every widget of the page, as the browser sends them
    plain = local_script_runner.RerunData
    local_script_runner.RerunData = functools.partial(plain, fragment_id=fragment_id)
    try:
        start = time.perf_counter()
        at._run(states)
        post_script_gc()
        elapsed = time.perf_counter() - start
    finally:
        local_script_runner.RerunData = plain
    fragment_tree = at._tree
    if fragment_tree.exception:
        raise SystemExit(f"fragment rerun raised: {[e.value for e in fragment_tree.exception]}")
    at._tree = full_tree  # the browser keeps the page and replaces the fragment's part
    return elapsed


def clear_cache_data() -> None:
    """st.cache_data.clear() without its warning about the missing runtime (AppTest has none between runs)."""
    import logging

    import streamlit as st

    logging.disable(logging.WARNING)
    try:
        st.cache_data.clear()
    finally:
        logging.disable(logging.NOTSET)


def percentile(xs: list[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (numpy's default)."""
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def bench_page(stem: str, repeats: int, cold: bool) -> tuple[str, str, list[float]]:

    at = open_page(stem)
    change = None if stem in DEFAULT_ONLY else WIDGETS.get(stem)
    if change is None:
        at.run()  # warm-up rerun
        _check(at, stem)
        times = []
        for _ in range(repeats):
            if cold:
                clear_cache_data()
            start = time.perf_counter()
            at.run()
            post_script_gc()
            times.append(time.perf_counter() - start)
        _check(at, stem)
        return "(plain rerun)", "full script", times
    at.run()
    widget = _widget(at, change)
    fragment_id = fragment_of(at, widget)
    rerun(at, widget, change.values[0], fragment_id)  # warm-up change: away from the default, values[1]
    times = []
    for i in range(repeats):
        if cold:
            clear_cache_data()
        widget = _widget(at, change)
        times.append(rerun(at, widget, change.values[(i + 1) % 2], fragment_id))  # default, other, default, ...
    _check(at, stem)
    return f"{change.kind} {change.key}", "fragment" if fragment_id else "full script", times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed widget changes per page (default 20)")
    parser.add_argument("--pages", default="", help="comma-separated page stems (default: every page)")
    parser.add_argument("--cold", action="store_true", help="clear st.cache_data before every timed change")
    parser.add_argument("--recompile", action="store_true", help="let AppTest recompile the scripts every run")
    args = parser.parse_args(argv)
    from streamlit import logger

    logger.set_log_level("error")  # AppTest's bare-mode warnings
    if not args.recompile:
        share_script_cache()

    import torch

    torch.set_num_threads(1)
    wanted = {p for p in args.pages.split(",") if p}
    rows = []
    print(f"{'page':<28} {'widget changed':<26} {'mode':<12} {'p50 ms':>8} {'p95 ms':>8}   (n={args.repeats})")
    for stem, title in pages():
        if wanted and stem not in wanted:
            continue
        widget, mode, times = bench_page(stem, args.repeats, args.cold)
        ms = [1000 * t for t in times]
        rows.append((title, widget, mode, percentile(ms, 0.5), percentile(ms, 0.95)))
        print(f"{title:<28} {widget:<26} {mode:<12} {rows[-1][3]:8.1f} {rows[-1][4]:8.1f}", flush=True)
    caches = "cleared before each change" if args.cold else "warm"
    scripts = "recompiled every run (plain AppTest)" if args.recompile else "compiled once (as a server)"
    print(
        f"torch threads {torch.get_num_threads()}; st.cache_data {caches}; scripts {scripts}; "
        f"mean of p50 {statistics.mean(r[3] for r in rows):.1f} ms"
    )


if __name__ == "__main__":
    main()
