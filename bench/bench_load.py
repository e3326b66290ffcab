"""A class at once: 30 browser sessions on the lab pages while two of them train, against one server.

Run:  .venv/bin/python bench/bench_load.py [--sessions 30] [--trainers 2] [--moves 3] [--budget 900]

It serves the lab the way tests/e2e does (tests/e2e/conftest.py's `streamlit_server`, localhost only, its own
runs, registry and class database in a temporary folder) with the server's own LAB_MAX_TRAINING_RUNS (one run
at a time; `--training-slots` sets it), and drives Debian's Chromium through Playwright's async API: one
browser, one tab per learner (each tab is a Streamlit session of its own; the tabs share one HTTP cache, as a
returning learner's browser has Streamlit's scripts cached).

- Trainers open the Training page and start a 300-step run of the tiny preset on the standard library
  (at most 60 s); the others each open one lab page (round-robin over the pages below) and, once it has
  drawn, move its widget `--moves` times (a slider by arrow key, the inspector's head by its selectbox,
  the Autocomplete prompt by typing and Ctrl+Enter, a suggestion request).
- First paint: from navigation until the page is idle (Streamlit not running, no spinner or stale element,
  every Plotly chart drawn: conftest's idle check); within it, the server's script run (the page's status
  going from running to not running). The rest is the browser: loading Streamlit's and Plotly's JavaScript
  into a fresh context and drawing, on the same cores as the server here, on each learner's own machine in
  a classroom. `--ramp` spreads the learners' arrivals over that many seconds.
  Rerun: from the key press until the text the server
  wrote (markdown and captions, not widget labels) changed, or the script was seen running, and the page is
  idle again.
- The class arrives once the server's warm-up (ui/warmup.py: every lab page's default view computed) has
  finished, as after a teacher opened the lab or `make run` did.
- Errors: a Streamlit exception box on any page, a page that never settles within `--budget` seconds,
  or a traceback in the server's log.
- Isolation: when the runs have finished, every non-trainer session opens the Training page and must
  still read "No run yet in this session", and two learners on Read one row: one checks the predict-first
  question, the other must still be asked.

It prints p50/p95/max of first paint and rerun, the error count and the isolation result. Nothing passes or
fails on time; the whole run is bounded by `--budget`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_browser import percentile  # noqa: E402
from conftest import _APP_IDLE_JS, CHROMIUM_ARGS, chromium_path, streamlit_server  # noqa: E402
from playwright.async_api import async_playwright  # noqa: E402

VIEWPORT = {"width": 1440, "height": 900}  # a laptop screen
# What the server wrote: markdown and captions (a widget's own label and value change in the browser at once).
_TEXT_JS = (
    '() => [...document.querySelectorAll(\'[data-testid="stMarkdownContainer"], [data-testid="stCaptionContainer"]\')]'
    ".filter(e => !e.closest('[data-testid=\"stWidgetLabel\"]')).map(e => e.textContent).join('\\n')"
)
_SETTLED_JS = "(before) => (" + _TEXT_JS + ")() !== before && (" + _APP_IDLE_JS + ")()"
POLL_S = 0.05


@dataclass(frozen=True)
class Lab:
    url: str
    kind: str  # "slider", "selectbox" or "prompt"
    key: str


LABS = (
    Lab("/score_geometry", "slider", "geo_T"),
    Lab("/masks", "slider", "mask_len0"),
    Lab("/read_row", "slider", "row_t"),
    Lab("/temperature", "slider", "temperature"),
    Lab("/rope", "slider", "rope_m"),
    Lab("/inspector", "selectbox", "insp_head"),
    Lab("/autocomplete", "prompt", "ac_prompt"),
    Lab("/embeddings", "selectbox", "emb_head"),
)
PROMPTS = ("import os\n", "def main(", "for i in range(", "class Node:")


@dataclass
class Results:
    first_paint: list[float] = field(default_factory=list)
    first_script: list[float] = field(default_factory=list)  # of a first paint: the server's script run
    rerun: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    isolation: list[str] = field(default_factory=list)  # what one session saw of another


_STATE_JS = "() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState"


async def settle(page, before: str | None, deadline: float) -> bool:
    """Poll until the page is idle; when `before` (the captions before a move) is given, also until the move's
    rerun was seen: the captions changed, or the script was seen running. False at the deadline."""
    seen_run = before is None
    while time.monotonic() < deadline:
        try:
            if not seen_run and await page.evaluate(_STATE_JS) == "running":
                seen_run = True
            done = await page.evaluate(_SETTLED_JS, before) if not seen_run else await page.evaluate(_APP_IDLE_JS)
        except Exception:  # a navigation replaced the document: not idle yet
            done = False
        if done:
            return True
        await asyncio.sleep(POLL_S)
    return False


async def idle_twice(page, deadline: float) -> bool:
    """Idle on two polls in a row: a rerun may start just after the first idle poll."""
    if not await settle(page, None, deadline):
        return False
    await asyncio.sleep(0.15)
    return await settle(page, None, deadline)


async def exceptions(page) -> int:
    return await page.locator('[data-testid="stException"]').count()


async def open_timed(page, base: str, url: str, results: Results, deadline: float, who: str) -> bool:
    """Open `url`; time the first paint and, within it, the server's first script run (from the script state
    'running' to 'notRunning', as the page's own status reports it)."""
    start = time.monotonic()
    await page.goto(base + url, wait_until="domcontentloaded")
    ran_from = ran_to = None
    while time.monotonic() < deadline and ran_to is None:
        try:
            state = await page.evaluate(_STATE_JS)
        except Exception:
            state = None
        if state == "running" and ran_from is None:
            ran_from = time.monotonic()
        elif state == "notRunning" and ran_from is not None:
            ran_to = time.monotonic()
        elif state == "notRunning" and await page.locator('[data-testid="stElementContainer"]').count():
            ran_to = time.monotonic()  # the whole run fell between two polls: its length is not known
        await asyncio.sleep(POLL_S)
    if ran_to is None or not await idle_twice(page, deadline):
        results.errors.append(f"{who}: {url} did not finish its first run before the budget ran out")
        return False
    results.first_paint.append(time.monotonic() - start)
    if ran_from is not None:
        results.first_script.append(ran_to - ran_from)
    return True


