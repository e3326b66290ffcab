"""`python -m core serve`: serve the lab on one laptop, or to a class through HAProxy in front of several workers.

One laptop (`make run`): one Streamlit on localhost, and the warm-up visit that computes every page's default view
before anyone arrives. A class (`make class`): N workers on 127.0.0.1 behind HAProxy on the network, refused
without a teacher passcode or without HAProxy. A worker that exits is restarted after a pause that doubles with
each restart in the last minute, and left stopped past MAX_RESTARTS_PER_MINUTE; if HAProxy stops, everything
stops. Every child runs in its own process group, so Ctrl-C reaches only this process, which stops them all.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cli.arguments import UsageError
from cli.haproxy import HEALTH_PATH, MAX_WORKERS, ProxySettings, haproxy_config, worker_name
from core.process import own_group
from core.settings import PASSCODE_ENV, teacher_passcode

ROOT = Path(__file__).resolve().parent.parent
POLL_S = 0.5  # how often the supervisor looks at its children
STOP_GRACE_S = 10.0  # a child stopped with SIGTERM (CTRL_BREAK on Windows) gets this long before it is killed
MAX_RESTARTS_PER_MINUTE = 5
MAX_BACKOFF_S = 30.0
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 never goes through a proxy


def register_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help="serve the lab: one laptop, or a class through HAProxy (--class)")
    p.add_argument("--port", type=int, default=8501, help="the port browsers connect to (default 8501)")
    p.add_argument("--class", dest="class_", action="store_true", help="serve a class on the network through HAProxy")
    p.add_argument(
        "--workers", type=int, default=None, help=f"--class: Streamlit workers (default one per core, 1..{MAX_WORKERS})"
    )
    p.add_argument("--address", default="0.0.0.0", help="--class: the IPv4 address to listen on (default: every one)")
    p.add_argument(
        "--http-port", type=int, default=None, help="--class with LAB_TLS_CERT: a port that redirects to https"
    )
    p.set_defaults(handler=_run_serve)


def _run_serve(args: argparse.Namespace) -> int:
    if not args.class_:
        if args.workers is not None or args.http_port is not None or args.address != "0.0.0.0":
            raise UsageError("--workers, --address and --http-port serve a class: add --class")
        return serve_laptop(args.port)
    return serve_class(args)


# ---- children in their own process groups --------------------------------------------------------------------


def spawn(command: Sequence[str], log: Path | None, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start `command` in the repository, in a process group of its own, its output appended to `log` (None: this
    terminal's)."""
    with open(log, "ab") if log is not None else contextlib.nullcontext() as out:  # the child keeps its own handle
        return subprocess.Popen(
            list(command), cwd=ROOT, env=None if env is None else dict(env), stdin=subprocess.DEVNULL, stdout=out,
            stderr=None if out is None else subprocess.STDOUT, **own_group(),
        )  # fmt: skip


def _signal_group(proc: subprocess.Popen, force: bool) -> None:
    """Ask `proc`'s process group to stop (SIGTERM; CTRL_BREAK on Windows), or with `force` kill it."""
    try:
        if sys.platform == "win32":
            proc.kill() if force else proc.send_signal(signal.CTRL_BREAK_EVENT)
        else:
            os.killpg(proc.pid, signal.SIGKILL if force else signal.SIGTERM)
    except OSError:  # ProcessLookupError: the group is gone already
        pass


def stop(*procs: subprocess.Popen | None) -> None:
    """Stop each process group: all asked at once, then whatever still runs after STOP_GRACE_S killed."""
    running = [p for p in procs if p is not None]
    for force in (False, True):
        for proc in running:
            _signal_group(proc, force)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in running:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        running = [p for p in running if p.poll() is None]


def _on_stop_signals(stopping: threading.Event) -> None:
    """Ctrl-C, SIGTERM (and Ctrl-Break on Windows) set `stopping`; the loop then stops every child."""
    for name in ("SIGINT", "SIGTERM", "SIGBREAK"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), lambda *_: stopping.set())


def _healthy(port: int) -> bool:
    try:
        with _NO_PROXY.open(f"http://127.0.0.1:{port}{HEALTH_PATH}", timeout=2) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _streamlit(port: int, address: str) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.address", address]


def _warmup(url: str) -> list[str]:
    return [sys.executable, "-m", "ui.warmup", "--url", url]


def run_dir(environ: Mapping[str, str] | None = None) -> Path:
    """LAB_RUN_DIR, else <repo>/.lab: the proxy's configuration and the logs of a class server."""
    raw = (os.environ if environ is None else environ).get("LAB_RUN_DIR", "").strip()
    return Path(raw) if raw else ROOT / ".lab"


# ---- one laptop ----------------------------------------------------------------------------------------------


