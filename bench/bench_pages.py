"""Server-side rerun time of every lab page after a widget change, measured with streamlit.testing.v1.AppTest.

Run:  .venv/bin/python bench/bench_pages.py [--repeats 20] [--pages masks,inspector] [--modes warm,cold]
                                           [--before [REF]] [--root DIR] [--json]

Before and after in one run: `--before REF` measures REF's tree (a temporary git worktree, bench/before_after.py;
bare `--before` is 7a68661, where issue 26 started) and then this tree, each in a fresh process with the same
arguments, and prints one table: per page and mode, p50 and p95 on both sides and after/before. `--root DIR`
measures the app of another checkout (what `--before` does for each side); `--json` prints one JSON object.

Environment: LAB_WARMUP=0 (the server warm-up thread of ui/warmup.py would try to reach a lab on 8501 and print
its failures), and the runs, registry, class and telemetry stores in a temporary folder (unless set), so both
sides see what a fresh server shows.

What it measures, per page of app.py's navigation (views/*.py, in navigation order):
- The page is opened as tests/apptest.py's `open_page` does (run app.py, switch to the page), with the
  shipped default bundle selected in the sidebar (what a fresh server shows). torch runs on one thread,
  like the server (ui.startup sets LAB_TORCH_THREADS, default 1).
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
fragment function, not app.py or the rest of the page. AppTest's own `run()` never does that (a documented
blind spot, TESTING.md). This bench changes the widget with tests/apptest.py's `change_as_browser` (this tree's,
whichever tree is measured), which reruns only the widget's fragment when it has one, as the browser's request
would, and keeps the full page's element tree for the next change; the Mode column says "fragment" or "full
script". Only the run itself is timed (AppTest's `_run`, where both kinds of rerun go), not the element
signatures `change_as_browser` returns.

Compiled scripts: a server compiles app.py and each page once (its ScriptCache lives as long as the server);
AppTest makes a new ScriptCache for every run, so it recompiles (and re-applies magic to) both scripts on every
rerun, 10-15 ms here that no browser ever waits for. The bench gives AppTest one ScriptCache for the whole
process, as a server has; `--recompile` keeps AppTest's own behaviour (the figures the brief started from).

Garbage collection: after every run a server's ScriptRunner calls gc.collect(2) (`runner.postScriptGC`, on by
default) while it holds the GIL, before the session can take the next request; AppTest's LocalScriptRunner
leaves that out. The bench does it after each rerun, inside the timed span, when the option is on.

Caches: in mode "warm" `st.cache_data` entries stay between changes, as on a server, so alternating values hit
the cache after the warm-up once each. Mode "cold" clears st.cache_data (never st.cache_resource, the model
load) before every timed change: the time of a value nobody asked for yet. `--modes warm,cold` measures both,
each page opened afresh per mode; `--cold` is `--modes cold`.

Nothing passes or fails on time: this prints figures. The machine may be shared: compare runs made close
together.
"""

from __future__ import annotations

import argparse
import ast
import gc
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "bench"))

from before_after import add_side_arguments, both_sides, side_by_side, strip_before, use_root  # noqa: E402

MODES = ("warm", "cold")


@dataclass(frozen=True)
class Change:
    """The widget a bench changes on a page: AppTest's accessor (slider, selectbox, ...), its key, two values."""

    kind: str
    key: str
    values: tuple


# The page's main interactive widget (bench/bench_browser.py moves the same ones). Pages not listed are timed on a
# plain rerun.
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


