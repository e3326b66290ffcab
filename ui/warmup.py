"""Warm-up: the lab pages' default views computed once when a server starts, before the class arrives.

Every page's first view is the same for every session and cached per server, but cold it costs seconds of CPU that
thirty learners arriving at once would all wait for. So the server opens each page once over its own websocket,
exactly as a browser does, in a background thread (LAB_WARMUP=0 turns it off). Run as a script (`make run` does),
it waits until the lab answers and opens its default page once, which starts the warm-up. Its visits are not
recorded in the telemetry, and a page that fails to warm is logged and skipped, never stopping the server.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass

import streamlit as st
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect
from websockets.typing import Subprotocol

ENV = "LAB_WARMUP"
# The pages whose first view computes on default inputs (url paths of app.py's pages). Training, Release and
# Monitoring read per-session or registry state and compute on request; Start here computes nothing.
WARM_PAGES = (
    "score_geometry",
    "masks",
    "read_row",
    "temperature",
    "inside",
    "anatomy",
    "embeddings",
    "rope",
    "autocomplete",
    "inspector",
    "checkpoint",
)
WARMUP_QUERY = "warmup=1"
PAGE_TIMEOUT_S = 120.0  # one page's first run on a busy 2-core server takes seconds, never minutes
READY_TIMEOUT_S = 120.0  # how long `python -m ui.warmup` waits for the server to answer
LOG = logging.getLogger("attention_lab.warmup")


@dataclass(frozen=True)
class WarmUp:
    pages: tuple[str, ...]
    seconds: float
    errors: tuple[str, ...]  # "page: why" for each page that did not finish cleanly

    def describe(self) -> str:
        return f"warm-up: {len(self.pages)} pages in {self.seconds:.1f} s, {len(self.errors)} errors" + (
            "" if not self.errors else " (" + "; ".join(self.errors) + ")"
        )


def visiting() -> bool:
    """This session is the warm-up's (its address holds WARMUP_QUERY)."""
    key, _, value = WARMUP_QUERY.partition("=")
    return st.query_params.get(key) == value


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _run_page(ws, page: str, timeout: float) -> str | None:
    """One script run of `page`; None when it finished cleanly, else why not."""
    msg = BackMsg()
    msg.rerun_script.page_name = page
    msg.rerun_script.query_string = WARMUP_QUERY
    ws.send(msg.SerializeToString())
    deadline = time.monotonic() + timeout
    problem = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return f"no answer within {timeout:g} s"
        fwd = ForwardMsg()
        fwd.ParseFromString(ws.recv(timeout=left))
        kind = fwd.WhichOneof("type")
        if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
            if fwd.delta.new_element.WhichOneof("type") == "exception":
                problem = "the page raised " + fwd.delta.new_element.exception.type[:80]
        elif kind == "script_finished":
            return problem


def visit(url: str, pages: tuple[str, ...] = WARM_PAGES, *, timeout: float = PAGE_TIMEOUT_S) -> WarmUp:
    """Open each page of `pages` once, in one session of the server at `url` (http://host:port)."""
    start = time.monotonic()
    errors: list[str] = []
    stream = url.rstrip("/").replace("http://", "ws://", 1).replace("https://", "wss://", 1) + "/_stcore/stream"
    try:
        with connect(stream, subprotocols=[Subprotocol("streamlit")], max_size=2**27, open_timeout=timeout) as ws:
            for page in pages:
                try:
                    why = _run_page(ws, page, timeout)
                except TimeoutError:
                    why = f"no answer within {timeout:g} s"
                if why is not None:
                    errors.append(f"{page}: {why}")
    except (OSError, TimeoutError, WebSocketException) as e:
        errors.append(f"the server at {url} could not be reached ({type(e).__name__}: {e})")
    return WarmUp(tuple(pages), time.monotonic() - start, tuple(errors))


def _server_url() -> str:
    address = st.get_option("server.address") or "127.0.0.1"
    if address in ("0.0.0.0", "::", ""):
        address = "127.0.0.1"
    return f"http://{address}:{st.get_option('server.port')}"


def _warm_in_background(url: str) -> None:
    result = visit(url)
    (LOG.warning if result.errors else LOG.info)(result.describe())
    print(result.describe(), file=sys.stderr, flush=True)  # the server's log: `make run`'s terminal


@st.cache_resource(show_spinner=False)
def _started() -> bool:
    """Once per server process: start the warm-up thread (st.cache_resource runs this body once)."""
    threading.Thread(target=_warm_in_background, args=(_server_url(),), name="lab-warmup", daemon=True).start()
    return True


def start() -> None:
    """Start the server's warm-up if it has not started yet and LAB_WARMUP does not turn it off."""
    if enabled():
        _started()


def _wait_until_ready(url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/_stcore/health", timeout=5) as r:  # localhost only
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ui.warmup", description="Start a running lab's warm-up.")
    parser.add_argument("--url", default="http://localhost:8501", help="the lab (default http://localhost:8501)")
    args = parser.parse_args(argv)
    if not args.url.startswith(("http://localhost", "http://127.0.0.1")):
        print(
            "error: --url must be this machine's lab (http://localhost:PORT or http://127.0.0.1:PORT)", file=sys.stderr
        )
        return 2
    if not _wait_until_ready(args.url, READY_TIMEOUT_S):
        print(f"error: the lab at {args.url} did not answer within {READY_TIMEOUT_S:g} s", file=sys.stderr)
        return 2
    result = visit(args.url, ("",))  # the default page: its run starts the server's warm-up (start())
    if result.errors:
        print("error: " + "; ".join(result.errors), file=sys.stderr)
        return 1
    print(f"The lab answers at {args.url}; it is computing its pages' default views (see its log).", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