def serve_laptop(port: int) -> int:
    """`make run`: one Streamlit on localhost and the warm-up visit; returns Streamlit's exit status."""
    if not 1 <= port <= 65535:
        raise UsageError(f"--port must be from 1 to 65535, got {port}")
    logs = run_dir()
    logs.mkdir(parents=True, exist_ok=True)
    stopping = threading.Event()
    _on_stop_signals(stopping)
    server = spawn(_streamlit(port, "localhost"), None)  # its output is the terminal's, as `streamlit run` alone
    warm = spawn(_warmup(f"http://localhost:{port}"), logs / "warmup.log")
    try:
        while not stopping.wait(POLL_S):
            if server.poll() is not None:
                return server.returncode
        return 0
    finally:
        stop(warm, server)


# ---- a class -------------------------------------------------------------------------------------------------


def configured_passcode(environ: Mapping[str, str] | None = None, secrets_files: Sequence[Path] | None = None) -> str:
    """The teacher passcode the workers will find (`teacher_passcode`, the rule the teacher's gate uses too),
    with Streamlit's secrets files parsed here: the project's wins over the user's, as Streamlit merges them."""
    if secrets_files is None:
        secrets_files = (Path.home() / ".streamlit" / "secrets.toml", ROOT / ".streamlit" / "secrets.toml")
    secrets: dict = {}
    for path in secrets_files:
        try:
            secrets.update(tomllib.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError):  # missing or unreadable: no passcode from there (as for Streamlit)
            continue
    return teacher_passcode(environ, secrets)


def workers_count(given: int | None) -> int:
    if given is None:
        return max(1, min(MAX_WORKERS, os.cpu_count() or 1))
    if not 1 <= given <= MAX_WORKERS:
        raise UsageError(f"--workers must be from 1 to {MAX_WORKERS}, got {given}")
    return given