def pages(app: Path) -> list[tuple[str, str]]:
    """(stem, title) of every st.Page("views/x.py", title=...) in `app`, in navigation order."""
    tree = ast.parse(app.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if isinstance(node, ast.Call) and getattr(func, "attr", None) == "Page" and node.args:
            script = node.args[0].value
            title = next((k.value.value for k in node.keywords if k.arg == "title"), Path(script).stem)
            found.append((node.lineno, node.col_offset, Path(script).stem, title))
    return [(stem, title) for _, _, stem, title in sorted(found)]


def fresh_stores() -> None:
    """Runs, registry, class and telemetry stores in a temporary folder, unless the caller set them: a local
    registry would change the model the pages select, and a bench must not write into a checkout."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    os.environ.setdefault("LAB_RUNS_DIR", str(tmp / "runs"))
    os.environ.setdefault("LAB_REGISTRY_DIR", str(tmp / "registry"))
    os.environ.setdefault("LAB_CLASS_DB", str(tmp / "class.db"))
    os.environ.setdefault("LAB_TELEMETRY_DB", str(tmp / "telemetry.db"))


def harness():
    """This tree's tests/apptest.py, loaded by its path: the same way of rerunning on both sides of a comparison,
    while the `ui` it imports is the measured tree's (first on sys.path)."""
    spec = importlib.util.spec_from_file_location("bench_apptest", HERE / "tests" / "apptest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _numbers():
    """This tree's core/numbers.py, loaded by its path: every bench summarises both sides of a comparison by the
    lab's one percentile rule (nearest rank), while the `core` on sys.path is the measured tree's and may predate
    it."""
    spec = importlib.util.spec_from_file_location("bench_numbers", HERE / "core" / "numbers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


percentile = _numbers().percentile  # percentile(values, q): nearest rank, q in (0, 100]


def share_script_cache() -> None:
    """One ScriptCache for every AppTest run of this process, as a server keeps one (see the docstring)."""
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    shared = ScriptCache()
    for module in (app_test, local_script_runner, script_runner):
        if hasattr(module, "ScriptCache"):
            module.ScriptCache = lambda: shared


def open_page(app: Path, stem: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(app), default_timeout=300)
    at.run()
    at.switch_page(f"views/{stem}.py").run()
    _check(at, stem)
    return at


def _check(at, stem: str) -> None:
    if at.exception:
        raise SystemExit(f"{stem}: the page raised: {[e.value for e in at.exception]}")


def post_script_gc() -> None:
    """What ScriptRunner._on_script_finished does after every run on a server (LocalScriptRunner does not)."""
    from streamlit import config

    if config.get_option("runner.postScriptGC"):
        gc.collect(2)


def timed_run(at) -> list[float]:
    """Time every script run of `at` from now on: AppTest's `_run` (both at.run() and a fragment rerun go through
    it) plus the post-script gc. Returns the list the elapsed seconds are appended to."""
    spans: list[float] = []
    plain = at._run

    def run(*args, **kwargs):
        start = time.perf_counter()
        out = plain(*args, **kwargs)
        post_script_gc()
        spans.append(time.perf_counter() - start)
        return out

    at._run = run  # an instance attribute: ElementTree.run calls at._run
    return spans


def clear_cache_data() -> None:
    """st.cache_data.clear() without its warning about the missing runtime (AppTest has none between runs)."""
    import logging

    import streamlit as st

    logging.disable(logging.WARNING)
    try:
        st.cache_data.clear()
    finally:
        logging.disable(logging.NOTSET)


def bench_page(app: Path, stem: str, repeats: int, cold: bool, apptest) -> tuple[str, str, list[float]]:
    """(widget changed, mode, seconds of each timed rerun) of one page."""
    at = open_page(app, stem)
    change = None if stem in DEFAULT_ONLY else WIDGETS.get(stem)
    at.run()  # warm-up rerun
    _check(at, stem)
    spans = timed_run(at)
    if change is None:
        for _ in range(repeats):
            if cold:
                clear_cache_data()
            at.run()
        _check(at, stem)
        return "(plain rerun)", "full script", spans[-repeats:]
    fragment_id = apptest.fragment_of(at, apptest.widget(at, change.kind, change.key))
    apptest.change_as_browser(at, change.kind, change.key, change.values[0])  # warm-up: away from the default
    for i in range(repeats):
        if cold:
            clear_cache_data()
        apptest.change_as_browser(at, change.kind, change.key, change.values[(i + 1) % 2])  # default, other, ...
    _check(at, stem)
    return f"{change.kind} {change.key}", "fragment" if fragment_id else "full script", spans[-repeats:]


def measure(root: Path, wanted: set[str], modes: list[str], repeats: int, recompile: bool, show) -> dict:
    """Every wanted page of `root`'s app in every mode; `show(row)` is called as each row is done."""
    os.environ.setdefault("LAB_TORCH_THREADS", "1")  # as the server (ui.startup)
    os.environ["LAB_WARMUP"] = "0"  # no server to warm here (see the docstring)
    fresh_stores()
    from streamlit import config, logger

    apptest = harness()  # imports AppTest, whose modules make loggers of their own: quieten them all after it
    config.set_option("logger.level", "error")  # a config reload (AppTest's first run) sets the level from it
    logger.set_log_level("error")  # AppTest's bare-mode warnings
    if not recompile:
        share_script_cache()

    import torch

    torch.set_num_threads(1)
    app = root / "app.py"
    unknown = wanted - {stem for stem, _ in pages(app)}
    if unknown:
        raise SystemExit(f"--pages: no page {', '.join(sorted(unknown))} in {app}; give stems of views/*.py")
    rows = []
    for stem, title in pages(app):
        if wanted and stem not in wanted:
            continue
        row: dict = {"page": title}
        for mode in modes:
            widget, kind, times = bench_page(app, stem, repeats, mode == "cold", apptest)
            ms = [1000 * t for t in times]
            row.update({"widget": widget, "mode": kind})
            row.update({f"{mode} p50": percentile(ms, 50), f"{mode} p95": percentile(ms, 95)})
        rows.append(row)
        show(row)
    caches = " and ".join({"warm": "warm", "cold": "cleared before each change"}[m] for m in modes)
    scripts = "recompiled every run (plain AppTest)" if recompile else "compiled once (as a server)"
    notes = f"torch threads {torch.get_num_threads()}; st.cache_data {caches}; scripts {scripts}; n={repeats}"
    return {"bench": "pages", "root": str(root), "modes": modes, "rows": rows, "notes": notes}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed widget changes per page (default 20)")
    parser.add_argument("--pages", default="", help="comma-separated page stems (default: every page)")
    parser.add_argument("--modes", default="warm", help="warm, cold or warm,cold (default warm; see the docstring)")
    parser.add_argument("--cold", action="store_true", help="the same as --modes cold")
    parser.add_argument("--recompile", action="store_true", help="let AppTest recompile the scripts every run")
    add_side_arguments(parser)
    args = parser.parse_args(argv)
    modes = ["cold"] if args.cold else [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODES for m in modes) or args.repeats < 1:
        parser.error("--modes takes warm, cold or warm,cold; --repeats at least 1")
    numbers = [f"{m} {q}" for m in modes for q in ("p50", "p95")]
    if args.before:
        before, after = both_sides(Path(__file__).resolve(), args.before, strip_before(argv))
        print(side_by_side(before, after, ["page", "widget"], numbers, texts=["mode"]))
        print(f"ms; before: {args.before}; after: this tree; {after['notes']}")
        b, a = (statistics.mean(r[numbers[0]] for r in side["rows"]) for side in (before, after))
        print(f"mean of {numbers[0]}: before {b:.1f} ms, after {a:.1f} ms")
        return
    root = use_root(args.root)
    wanted = {p for p in args.pages.split(",") if p}
    if args.json:
        import json

        print(json.dumps(measure(root, wanted, modes, args.repeats, args.recompile, lambda row: None)))
        return
    head = "".join(f" {n + ' ms':>12}" for n in numbers)
    print(f"{'page':<28} {'widget changed':<26} {'mode':<12}{head}", flush=True)

    def show(row: dict) -> None:
        cells = "".join(f" {row[n]:12.1f}" for n in numbers)
        print(f"{row['page']:<28} {row['widget']:<26} {row['mode']:<12}{cells}", flush=True)

    result = measure(root, wanted, modes, args.repeats, args.recompile, show)
    print(f"{result['notes']}; mean of {numbers[0]} {statistics.mean(r[numbers[0]] for r in result['rows']):.1f} ms")


if __name__ == "__main__":
    main()
