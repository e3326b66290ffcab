"""A live class through the proxy: 30 learners join the teacher's session and answer one predict-first question
within the same 20 seconds, against `python -m core serve --class` (HAProxy in front of Streamlit workers).

Run:  .venv/bin/python bench/bench_live_class.py [--learners 30] [--window 20] [--workers 2] [--poll on|off]

A fresh class server in a temporary folder (bench_class.class_server: its own class database, every worker warmed).
The teacher's session is opened in that class database with core.classroom.live before the class arrives (the
teacher's sidebar button does the same one call); the learners go through the app itself. Each learner is a
websocket client speaking Streamlit's protocol, as in bench_load_protocol (a browser's JavaScript and drawing run
on the learners' own machines in a classroom):

- opens the Masks page, fills in the sidebar's join form (ui/live_class.py: the code and a display name, submitted
  with its Join button) and, at a time drawn uniformly over `--window` seconds (seeded), types a number into the
  page's predict-first question `masks_predict` and presses its check button (ui/predict.py records the check
  into the session's current round);
- meanwhile, with `--poll on` (the default), reruns the session's poll fragment whenever the server asked for it
  (its `auto_rerun` interval: ui.live_class.POLL_S), as a browser does, until every learner has answered.

Measured: answers sent (checks submitted) against answers kept (the session's rows in the class database, read at
the end); each answer's time from its submit to the server's `script_finished` (p50/p95); the polls' times; and
how long after the last submit the teacher's count (LiveClass.rounds, read every 50 ms from the database, as the
teacher's panel re-reads it every ui.live_class.ROOM_POLL_S) first showed every answer. An answer a learner was
told was not recorded, an exception element, or a traceback in a worker's log is an error.

The clients run on the same 2 cores as the server, so the times are an upper bound. Nothing passes or fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_browser import percentile  # noqa: E402
from bench_class import class_server  # noqa: E402

from core.classroom.live import LiveClass  # noqa: E402

PAGE = "masks"
QUESTION = "masks_predict"
ANSWER_KEY, CHECK_KEY = f"{QUESTION}_answer", f"{QUESTION}_check"  # ui.predict's keys for the question
CODE_KEY, NAME_KEY, JOIN_KEY = "live_class_code", "live_class_name", "live_class_join_button"  # ui.live_class's
NOT_RECORDED = "not recorded for your teacher"  # ui.live_class.record's warning
ANY_VERSION = "0" * 16  # a fingerprint no question has: rounds() then counts every answer as `other`


@dataclass
class Results:
    join: list[float] = field(default_factory=list)
    answer: list[float] = field(default_factory=list)
    poll: list[float] = field(default_factory=list)
    submitted: list[float] = field(default_factory=list)  # monotonic time of each answer's submit
    finished: list[float] = field(default_factory=list)  # ... and of its script_finished
    errors: list[str] = field(default_factory=list)


@dataclass
class Learner:
    ws: object
    who: str
    widgets: dict[str, str] = field(default_factory=dict)  # user key -> widget id
    fragments: set[str] = field(default_factory=set)  # fragment ids the server asked to rerun on a timer
    interval: float = 0.0
    texts: list[str] = field(default_factory=list)  # markdown and alert bodies of the last run
    values: dict[str, str] = field(default_factory=dict)  # widget id -> text, resent with every run (a browser's)


def _user_key(widget_id: str) -> str:
    return widget_id.rsplit("-", 1)[-1]  # "$$ID-<hash>-<key>": the key the page gave the widget


def _states(s: Learner, press: str | None):
    states = []
    for wid, value in s.values.items():
        state = BackMsg().rerun_script.widget_states.widgets.add()
        state.id, state.string_value = wid, value
        states.append(state)
    if press is not None:
        state = BackMsg().rerun_script.widget_states.widgets.add()
        state.id, state.trigger_value = s.widgets[press], True
        states.append(state)
    return states


async def run(s: Learner, r: Results, timeout: float, *, press: str | None = None, fragment: str = "") -> float:
    """One script run (the page, or one fragment of it) with the learner's values and `press`; seconds until
    script_finished."""
    msg = BackMsg()
    msg.rerun_script.page_name = PAGE
    if fragment:
        msg.rerun_script.fragment_id = fragment
        msg.rerun_script.is_auto_rerun = True
    for state in _states(s, press):
        msg.rerun_script.widget_states.widgets.append(state)
    start = time.monotonic()
    await s.ws.send(msg.SerializeToString())
    s.texts = []
    while True:
        fwd = ForwardMsg()
        fwd.ParseFromString(await asyncio.wait_for(s.ws.recv(), timeout))
        kind = fwd.WhichOneof("type")
        if kind == "auto_rerun":
            s.fragments.add(fwd.auto_rerun.fragment_id)
            s.interval = fwd.auto_rerun.interval
        elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
            el = fwd.delta.new_element
            which = el.WhichOneof("type")
            if which == "exception":
                r.errors.append(f"{s.who}: an exception: {el.exception.message[:200]}")
            elif which in ("text_input", "button"):
                s.widgets[_user_key(getattr(el, which).id)] = getattr(el, which).id
            elif which == "markdown":
                s.texts.append(el.markdown.body)
            elif which == "alert":
                s.texts.append(el.alert.body)
        elif kind == "script_finished":
            return time.monotonic() - start


async def learner(url: str, n: int, code: str, start: float, at: float, done: asyncio.Event, args, r: Results):
    s = Learner(await websockets.connect(url, subprotocols=["streamlit"], max_size=2**27, open_timeout=120), f"#{n}")
    try:
        await run(s, r, args.timeout)
        s.values = {s.widgets[CODE_KEY]: code, s.widgets[NAME_KEY]: f"learner {n}"}
        r.join.append(await run(s, r, args.timeout, press=JOIN_KEY))
        s.values = {}  # the join form is gone once joined
        if ANSWER_KEY not in s.widgets or not any(code in t for t in s.texts):
            r.errors.append(f"{s.who}: not shown as joined, or no {ANSWER_KEY} field")
            return
        while time.monotonic() < start + at:  # the learner reads the page, the poll fragment runs on its timer
            wait = min(s.interval or 1.0, start + at - time.monotonic())
            await asyncio.sleep(max(0.0, wait))
            if args.poll == "on" and s.fragments and time.monotonic() < start + at:
                for fragment in list(s.fragments):
                    r.poll.append(await run(s, r, args.timeout, fragment=fragment))
        s.values = {s.widgets[ANSWER_KEY]: f"{0.3 + 0.01 * (n % 40):.2f}"}
        r.submitted.append(time.monotonic())
        r.answer.append(await run(s, r, args.timeout, press=CHECK_KEY))
        r.finished.append(time.monotonic())
        if any(NOT_RECORDED in t for t in s.texts):
            r.errors.append(f"{s.who}: {next(t for t in s.texts if NOT_RECORDED in t)[:200]}")
        while args.poll == "on" and s.fragments and not done.is_set():  # polls go on until the class has answered
            await asyncio.sleep(s.interval or 1.0)
            for fragment in list(s.fragments):
                r.poll.append(await run(s, r, args.timeout, fragment=fragment))
    except (TimeoutError, OSError, KeyError, websockets.WebSocketException) as err:
        r.errors.append(f"{s.who}: {type(err).__name__}: {err}")
    finally:
        await s.ws.close()


def watch_count(live: LiveClass, code: str, expected: int, stop: threading.Event, seen: list[tuple[float, int]]):
    """The teacher's count, read from the class database every 50 ms: (time, count) at every change."""
    last = -1
    while not stop.is_set():
        (now,) = live.rounds(code, QUESTION, ANY_VERSION)
        count = now.n + now.other
        if count != last:
            seen.append((time.monotonic(), count))
            last = count
        if count >= expected:
            return
        stop.wait(0.05)


