"""Browser time of a widget move on Score geometry, Masks and the Attention inspector, until the page settles.

Run:  .venv/bin/python bench/bench_browser.py [--repeats 10]

It serves the lab the way tests/e2e does (tests/e2e/conftest.py's `streamlit_server`: `streamlit run app.py
--server.headless true` on a free port in its own process group, stopped at the end) and drives Debian's
Chromium (/usr/bin/chromium, or CHROMIUM_PATH) through Playwright with `executable_path` and the offline
CHROMIUM_ARGS. conftest.py is imported, not copied: importing it only defines functions and fixtures (it has
no import-time side effects), and `pytest.fail` inside it is an ordinary exception here.

Per page: open it and wait until it is idle (conftest's `open_page`), make one warm-up move, then `--repeats`
moves alternating between two values. One move is timed from the key press (a slider: ArrowRight or ArrowLeft
on its focused thumb, so Streamlit's own debounce of key presses is included) or the click on a selectbox
option, until the page has settled: the text of its chart captions (each chart's one-line summary, which names
the numbers drawn) differs from before the move, Streamlit's script state is `notRunning`, no running
indicator, stale element or skeleton is shown, and every Plotly chart has drawn its SVG (conftest's idle check),
polled every 10 ms. p50 and p95 are printed per page in ms.

The widgets: Score geometry's "Sequence length T" slider (geo_T), Masks' "Length of sequence 0" slider
(mask_len0), and the inspector's "Head to enlarge" selectbox (insp_head): that page has no slider.
Nothing passes or fails on time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from conftest import _APP_IDLE_JS, CHROMIUM_ARGS, VIEWPORT, chromium_path, open_page, streamlit_server  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

POLL_MS = 10
TIMEOUT_S = 60
_SETTLED_JS = (
    "(before) => { const text = [...document.querySelectorAll('[data-testid=\"stCaptionContainer\"]')]"
    ".map(e => e.textContent).join('\\n'); return text !== before && (" + _APP_IDLE_JS + ")(); }"
)
_CAPTIONS_JS = (
    "() => [...document.querySelectorAll('[data-testid=\"stCaptionContainer\"]')].map(e => e.textContent).join('\\n')"
)


@dataclass(frozen=True)
class Move:
    url: str
    title: str
    kind: str  # "slider" or "selectbox"
    key: str
    options: tuple[str, str] = ("", "")  # selectbox: the two options alternated


MOVES = (
    Move("/score_geometry", "Score geometry", "slider", "geo_T"),
    Move("/masks", "Masks", "slider", "mask_len0"),
    Move("/inspector", "Attention inspector", "selectbox", "insp_head", ("1", "0")),
)


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def move_once(page, move: Move, i: int) -> float:
    """One move of the widget; seconds until the page settled."""
    before = page.evaluate(_CAPTIONS_JS)
    if move.kind == "slider":
        thumb = page.locator(f".st-key-{move.key}").get_by_role("slider")
        thumb.focus()
        start = time.perf_counter()
        thumb.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
    else:
        page.locator(f".st-key-{move.key}").get_by_role("combobox").click()
        option = page.get_by_role("option", name=move.options[i % 2], exact=True)
        start = time.perf_counter()
        option.click()
    deadline = start + TIMEOUT_S
    while not page.evaluate(_SETTLED_JS, before):
        if time.perf_counter() > deadline:
            raise SystemExit(f"{move.title}: the page did not settle within {TIMEOUT_S} s")
        page.wait_for_timeout(POLL_MS)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="timed moves per page (default 10)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-browser-") as tmp, streamlit_server(Path(tmp)) as server:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            context = browser.new_context(viewport=VIEWPORT, reduced_motion="reduce", service_workers="block")
            page = context.new_page()
            open_page(page, server.url, "/")  # the first run imports torch: not timed
            print(f"{'page':<22} {'widget moved':<20} {'p50 ms':>8} {'p95 ms':>8}   (n={args.repeats})")
            rows = []
            for move in MOVES:
                open_page(page, server.url, move.url)
                move_once(page, move, 0)  # warm-up: to the second value (the timed moves alternate from there)
                times = [1000 * move_once(page, move, i) for i in range(1, args.repeats + 1)]
                rows.append((move, percentile(times, 0.5), percentile(times, 0.95)))
                print(
                    f"{move.title:<22} {move.kind + ' ' + move.key:<20} {rows[-1][1]:8.0f} {rows[-1][2]:8.0f}",
                    flush=True,
                )
            context.close()
            browser.close()
    print(f"mean of p50 {statistics.mean(r[1] for r in rows):.0f} ms; goal under 1000 ms per move")


if __name__ == "__main__":
    main()