def _port_free(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if sys.platform != "win32":  # as Streamlit and HAProxy bind: a port in TIME_WAIT is free
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def _default_route_ipv4() -> str | None:
    """The address this machine would send from to the outside: connecting a UDP socket sends no packet."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1 (RFC 5737): only the routing table is consulted
            return s.getsockname()[0]
    except OSError:
        return None


def network_ipv4() -> list[str]:
    """Every non-loopback, non-link-local IPv4 address of an interface that is up, the default route's first."""
    import ipaddress

    import psutil

    up = {name for name, stats in psutil.net_if_stats().items() if stats.isup}
    found = []
    for name, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            if a.family == socket.AF_INET and name in up:
                ip = ipaddress.IPv4Address(a.address)
                if not (ip.is_loopback or ip.is_link_local or a.address in found):
                    found.append(a.address)
    first = _default_route_ipv4()
    return sorted(found, key=lambda a: a != first)


def join_urls(settings: ProxySettings) -> list[str]:
    """The addresses learners type: the listening address, or (listening on every address) each network address and
    this machine's name, with the port unless it is the scheme's default."""
    port = "" if (settings.scheme, settings.port) in (("http", 80), ("https", 443)) else f":{settings.port}"
    hosts = [settings.address] if settings.address != "0.0.0.0" else [*network_ipv4(), socket.gethostname()]
    return [f"{settings.scheme}://{host}{port}/" for host in hosts]


@dataclass
class Worker:
    index: int
    port: int
    proc: subprocess.Popen | None = None
    warm: subprocess.Popen | None = None
    ready: bool = False
    restarts: list[float] = field(default_factory=list)  # monotonic times of restarts within the last minute
    restart_at: float | None = None  # when a worker that exited is started again
    given_up: bool = False

    @property
    def name(self) -> str:
        return worker_name(self.index)


def _class_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> ProxySettings:
    if not configured_passcode(environ):
        raise UsageError(
            f"a class server needs a teacher passcode: set {PASSCODE_ENV} (LAB_TEACHER_PASSCODE='choose-one' make "
            f'class), or the line {PASSCODE_ENV} = "choose-one" in .streamlit/secrets.toml'
        )
    if shutil.which("haproxy") is None:
        raise UsageError(
            "a class server needs HAProxy, which is not installed: install it (Debian/Ubuntu: sudo apt-get install "
            "haproxy) and start again, or serve one laptop with `make run`"
        )
    n = workers_count(args.workers)
    cert_raw = environ.get("LAB_TLS_CERT", "").strip()
    cert = Path(cert_raw).resolve() if cert_raw else None
    if cert is not None and not cert.is_file():
        raise UsageError("LAB_TLS_CERT must name a PEM file holding the certificate and its key; no such file")
    settings = ProxySettings(  # a ValueError names a bad address or port: exit 2
        args.address, args.port, tuple(args.port + 1 + i for i in range(n)), cert, args.http_port
    )
    busy = [p for p in (settings.port, *settings.worker_ports) if not _port_free(settings.address, p)]
    busy += [p for p in [settings.http_port] if p is not None and not _port_free(settings.address, p)]
    if busy:
        raise UsageError(f"port(s) {busy} already in use: stop what holds them or choose another --port")
    return settings


def serve_class(args: argparse.Namespace) -> int:
    settings = _class_settings(args, os.environ)
    logs = run_dir()
    logs.mkdir(parents=True, exist_ok=True)
    config = logs / "haproxy.cfg"
    config.write_text(haproxy_config(settings), encoding="utf-8")
    check = subprocess.run(["haproxy", "-c", "-q", "-f", str(config)], capture_output=True, text=True)
    if check.returncode != 0:
        raise UsageError(f"HAProxy refused its configuration {config}: {(check.stdout + check.stderr).strip()[:500]}")
    urls = join_urls(settings)
    join = os.environ.get("LAB_JOIN_URL", "").strip() or urls[0]
    # One cookie secret for every worker: a browser sent to another worker after a failure keeps a valid XSRF token
    # (uploads), which a per-process random secret would refuse. Given by environment, never on a command line.
    env = dict(os.environ, LAB_JOIN_URL=join, STREAMLIT_SERVER_COOKIE_SECRET=secrets.token_hex(32))
    workers = [Worker(i, port) for i, port in enumerate(settings.worker_ports)]
    stopping = threading.Event()
    _on_stop_signals(stopping)
    proxy: subprocess.Popen | None = None
    try:
        for w in workers:
            _start(w, env, logs)
        proxy = spawn(["haproxy", "-db", "-f", str(config)], logs / "haproxy.log")
        n = f"{len(workers)} worker" + "s" * (len(workers) > 1)
        print(
            f"Attention Lab is serving a class: {n} behind HAProxy on {settings.address}:{settings.port}.", flush=True
        )
        print("Learners type:", flush=True)
        for url in urls:
            print(f"    {url}", flush=True)
        print(f"The Start page shows {join} and its QR code. Logs: {logs}. Ctrl-C stops the class server.", flush=True)
        return _supervise(proxy, workers, env, logs, stopping)
    finally:
        stop(proxy, *(p for w in workers for p in (w.warm, w.proc)))
        _say("the class server stopped")


def _start(w: Worker, env: Mapping[str, str], logs: Path) -> None:
    command = _streamlit(w.port, "127.0.0.1") + [
        "--server.headless", "true", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
    ]  # fmt: skip
    w.proc = spawn(command, logs / f"worker-{w.name}.log", env)
    w.ready, w.restart_at = False, None


def _supervise(
    proxy: subprocess.Popen, workers: list[Worker], env: Mapping[str, str], logs: Path, stopping: threading.Event
) -> int:
    """Watch the proxy and the workers until a stop signal (0) or the proxy's end (1)."""
    while not stopping.wait(POLL_S):
        if proxy.poll() is not None:
            tail = (logs / "haproxy.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
            print(f"error: HAProxy stopped (exit status {proxy.returncode}), so the class server stops: "
                  f"{' | '.join(tail) or 'see ' + str(logs / 'haproxy.log')}", file=sys.stderr, flush=True)  # fmt: skip
            return 1
        now = time.monotonic()
        for w in workers:
            _watch(w, now, env, logs)
        if all(w.given_up for w in workers):
            print("error: every worker keeps stopping; see the worker logs in " + str(logs), file=sys.stderr)
            return 1
    return 0


def _watch(w: Worker, now: float, env: Mapping[str, str], logs: Path) -> None:
    """One look at one worker: warm it once it answers, schedule its restart when it exits, restart it when due."""
    if w.given_up or w.proc is None:
        return
    if w.warm is not None and w.warm.poll() is not None:
        w.warm = None  # the warm-up visit has ended: reap it (no zombie until the class server stops)
    code = w.proc.poll()
    if code is None and not w.ready and _healthy(w.port):
        w.ready = True
        _say(f"worker {w.name} answers on 127.0.0.1:{w.port}")
        if w.warm is not None:
            stop(w.warm)
        w.warm = spawn(_warmup(f"http://127.0.0.1:{w.port}"), logs / f"warmup-{w.name}.log")
    elif code is not None and w.restart_at is None:
        stop(w.proc)  # whatever is left of its process group
        w.restarts = [t for t in w.restarts if now - t < 60.0]
        if len(w.restarts) >= MAX_RESTARTS_PER_MINUTE:
            w.given_up = True
            _say(f"worker {w.name} stopped {len(w.restarts) + 1} times within a minute; left stopped (see its log)")
            return
        pause = min(MAX_BACKOFF_S, 2.0 ** len(w.restarts))
        w.restart_at = now + pause
        _say(f"worker {w.name} (port {w.port}) exited with status {code}; starting it again in {pause:g} s")
    elif code is not None and w.restart_at is not None and now >= w.restart_at:
        w.restarts.append(now)
        _start(w, env, logs)