async def move(page, lab: Lab, i: int, results: Results, deadline: float, who: str) -> None:
    before = await page.evaluate(_TEXT_JS)
    if lab.kind == "slider":
        thumb = page.locator(f".st-key-{lab.key}").get_by_role("slider")
        await thumb.focus()
        start = time.monotonic()
        await thumb.press("ArrowLeft" if i % 2 == 0 else "ArrowRight")
    elif lab.kind == "selectbox":
        await page.locator(f".st-key-{lab.key}").get_by_role("combobox").click()
        option = page.get_by_role("option", name=("1", "0")[i % 2], exact=True)
        start = time.monotonic()
        await option.click()
    else:
        box = page.locator(f".st-key-{lab.key}").locator("textarea")
        await box.fill(PROMPTS[i % len(PROMPTS)])
        start = time.monotonic()
        await box.press("Control+Enter")
    if not await settle(page, before, deadline):
        results.errors.append(f"{who}: {lab.url} did not settle after move {i}")
        return
    results.rerun.append(time.monotonic() - start)


async def learner(context, base: str, n: int, args, results: Results, deadline: float):
    lab = LABS[n % len(LABS)]
    await asyncio.sleep(n * args.ramp / max(1, args.sessions - args.trainers))  # arrivals spread over --ramp s
    page = await context.new_page()
    who = f"learner {n}"
    try:
        if await open_timed(page, base, lab.url, results, deadline, who):
            for i in range(args.moves):
                await move(page, lab, i, results, deadline, who)
        if await exceptions(page):
            results.errors.append(f"{who}: an exception box on {lab.url}")
    except Exception as err:  # a crashed session is an error, not the end of the benchmark
        results.errors.append(f"{who}: {type(err).__name__}: {err}")
    return page


async def trainer(context, base: str, n: int, results: Results, deadline: float):
    page = await context.new_page()
    who = f"trainer {n}"
    try:
        if await open_timed(page, base, "/training?train_iters=300&train_seconds=60", results, deadline, who):
            await page.get_by_role("button", name="Start training").click()
            await asyncio.sleep(1.0)
            if await exceptions(page):
                results.errors.append(f"{who}: an exception box after Start training")
    except Exception as err:
        results.errors.append(f"{who}: {type(err).__name__}: {err}")
    return page


async def goto_in_session(page, title: str, deadline: float) -> None:
    """Switch page through the sidebar's navigation: the same Streamlit session (a reload would start a new one)."""
    await page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
    await asyncio.sleep(0.3)
    await idle_twice(page, deadline)


