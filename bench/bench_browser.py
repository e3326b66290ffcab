"""Browser time of a widget move on every lab page with a widget, until the page settles; and what the move did to
its charts' DOM.

Run:  .venv/bin/python bench/bench_browser.py [--repeats 10] [--pages masks,inspector]
                                             [--before [REF]] [--root DIR] [--json]

Before and after in one run: `--before REF` measures REF's tree (a temporary git worktree, bench/before_after.py;
bare `--before` is 7a68661, where issue 26 started), then this tree, each in a process of its own with its own
server and browser, and prints one table with both sides and after/before per page. `--root DIR` serves another
checkout's app (what `--before` does for each side); `--json` prints one JSON object.

It serves the lab the way tests/e2e does (tests/e2e/conftest.py's `streamlit_server`: `streamlit run app.py
--server.headless true` on a free port in its own process group, stopped at the end; with `--root` its app.py,
from its folder) and drives Debian's Chromium (/usr/bin/chromium, or CHROMIUM_PATH) through Playwright with
`executable_path` and the offline CHROMIUM_ARGS. conftest.py (this tree's) is imported, not copied: importing it
only defines functions and fixtures, and `pytest.fail` inside it is an ordinary exception here.

The pages and widgets: bench/bench_pages.py's WIDGETS (the server-side bench changes the same ones), each checked
to be on the page as a slider or a selectbox. Per page: open it and wait until it is idle (conftest's `open_page`),
make one warm-up move, then `--repeats` moves alternating between two values. A slider is moved with ArrowRight or
ArrowLeft on its focused thumb (one step; so Streamlit's own debounce of key presses is included), first towards
WIDGETS' first value; a selectbox by a click on the option labelled with WIDGETS' values in turn (first value for
the warm-up). One move is timed from the key press or the click until the page has settled: the text of its
markdown outside the moved widget (chart captions, each chart's one-line summary naming the numbers drawn, and
the other texts and labels) differs from before the move, Streamlit's script state is `notRunning`, no running
indicator, stale element or skeleton is shown, and every Plotly chart has drawn its SVG (conftest's idle check),
polled every 10 ms. p50 and p95 are printed per page in ms. (Captions alone are not enough: at 7a68661 the
inspector's only chart before a prediction is the grid, whose caption does not name the enlarged head; its
question's text does.)

Also per page, after the last move has settled: the number of DOM nodes under each `.js-plotly-plot` element (what
the browser lays out and paints for every chart), and how many of those plot elements a move re-created rather
than updated in place: before each move a JS property is set on every `.js-plotly-plot` element; after it settles
an element without it is new (the most over the timed moves, out of the charts on the page).
Nothing passes or fails on time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests" / "e2e"))
sys.path.insert(0, str(HERE / "bench"))

import conftest  # noqa: E402
from before_after import add_side_arguments, both_sides, side_by_side, strip_before, use_root  # noqa: E402
from bench_pages import WIDGETS, pages, percentile  # noqa: E402
from conftest import _APP_IDLE_JS, CHROMIUM_ARGS, VIEWPORT, chromium_path, open_page, streamlit_server  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

POLL_MS = 10
TIMEOUT_S = 60
# The page's rendered markdown (captions, texts, alerts, labels) outside the moved widget: what a rerun's new numbers
# change. Not the widget's own (a slider's value label changes the moment the key is pressed, before any rerun), nor
# the whole page's text (closing a selectbox's list changes it too).
_TEXT_JS = (
    "(key) => [...document.querySelectorAll('[data-testid=\"stMarkdownContainer\"]')]"
    ".filter(e => !e.closest('.st-key-' + key)).map(e => e.textContent).join('\\n')"
)
_SETTLED_JS = "([key, before]) => (" + _TEXT_JS + ")(key) !== before && (" + _APP_IDLE_JS + ")()"
_MARK_JS = "(token) => document.querySelectorAll('.js-plotly-plot').forEach(e => { e.__benchMark = token; })"
_RECREATED_JS = (
    "(token) => [...document.querySelectorAll('.js-plotly-plot')].filter(e => e.__benchMark !== token).length"
)
_NODES_JS = "() => [...document.querySelectorAll('.js-plotly-plot')].map(e => e.getElementsByTagName('*').length)"


@dataclass(frozen=True)
class Move:
    stem: str
    title: str
    kind: str  # "slider" or "selectbox"
    key: str
    values: tuple  # WIDGETS' two values: the warm-up goes towards the first

    @property
    def url(self) -> str:
        return f"/{self.stem}"  # st.Page's default url_path: the script's stem


def moves(root: Path) -> list[Move]:
    """The page/widget pairs of bench_pages.WIDGETS, in `root`'s navigation order."""
    return [
        Move(stem, title, WIDGETS[stem].kind, WIDGETS[stem].key, WIDGETS[stem].values)
        for stem, title in pages(root / "app.py")
        if stem in WIDGETS
    ]