async def drive(url: str, code: str, live: LiveClass, args, r: Results) -> list[tuple[float, int]]:
    draw = random.Random(args.seed)
    times = sorted(draw.uniform(0, args.window) for _ in range(args.learners))
    start = time.monotonic() + 5 + 0.2 * args.learners  # the class joins first, then the window opens
    done, stop, seen = asyncio.Event(), threading.Event(), []
    watcher = threading.Thread(target=watch_count, args=(live, code, args.learners, stop, seen), daemon=True)
    watcher.start()
    jobs = [asyncio.create_task(learner(url, n, code, start, times[n], done, args, r)) for n in range(args.learners)]
    while len(r.finished) + len(r.errors) < args.learners and not all(j.done() for j in jobs):
        await asyncio.sleep(0.2)
    done.set()
    await asyncio.gather(*jobs)
    await asyncio.to_thread(watcher.join, 30)
    stop.set()
    return seen


def pct(xs: list[float], q: float) -> str:
    return f"{percentile(xs, q):5.2f}" if xs else "  nan"


def summary(name: str, xs: list[float]) -> str:
    if not xs:
        return f"{name:<8} no samples"
    return f"{name:<8} n={len(xs):<4} p50 {pct(xs, 50)} s   p95 {pct(xs, 95)} s   max {max(xs):5.2f} s"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=30, help="learners in the session (default 30)")
    parser.add_argument("--window", type=float, default=20.0, help="seconds over which they answer (default 20)")
    parser.add_argument("--workers", type=int, default=2, help="Streamlit workers behind the proxy (default 2)")
    parser.add_argument("--poll", choices=("on", "off"), default="on", help="rerun the poll fragment (default on)")
    parser.add_argument("--seed", type=int, default=29, help="seed of the answer times (default 29)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one script run may take (default 300)")
    args = parser.parse_args(argv)
    if not 1 <= args.learners <= 200 or not 1 <= args.workers <= 8 or not 0 < args.window <= 600:
        parser.error("1-200 learners, 1-8 workers, a window of 0-600 s")
    r = Results()
    with tempfile.TemporaryDirectory(prefix="bench-live-class-") as tmp:
        with class_server(Path(tmp), args.workers, 600) as url:
            live = LiveClass(Path(tmp) / "class.db")  # the server's LAB_CLASS_DB
            code = live.open_session()
            began = time.monotonic()
            seen = asyncio.run(drive(url.replace("http://", "ws://") + "/_stcore/stream", code, live, args, r))
            elapsed = time.monotonic() - began
            (kept_round,) = live.rounds(code, QUESTION, ANY_VERSION)
            kept = kept_round.n + kept_round.other
            versions = {row.split(",")[5] for row in live.answers_csv(code).splitlines()[1:]}
        for path in sorted(Path(tmp, "run").glob("worker-*.log")):
            r.errors += [f"{path.name}: {line}" for line in path.read_text(errors="replace").splitlines()
                         if line.startswith("Traceback")]  # fmt: skip
    print(
        f"Live class through HAProxy, {args.workers} worker(s) on {os.cpu_count()} cores: {args.learners} learners "
        f"join one session and answer {QUESTION} over {args.window:g} s (polls {args.poll}); clients on the same "
        f"machine; {elapsed:.0f} s in all"
    )
    print(f"answers sent {len(r.submitted)}   kept {kept}   lost {len(r.submitted) - kept}   "
          f"(question versions answered: {len(versions)})")  # fmt: skip
    print(summary("join", r.join))
    print(summary("answer", r.answer) + "   (submit -> script_finished)")
    print(summary("poll", r.poll) + "   (the poll fragment's runs)")
    full = next((t for t, count in seen if count >= len(r.submitted) > 0), None)
    if full is not None and r.submitted:
        print(
            f"teacher's count showed all {len(r.submitted)}: {full - max(r.submitted):.2f} s after the last submit "
            f"({full - max(r.finished):+.2f} s from its script_finished; the panel re-reads every 1 s on top)"
        )
    else:
        print(f"teacher's count never showed all {len(r.submitted)}: last seen {seen[-1][1] if seen else 0}")
    print(f"errors: {len(r.errors)}")
    for e in r.errors[:20]:
        print("  " + e)


if __name__ == "__main__":
    main()