async def check_isolation(pages, results: Results, deadline: float) -> None:
    """In their own sessions: no learner sees a trainer's run; one learner's checked prediction does not answer
    another's."""
    for n, page in pages:
        await goto_in_session(page, "Training", deadline)
        if not await page.get_by_text("No run yet in this session").count():
            results.isolation.append(f"learner {n} sees a training run it did not start (or its page did not load)")
    (a_n, a), (b_n, b) = pages[0], pages[1]
    for page in (a, b):
        await goto_in_session(page, "Read one row", deadline)
    await a.get_by_text("key 0", exact=True).first.click()
    await a.get_by_role("button", name="Check my prediction").click()
    await asyncio.sleep(0.3)
    await idle_twice(a, deadline)
    await goto_in_session(b, "Read one row", deadline)
    if not await a.get_by_text("1. The weights of row 3").count():
        results.isolation.append(f"learner {a_n}'s check did not reveal its own answer")
    if await b.get_by_text("1. The weights of row 3").count():
        results.isolation.append(f"learner {b_n} sees the answer learner {a_n} checked")


async def run(args) -> Results:
    results = Results()
    if args.training_slots is not None:  # else the server's own default (LAB_MAX_TRAINING_RUNS, 1: one core left)
        os.environ["LAB_MAX_TRAINING_RUNS"] = str(args.training_slots)
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp, streamlit_server(Path(tmp)) as server:
        deadline = time.monotonic() + args.budget
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            # One context: every tab is a Streamlit session of its own (its own websocket and session state), and
            # the tabs share the HTTP cache, as a returning learner's browser does.
            context = await browser.new_context(viewport=VIEWPORT, reduced_motion="reduce", service_workers="block")
            context.set_default_timeout(args.budget * 1000)
            context.set_default_navigation_timeout(args.budget * 1000)
            warm = await context.new_page()
            await warm.goto(server.url + "/", wait_until="domcontentloaded")  # the first run imports torch
            await idle_twice(warm, deadline)
            await warm.close()
            # The teacher opened the lab first: the server's warm-up (ui/warmup.py) has computed every lab page's
            # default view before the class arrives.
            while "warm-up: " not in Path(server.log_path).read_text(errors="replace") and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
            started = time.monotonic()
            jobs = [trainer(context, server.url, n, results, deadline) for n in range(args.trainers)]
            jobs += [
                learner(context, server.url, n, args, results, deadline) for n in range(args.sessions - args.trainers)
            ]
            opened = await asyncio.gather(*jobs)
            elapsed = time.monotonic() - started
            learners = list(enumerate(opened[args.trainers :]))
            await asyncio.sleep(max(0.0, 65 - elapsed))  # the runs end within their 60 s budget
            await check_isolation(learners, results, time.monotonic() + 300)
            await context.close()
            await browser.close()
        log = Path(server.log_path).read_text(errors="replace")
        results.errors += [f"server log: {line}" for line in log.splitlines() if line.startswith("Traceback")]
    print(f"all sessions opened and moved in {elapsed:.1f} s")
    return results


def summary(name: str, xs: list[float]) -> str:
    if not xs:
        return f"{name:<12} no samples"
    return (
        f"{name:<12} n={len(xs):<4} p50 {percentile(xs, 50):6.2f} s   p95 {percentile(xs, 95):6.2f} s   "
        f"max {max(xs):6.2f} s"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30, help="browser sessions in all (default 30)")
    parser.add_argument("--trainers", type=int, default=2, help="of them, sessions that train (default 2)")
    parser.add_argument("--moves", type=int, default=3, help="timed widget moves per learner (default 3)")
    parser.add_argument(
        "--training-slots", type=int, default=None, help="LAB_MAX_TRAINING_RUNS for the server (default: its own, 1)"
    )
    parser.add_argument("--ramp", type=float, default=0, help="seconds over which the learners arrive (default 0)")
    parser.add_argument("--budget", type=float, default=900, help="seconds the whole run may take (default 900)")
    args = parser.parse_args(argv)
    if not 2 <= args.sessions <= 60 or not 0 <= args.trainers < args.sessions - 1 or not 0 <= args.moves <= 20:
        parser.error("need 2-60 sessions, fewer trainers than sessions minus one, and 0-20 moves")
    results = asyncio.run(run(args))
    print(
        f"{args.sessions} sessions ({args.trainers} training), {args.moves} moves each, arriving over {args.ramp:g} s; "
        f"one server and one Chromium on {os.cpu_count()} cores"
    )
    print(summary("first paint", results.first_paint))
    print(summary("  its script", results.first_script))
    print(summary("rerun", results.rerun))
    print(f"errors: {len(results.errors)}")
    for e in results.errors[:20]:
        print("  " + e)
    print("isolation: " + ("no session saw another's runs or answers" if not results.isolation else "FAILED"))
    for e in results.isolation:
        print("  " + e)


if __name__ == "__main__":
    main()