def check_widget(page, move: Move) -> None:
    """Stop with a clear message unless the page has the widget as the kind WIDGETS says."""
    role = {"slider": "slider", "selectbox": "combobox"}[move.kind]
    if page.locator(f".st-key-{move.key}").get_by_role(role).count() != 1:
        raise SystemExit(f"{move.title}: no {move.kind} keyed {move.key!r} on {move.url}; update bench_pages.WIDGETS")


def move_once(page, move: Move, i: int) -> tuple[float, int]:
    """Move `i` of the widget (0: the warm-up); (seconds until the page settled, plot elements it re-created)."""
    before = page.evaluate(_TEXT_JS, move.key)
    page.evaluate(_MARK_JS, str(i))
    if move.kind == "slider":
        thumb = page.locator(f".st-key-{move.key}").get_by_role("slider")
        thumb.focus()
        towards_first = move.values[0] > move.values[1]  # the warm-up moves towards values[0], then back and forth
        key = "ArrowRight" if towards_first == (i % 2 == 0) else "ArrowLeft"
        start = time.perf_counter()
        thumb.press(key)
    else:
        page.locator(f".st-key-{move.key}").get_by_role("combobox").click()
        option = page.get_by_role("option", name=str(move.values[i % 2]), exact=True)
        start = time.perf_counter()
        option.click()
    deadline = start + TIMEOUT_S
    while not page.evaluate(_SETTLED_JS, [move.key, before]):
        if time.perf_counter() > deadline:
            raise SystemExit(
                f"{move.title}: the page did not settle within {TIMEOUT_S} s (its captions never changed?)"
            )
        page.wait_for_timeout(POLL_MS)
    elapsed = time.perf_counter() - start
    return elapsed, page.evaluate(_RECREATED_JS, str(i))


def measure(root: Path, wanted: set[str], repeats: int, show) -> dict:
    """Every wanted page's move on a server of `root`'s app; `show(row)` is called as each row is done."""
    unknown = wanted - {move.stem for move in moves(root)}
    if unknown:
        names = ", ".join(sorted(unknown))
        raise SystemExit(f"--pages: no page with a widget to move (bench_pages.WIDGETS) named {names}")
    conftest.ROOT = root  # streamlit_server runs ROOT / "app.py" from ROOT (read when it is called)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-browser-") as tmp, streamlit_server(Path(tmp)) as server:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            context = browser.new_context(viewport=VIEWPORT, reduced_motion="reduce", service_workers="block")
            page = context.new_page()
            open_page(page, server.url, "/")  # the first run imports torch: not timed
            for move in moves(root):
                if wanted and move.stem not in wanted:
                    continue
                open_page(page, server.url, move.url)
                check_widget(page, move)
                move_once(page, move, 0)  # warm-up: to the first value (the timed moves alternate from there)
                timed = [move_once(page, move, i) for i in range(1, repeats + 1)]
                ms = [1000 * t for t, _ in timed]
                nodes = page.evaluate(_NODES_JS)
                row = {
                    "page": move.title,
                    "widget": f"{move.kind} {move.key}",
                    "p50": percentile(ms, 50),
                    "p95": percentile(ms, 95),
                    "charts": len(nodes),
                    "DOM nodes": sum(nodes),
                    "nodes per chart": "+".join(map(str, nodes)) or "-",
                    "re-created": max(n for _, n in timed),
                }
                rows.append(row)
                show(row)
            context.close()
            browser.close()
    return {"bench": "browser", "root": str(root), "rows": rows, "notes": f"n={repeats}; goal under 1000 ms per move"}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="timed moves per page (default 10)")
    parser.add_argument("--pages", default="", help="comma-separated page stems (default: every page in WIDGETS)")
    add_side_arguments(parser)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats at least 1")
    if args.before:
        before, after = both_sides(Path(__file__).resolve(), args.before, strip_before(argv))
        numbers = ["p50", "p95", "charts", "DOM nodes", "re-created"]
        print(side_by_side(before, after, ["page", "widget"], numbers, digits=0))
        print(side_by_side(before, after, ["page"], [], texts=["nodes per chart"]))
        print(f"ms; before: {args.before}; after: this tree; {after['notes']}")
        return
    root = use_root(args.root)
    wanted = {p for p in args.pages.split(",") if p}
    if args.json:
        print(json.dumps(measure(root, wanted, args.repeats, lambda row: None)))
        return
    print(f"{'page':<22} {'widget moved':<22} {'p50 ms':>7} {'p95 ms':>7} {'re-created':>10}  DOM nodes per chart")

    def show(row: dict) -> None:
        recreated = f"{row['re-created']}/{row['charts']}"
        print(
            f"{row['page']:<22} {row['widget']:<22} {row['p50']:7.0f} {row['p95']:7.0f} {recreated:>10}  "
            f"{row['nodes per chart']} (total {row['DOM nodes']})",
            flush=True,
        )

    result = measure(root, wanted, args.repeats, show)
    print(f"{result['notes']}; mean of p50 {statistics.mean(r['p50'] for r in result['rows']):.0f} ms")


if __name__ == "__main__":
    main()
