"""A class at once, as the server sees it: 30 Streamlit sessions over the app's own websocket protocol while two
of them train, timing each session's script runs on one server.

Run:  .venv/bin/python bench/bench_load_protocol.py [--sessions 30] [--trainers 2] [--moves 3] [--ramp 0]
                                                    [--think 2] [--warmup both|on|off]

bench/bench_load.py drives real Chromium tabs, but on this 2-core machine 30 tabs loading Streamlit's and
Plotly's JavaScript and drawing take most of the CPU the server needs; in a classroom each learner's browser
runs on the learner's own machine. This benchmark leaves the browser out: each session is a websocket client
speaking Streamlit's protocol (`/_stcore/stream`, protobuf BackMsg / ForwardMsg from streamlit.proto), as the
browser does, against the same server (tests/e2e/conftest.py's `streamlit_server`, localhost only, with
the server's own LAB_MAX_TRAINING_RUNS unless `--training-slots` sets it: by default one run trains at a time
and the second waits its turn, leaving the other core to the pages).

- Trainers open the Training page with `?train_iters=300&train_seconds=60` and press Start training (the
  button's widget id, read from the page's deltas, sent as a trigger); the run then works on the server.
- Learners each open one lab page (round-robin) and move one of its sliders `--moves` times (the slider's id
  and range read from its delta; the new value sent as the widget state, the others left as they are), pausing
  before each move for `--think` seconds on average (seeded per learner), as a learner reads the page first.
- First run: from sending the page request until the server's `script_finished`; rerun: the same for a move.
  Everything the server sends is received and parsed on the way, as a browser would.
- Errors: an exception element in any run, a run that does not finish within `--timeout` seconds, or a
  traceback in the server's log. Isolation: after the runs, every learner opens the Training page in its
  own session and must read "No run yet in this session".

- Warm-up: with `--warmup both` (the default) the class arrives twice, at a fresh server each time: once with
  the server's warm-up (ui/warmup.py) off, as a server meeting its class cold, and once after the warm-up has
  finished (a teacher opened the lab first, or `make run` did), printing both.

Nothing passes or fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_browser import percentile  # noqa: E402
from conftest import streamlit_server  # noqa: E402

WARMED = "warm-up: "  # the line ui/warmup.py writes to the server's log when it has opened every lab page
LABS = (  # page, the slider a learner moves
    ("score_geometry", "geo_T"),
    ("masks", "mask_len0"),
    ("read_row", "row_t"),
    ("temperature", "temperature"),
    ("rope", "rope_m"),
    ("autocomplete", "ac_temperature"),
    ("inspector", None),  # no slider: the learner only opens it
    ("embeddings", None),
    ("anatomy", None),
    ("checkpoint", None),
)


@dataclass
class Results:
    first_run: list[float] = field(default_factory=list)
    rerun: list[float] = field(default_factory=list)
    by_page: dict[str, list[float]] = field(default_factory=dict)  # first runs per page
    reruns_by_page: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    isolation: list[str] = field(default_factory=list)


@dataclass
class Session:
    ws: object
    widgets: dict[str, object] = field(default_factory=dict)  # user key -> the element's proto (slider, button)
    texts: list[str] = field(default_factory=list)  # markdown and alert bodies of the last run


def _user_key(widget_id: str) -> str:
    return widget_id.rsplit("-", 1)[-1]  # "$$ID-<hash>-<key>": the key the page gave the widget


async def run_script(s: Session, page: str, query: str, states: list, timeout: float, who: str, r: Results) -> float:
    """One script run of `page` with these widget states; seconds until script_finished."""
    msg = BackMsg()
    msg.rerun_script.query_string = query
    msg.rerun_script.page_name = page
    for state in states:
        msg.rerun_script.widget_states.widgets.append(state)
    start = time.monotonic()
    await s.ws.send(msg.SerializeToString())
    s.texts = []
    while True:
        raw = await asyncio.wait_for(s.ws.recv(), timeout)
        fwd = ForwardMsg()
        fwd.ParseFromString(raw)
        kind = fwd.WhichOneof("type")
        if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
            el = fwd.delta.new_element
            which = el.WhichOneof("type")
            if which == "exception":
                r.errors.append(f"{who}: an exception on {page}: {el.exception.message[:200]}")
            elif which in ("slider", "button"):
                s.widgets[_user_key(getattr(el, which).id)] = getattr(el, which)
            elif which == "markdown":
                s.texts.append(el.markdown.body)
            elif which == "alert":
                s.texts.append(el.alert.body)
        elif kind == "script_finished":
            return time.monotonic() - start


def slider_state(slider, value: float):
    state = BackMsg().rerun_script.widget_states.widgets.add()
    state.id = slider.id
    state.double_array_value.data.append(value)
    return state


def trigger_state(button):
    state = BackMsg().rerun_script.widget_states.widgets.add()
    state.id = button.id
    state.trigger_value = True
    return state


async def connect(url: str):
    return await websockets.connect(url, subprotocols=["streamlit"], max_size=2**27, open_timeout=120)


async def learner(url: str, n: int, args, r: Results) -> Session | None:
    page, key = LABS[n % len(LABS)]
    await asyncio.sleep(n * args.ramp / max(1, args.sessions - args.trainers))
    who = f"learner {n}"
    try:
        s = Session(await connect(url))
        took = await run_script(s, page, "", [], args.timeout, who, r)
        r.first_run.append(took)
        r.by_page.setdefault(page, []).append(took)
        slider = s.widgets.get(key) if key else None
        pauses = random.Random(n)  # seeded: the same pauses in every run of the bench
        for i in range(args.moves if slider is not None else 0):
            await asyncio.sleep(pauses.uniform(0.5, 1.5) * args.think)  # a learner reads before moving again
            lo, hi, step = slider.min, slider.max, slider.step or 1
            value = lo + step * (1 + (i % 3))  # three values near the bottom of the range, in turn
            took = await run_script(s, page, "", [slider_state(slider, min(hi, value))], args.timeout, who, r)
            r.rerun.append(took)
            r.reruns_by_page.setdefault(page, []).append(took)
        return s
    except (TimeoutError, OSError, websockets.WebSocketException) as err:
        r.errors.append(f"{who}: {type(err).__name__}: {err}")
        return None


async def trainer(url: str, n: int, args, r: Results) -> Session | None:
    who = f"trainer {n}"
    try:
        s = Session(await connect(url))
        query = "train_iters=300&train_seconds=60"
        await run_script(s, "training", query, [], args.timeout, who, r)
        await run_script(s, "training", query, [trigger_state(s.widgets["train_start"])], args.timeout, who, r)
        return s
    except (TimeoutError, OSError, KeyError, websockets.WebSocketException) as err:
        r.errors.append(f"{who}: {type(err).__name__}: {err}")
        return None


async def run(args, warmed: bool) -> tuple[Results, float]:
    r = Results()
    if args.training_slots is not None:  # else the server's own default (LAB_MAX_TRAINING_RUNS, 1: one core left)
        os.environ["LAB_MAX_TRAINING_RUNS"] = str(args.training_slots)
    with (
        tempfile.TemporaryDirectory(prefix="bench-load-protocol-") as tmp,
        streamlit_server(Path(tmp), warmup=warmed) as server,
    ):
        url = server.url.replace("http://", "ws://") + "/_stcore/stream"
        warm = Session(await connect(url))
        await run_script(warm, "", "", [], args.timeout, "warm-up", Results())  # the first run imports torch
        await warm.ws.close()
        if warmed:  # the teacher opened the lab first: the server's own warm-up (ui/warmup.py) has finished
            deadline = time.monotonic() + args.timeout
            while WARMED not in Path(server.log_path).read_text(errors="replace"):
                if time.monotonic() > deadline:
                    r.errors.append(f"the server's warm-up did not finish within {args.timeout:g} s")
                    break
                await asyncio.sleep(0.5)
        elapsed = await drive_class(url, args, r)
        log = Path(server.log_path).read_text(errors="replace")
        r.errors += [f"server log: {line}" for line in log.splitlines() if line.startswith("Traceback")]
    return r, elapsed


async def drive_class(url: str, args, r: Results) -> float:
    """The class arrives at the websocket `url`: trainers and learners at once, then the isolation check; the
    seconds until every learner's moves were answered. bench/bench_class.py drives a proxy with it."""
    started = time.monotonic()
    jobs = [trainer(url, n, args, r) for n in range(args.trainers)]
    jobs += [learner(url, n, args, r) for n in range(args.sessions - args.trainers)]
    sessions = await asyncio.gather(*jobs)
    elapsed = time.monotonic() - started
    await asyncio.sleep(max(0.0, 65 - elapsed))  # the runs end within their 60 s budget
    for n, s in enumerate(sessions[args.trainers :]):
        if s is None:
            continue
        await run_script(s, "training", "", [], args.timeout, f"learner {n}", r)
        if not any("No run yet in this session" in t for t in s.texts):
            r.isolation.append(f"learner {n} sees a training run it did not start")
    for s in sessions:
        if s is not None:
            await s.ws.close()
    return elapsed


def summary(name: str, xs: list[float]) -> str:
    if not xs:
        return f"{name:<14} no samples"
    return (
        f"{name:<14} n={len(xs):<4} p50 {percentile(xs, 50):6.2f} s   p95 {percentile(xs, 95):6.2f} s   "
        f"max {max(xs):6.2f} s"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30, help="sessions in all (default 30)")
    parser.add_argument("--trainers", type=int, default=2, help="of them, sessions that train (default 2)")
    parser.add_argument("--moves", type=int, default=3, help="slider moves per learner (default 3)")
    parser.add_argument(
        "--training-slots", type=int, default=None, help="LAB_MAX_TRAINING_RUNS for the server (default: its own, 1)"
    )
    parser.add_argument("--ramp", type=float, default=0, help="seconds over which learners arrive (default 0)")
    parser.add_argument(
        "--think",
        type=float,
        default=2.0,
        help="mean seconds a learner looks at the page before moving the slider again (uniform over 0.5x..1.5x, "
        "seeded; default 2; 0 moves at once, a burst no class makes)",
    )
    parser.add_argument(
        "--warmup",
        choices=("both", "on", "off"),
        default="both",
        help="the server's warm-up (ui/warmup.py) finished before the class arrives (on), turned off (off), or a "
        "fresh server for each, one after the other (both, the default)",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds one script run may take (default 300)")
    args = parser.parse_args(argv)
    if not 2 <= args.sessions <= 200 or not 0 <= args.trainers < args.sessions or not 0 <= args.moves <= 20:
        parser.error("need 2-200 sessions, fewer trainers than sessions, and 0-20 moves")
    for warmed in {"both": (False, True), "on": (True,), "off": (False,)}[args.warmup]:
        report(args, warmed, *asyncio.run(run(args, warmed)))


def report(args, warmed: bool, r: Results, elapsed: float) -> None:
    print(
        f"\n{args.sessions} sessions ({args.trainers} training), {args.moves} slider moves each about {args.think:g} s "
        f"apart, arriving over {args.ramp:g} s; one server on {os.cpu_count()} cores, its warm-up "
        f"{'finished before they arrive' if warmed else 'off'}; all done in {elapsed:.1f} s"
    )
    print(summary("first run", r.first_run))
    print(summary("rerun", r.rerun))
    for page, xs in sorted(r.by_page.items()):
        print("  " + summary(page, xs))
    print(summary("rerun by page", []).split(" no ")[0])
    for page, xs in sorted(r.reruns_by_page.items()):
        print("  " + summary(page, xs))
    print(f"errors: {len(r.errors)}")
    for e in r.errors[:20]:
        print("  " + e)
    print("isolation: " + ("no learner saw another's run" if not r.isolation else "FAILED"))
    for e in r.isolation:
        print("  " + e)


if __name__ == "__main__":
    main()
