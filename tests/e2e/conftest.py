"""Real-browser tests: one Streamlit server per session, Debian's Chromium driven by pytest-playwright.

Everything here works offline: Playwright's own browser download cannot, so Chromium is always
launched from `executable_path`. Pages are discovered from app.py, so a new lesson is covered the
moment it is added to the navigation.
"""

from __future__ import annotations

import ast
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
E2E_DIR = Path(__file__).resolve().parent
SHOTS_DIR = Path("/tmp/attention-lab-shots")

SERVER_START_TIMEOUT_S = 90
# How long one script run may take. The first run imports torch, and the model pages' first runs
# generate text (cached per server afterwards): over a minute on 2 cores shared with other jobs.
APP_IDLE_TIMEOUT_MS = int(float(os.environ.get("ATTENTION_LAB_E2E_TIMEOUT_S", "180")) * 1000)
VIEWPORT = {"width": 1400, "height": 2400}  # Streamlit scrolls an inner container: tall, so one shot shows a page
MAX_SHOT_HEIGHT = 8000

# TESTING.md: without the networking flags Chromium keeps trying to reach outside hosts.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-proxy-server",  # a proxy from the environment must not sit between the browser and 127.0.0.1
]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
# The session server's teacher passcode (ui.teacher): the Release page's actions are locked behind it, and no
# other page reads it. A fixed test value, never a real one.
TEACHER_PASSCODE = "e2e-teacher-4d91"


# --------------------------------------------------------------------------- markers


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/e2e drives a real browser: mark it `e2e` (deselect with -m 'not e2e')."""
    for item in items:
        if E2E_DIR in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.e2e)


# --------------------------------------------------------------------------- the app's pages

_CHART_CALLS = {"chart", "plotly_chart"}  # ui.companion.chart and st.plotly_chart
# Code under these runs only sometimes (a function may never be called, a branch never taken).
_CONDITIONAL = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.IfExp,
    ast.ExceptHandler,
    ast.Match,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
)

ALWAYS = "always"  # a chart call runs on every load
UNLESS_STOPPED = "unless stopped"  # ... unless an earlier st.stop() / require_*() ends the run first
OPTIONAL = "optional"  # charts only behind widgets, or none at all


@dataclass(frozen=True)
class AppPage:
    """One st.Page entry of app.py."""

    script: str  # "views/temperature.py", relative to the repo root
    title: str
    url: str  # "/" for the default page, else "/<url_path>"
    charts: str  # ALWAYS, UNLESS_STOPPED or OPTIONAL: whether a chart must be drawn on a plain load

    @property
    def stem(self) -> str:
        return Path(self.script).stem


def _const(node: ast.AST | None):
    """A literal's value; a page title's English as app.py writes it, `_("Masks")`, is its literal too."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_" and len(node.args) == 1:
        node = node.args[0]
    return node.value if isinstance(node, ast.Constant) else None


def _call_name(node: ast.Call) -> str | None:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)


def chart_policy(script: Path) -> str:
    """Whether a plain load of the page must draw a chart, read from the page's source.

    A chart()/plotly_chart() call counts if it sits at module level (with-blocks allowed), not inside
    if/loop/except/def. If an st.stop() or a require_*() helper (which may stop the run, e.g.
    ui.models.require_bundle) comes earlier in the file, the page may legitimately stop before it.
    A page that cannot be read or parsed (mid-edit) is OPTIONAL: the error checks still apply.
    """
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return OPTIONAL
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def conditional(node: ast.AST) -> bool:
        up = parents.get(node)
        while up is not None:
            if isinstance(up, _CONDITIONAL):
                return True
            up = parents.get(up)
        return False

    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    first_chart = min((n.lineno for n in calls if _call_name(n) in _CHART_CALLS and not conditional(n)), default=None)
    if first_chart is None:
        return OPTIONAL
    stops = [n.lineno for n in calls if (_call_name(n) or "") == "stop" or (_call_name(n) or "").startswith("require_")]
    return UNLESS_STOPPED if any(line < first_chart for line in stops) else ALWAYS


def discover_pages(app: Path = APP) -> list[AppPage]:
    """Every st.Page("views/x.py", ...) in app.py, in navigation order.

    The url path is st.Page's: `url_path=` if given, else the file stem; the default page is "/".
    """
    tree = ast.parse(app.read_text(encoding="utf-8"))
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and _call_name(n) == "Page" and n.args and isinstance(_const(n.args[0]), str)
    ]
    pages = []
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):  # source order = navigation order
        script = _const(node.args[0])
        kw = {k.arg: _const(k.value) for k in node.keywords if k.arg}
        stem = Path(script).stem
        url_path = kw.get("url_path") or stem
        pages.append(
            AppPage(
                script=script,
                title=kw.get("title") or stem.replace("_", " "),
                url="/" if kw.get("default") is True else f"/{url_path}",
                charts=chart_policy(ROOT / script),
            )
        )
    return pages


def page_params() -> list:
    """Pages of app.py as pytest params (ids = file stems)."""
    pages = discover_pages()
    if not pages:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no st.Page entries found in app.py"))]
    return [pytest.param(p, id=p.stem) for p in pages]


# --------------------------------------------------------------------------- the server


@dataclass
class Server:
    url: str
    log_path: Path

    def log_tail(self, n: int = 60) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as err:
            return f"(no server log: {err})"
        return "\n".join(lines[-n:])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _healthy(url: str) -> bool:
    try:
        with _NO_PROXY.open(f"{url}/_stcore/health", timeout=2) as resp:
            return resp.read().strip() == b"ok"
    except OSError:
        return False


@contextmanager
def streamlit_server(log_dir: Path, *, warmup: bool = True) -> Iterator[Server]:
    """Serve the lab as `make run` does (`streamlit run app.py`, its warm-up on unless `warmup=False`) on a free
    port in its own process group; kill the group afterwards."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = log_dir / f"streamlit-{port}.log"
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(ROOT / "app.py"),
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    with open(log_path, "wb") as log:
        # Runs, the registry, the class and telemetry databases go to this test session's own folders: a developer's
        # local registry would change which model the pages select, and test runs must not land in the repo's runs/.
        env = dict(
            os.environ,
            LAB_RUNS_DIR=str(log_dir / "runs"),
            LAB_REGISTRY_DIR=str(log_dir / "registry"),
            LAB_CLASS_DB=str(log_dir / "class.db"),
            LAB_TELEMETRY_DB=str(log_dir / "telemetry.db"),
            LAB_WARMUP="1" if warmup else "0",  # tests/conftest.py turns it off for AppTest, not for a real server
            LAB_TEACHER_PASSCODE=TEACHER_PASSCODE,
        )
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        server = Server(url=url, log_path=log_path)
        try:
            deadline = time.monotonic() + SERVER_START_TIMEOUT_S
            while not _healthy(url):
                if proc.poll() is not None:
                    pytest.fail(
                        f"streamlit exited with code {proc.returncode} before answering on {url}:\n{server.log_tail()}",
                        pytrace=False,
                    )
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"streamlit did not answer {url}/_stcore/health within {SERVER_START_TIMEOUT_S} s:\n"
                        f"{server.log_tail()}",
                        pytrace=False,
                    )
                time.sleep(0.25)
            yield server
        finally:
            _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One Streamlit server for the whole session (the first run imports torch: pay it once)."""
    with streamlit_server(tmp_path_factory.mktemp("streamlit")) as srv:
        yield srv


def _free_run(n: int) -> int:
    """A port P such that P .. P+n-1 are free on 127.0.0.1 (a class server's proxy, then its workers)."""
    for _ in range(50):
        base = _free_port()
        if base + n <= 65535 and all(_bindable(base + i) for i in range(1, n)):
            return base
    pytest.fail("no run of free ports found", pytrace=False)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class ClassServer(Server):
    """A running `python -m core serve --class`: `url` is the proxy's, workers on `port + 1 ..`."""

    proc: subprocess.Popen | None = None
    port: int = 0
    workers: int = 0
    env: dict | None = None  # the environment serve (and so every worker) was given

    def worker_port(self, name: str) -> int:
        """The port of worker `name` ("w1", "w2", ...: the LABWORKER cookie's value, cli.haproxy.worker_name)."""
        return self.port + int(name.lstrip("w"))


@contextmanager
def serve_class(log_dir: Path, workers: int = 2, **extra_env: str) -> Iterator[ClassServer]:
    """`python -m core serve --class --workers N` on 127.0.0.1 (HAProxy in front of N Streamlit workers), its warm-up
    off, its folders and databases under `log_dir` (`extra_env` may add or override settings, e.g. LAB_DATABASE_URL).
    Ready once the proxy and every worker answer; SIGTERM (then SIGKILL of what is left, each child's own process
    group included, a restarted worker too) on exit."""
    import psutil

    port = _free_run(workers + 1)
    url, log_path = f"http://127.0.0.1:{port}", log_dir / "serve.log"
    env = dict(
        os.environ,
        LAB_RUN_DIR=str(log_dir / "run"),
        LAB_RUNS_DIR=str(log_dir / "runs"),
        LAB_REGISTRY_DIR=str(log_dir / "registry"),
        LAB_CLASS_DB=str(log_dir / "class.db"),
        LAB_TELEMETRY_DB=str(log_dir / "telemetry.db"),
        LAB_WARMUP="0",  # two workers warming every page would take both cores from the browser
        LAB_TEACHER_PASSCODE=TEACHER_PASSCODE,
    )
    env.pop("LAB_JOIN_URL", None)  # the server chooses it: the proxy's address
    env.pop("LAB_DATABASE_URL", None)  # a developer's database server is never a test's
    env.update(extra_env)
    command = [sys.executable, "-m", "core", "serve", "--class", "--workers", str(workers), "--port", str(port)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*command, "--address", "127.0.0.1"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, env=env,
        )  # fmt: skip
    server = ClassServer(url=url, log_path=log_path, proc=proc, port=port, workers=workers, env=env)
    children: list = []
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S * 2
        for target in [url, *(f"http://127.0.0.1:{port + 1 + i}" for i in range(workers))]:
            while not _healthy(target):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the class server did not answer on {target}:\n{server.log_tail()}", pytrace=False)
                time.sleep(0.25)
        children = psutil.Process(proc.pid).children(recursive=True)
        yield server
    finally:
        try:  # a worker restarted during the test is a child the list above does not hold
            children += psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            pass
        _kill_group(proc)  # SIGTERM: serve stops every child's group itself
        for child in children:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:  # stopped already, as it should be
                pass


@pytest.fixture(scope="module")
def class_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`python -m core serve --class --workers 2` on 127.0.0.1 (HAProxy in front of two Streamlit workers), its
    warm-up off; `url` is the proxy's (serve_class)."""
    with serve_class(tmp_path_factory.mktemp("class-server")) as server:
        yield server


@dataclass(frozen=True)
class FirstVisit:
    """What the first visitor of a fresh server saw when they came in through a link to a lesson."""

    app_page: AppPage | None  # None: app.py has no page besides the default one
    nav_links: list[str]
    screenshot: Path | None
    error: str = ""  # why the visit could not be made (the test using it reports it; others go on)


@pytest.fixture(scope="session")
def first_visit(server: Server, browser, tmp_path_factory: pytest.TempPathFactory) -> FirstVisit:
    """Open a lesson's link as the very first visitor of the session server, before any other test.

    A classroom starts the server and the teacher shares a link to a lesson: that is what this
    records. Then it opens "/" once, which runs app.py's st.navigation; from then on the server
    serves app.py's navigation whatever the URL, so no other test depends on which one runs first.
    (The first run also pays the one-off torch import, keeping later tests' timings even.)
    """
    target = next((p for p in discover_pages() if p.url != "/"), None)
    context = browser.new_context(viewport=VIEWPORT, reduced_motion="reduce", service_workers="block")
    try:
        page = context.new_page()
        if target is None:
            result = FirstVisit(None, [], None)
        else:
            open_page(page, server.url, target.url)
            shot = save_screenshot(page, tmp_path_factory.mktemp("first-visit"), f"first-visit-{target.stem}")
            links = [t.strip() for t in page.locator('[data-testid="stSidebarNav"] a').all_inner_texts()]
            result = FirstVisit(target, links, shot)
        open_page(page, server.url, "/")
    except (Exception, pytest.fail.Exception) as err:  # a page broken mid-edit must not stop every test
        return FirstVisit(target, [], None, error=f"{type(err).__name__}: {err}")
    finally:
        context.close()
    return result


@pytest.fixture(scope="session")
def base_url(server: Server, first_visit: FirstVisit) -> str:
    """Overrides pytest-playwright's base_url: the session server (also the context's base_url).

    Depends on first_visit so that the server's first visitor is that deep link, whatever test runs first.
    """
    return server.url


@dataclass(frozen=True)
class Visit:
    app_page: AppPage
    page: object  # playwright Page, loaded and idle
    requests: list[str]  # every URL its context requested, WebSockets included, from before navigation


@pytest.fixture(scope="session")
def visit(browser, browser_context_args: dict, base_url: str):
    """`visit(app_page)`: the page loaded once per session in its own context, shared by the tests
    that only look (render, offline, axe). Tests that interact use the function-scoped `page`."""
    visits: dict[str, Visit | str] = {}  # url -> the loaded visit, or why loading it failed
    contexts = []

    def _visit(app_page: AppPage) -> Visit:
        if app_page.url not in visits:
            context = browser.new_context(**browser_context_args)
            contexts.append(context)
            seen: list[str] = []
            context.on("request", lambda req: seen.append(req.url))
            page = context.new_page()
            page.on("websocket", lambda ws: seen.append(ws.url))
            try:
                open_page(page, base_url, app_page.url)
            except (Exception, pytest.fail.Exception) as err:
                visits[app_page.url] = f"{type(err).__name__}: {err}"  # fail fast in the next tests
                raise
            visits[app_page.url] = Visit(app_page, page, seen)
        found = visits[app_page.url]
        if isinstance(found, str):
            pytest.fail(f"{app_page.url} could not be loaded earlier in this session: {found}", pytrace=False)
        return found

    yield _visit
    for context in contexts:
        context.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """When an e2e test fails, show the end of the server log next to it."""
    rep = yield
    srv = getattr(item, "funcargs", {}).get("server")
    if rep.failed and rep.when in ("setup", "call") and isinstance(srv, Server):
        rep.sections.append(("streamlit log (tail)", srv.log_tail()))
    return rep


# --------------------------------------------------------------------------- the browser


def chromium_path() -> str:
    """CHROMIUM_PATH, else chromium on PATH, else Debian's /usr/bin/chromium."""
    for candidate in (
        os.environ.get("CHROMIUM_PATH"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
        "/usr/bin/chromium",
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        "The browser tests need Chromium and cannot download one offline. Install Debian's "
        "(apt-get install chromium, or `make chromium`) or set CHROMIUM_PATH to a Chromium binary.",
        pytrace=False,
    )


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """Debian's Chromium with the offline flags; Playwright's own browser download cannot work here."""
    headed = browser_type_launch_args.get("headless") is False  # pytest --headed
    args = [a for a in CHROMIUM_ARGS if not (headed and a == "--headless")]
    return {**browser_type_launch_args, "executable_path": chromium_path(), "args": args}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict) -> dict:
    return {**browser_context_args, "viewport": VIEWPORT, "reduced_motion": "reduce", "service_workers": "block"}


@pytest.fixture
def requests_seen(page) -> list[str]:
    """Every URL the page's context requests (pages, workers, frames) plus WebSocket URLs, in order.

    Request the fixture before navigating: it listens from the moment it is created.
    """
    seen: list[str] = []
    page.context.on("request", lambda req: seen.append(req.url))
    page.on("websocket", lambda ws: seen.append(ws.url))
    return seen


def outside_requests(urls: list[str]) -> list[str]:
    """The URLs that would leave the machine (data:, blob: and about: never do)."""
    out = []
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob", "about", "chrome", "chrome-extension"):
            continue
        if (parts.hostname or "") not in LOCAL_HOSTS:
            out.append(url)
    return sorted(set(out))


# --------------------------------------------------------------------------- helpers for tests

# True once the app is connected, the last script run has finished, no element is stale (left
# over from a previous run), no skeleton, spinner or running indicator is shown and every Plotly
# chart has drawn its SVG.
_APP_IDLE_JS = """
() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app) return false;
  if (app.dataset.testConnectionState !== 'CONNECTED') return false;
  if (app.dataset.testScriptState !== 'notRunning') return false;
  if (document.querySelector('[data-stale="true"], [data-testid="stSkeleton"], [data-testid="stAppSkeleton"],'
      + ' [data-testid="stSpinner"], [data-testid="stStatusWidgetRunningIcon"],'
      + ' [data-testid="stStatusWidgetRunningManIcon"]')) return false;
  for (const chart of document.querySelectorAll('[data-testid="stPlotlyChart"]')) {
    if (!chart.querySelector('.js-plotly-plot .main-svg')) return false;
  }
  return true;
}
"""


def wait_for_app_idle(page, timeout_ms: int = APP_IDLE_TIMEOUT_MS, settle_checks: int = 2) -> None:
    """Poll until Streamlit has finished running and rendering, and stays so for a short moment.

    `settle_checks` consecutive idle polls 150 ms apart guard against the gap between a widget
    change and the rerun it triggers (widgets are debounced).
    """
    deadline = time.monotonic() + timeout_ms / 1000
    idle_in_a_row = 0
    while True:
        try:
            idle = page.evaluate(_APP_IDLE_JS)
        except PlaywrightError:  # the document is being replaced (navigation): not idle yet
            idle = False
        idle_in_a_row = idle_in_a_row + 1 if idle else 0
        if idle_in_a_row >= settle_checks:
            return
        if time.monotonic() > deadline:
            app = page.locator('[data-testid="stApp"]')
            state = (
                (app.get_attribute("data-test-script-state"), app.get_attribute("data-test-connection-state"))
                if app.count()
                else ("no stApp element", "")
            )
            pytest.fail(
                f"Streamlit did not finish within {timeout_ms} ms on {page.url} (script, connection state: {state})",
                pytrace=False,
            )
        page.wait_for_timeout(150)


def when_idle(page, target, timeout_ms: int = APP_IDLE_TIMEOUT_MS):
    """`target` (a locator), once the app is idle (wait_for_app_idle) and `target` is attached, visible and enabled.

    The one wait before acting on a widget. A click or a keystroke that lands while Streamlit is still running a
    script is lost (the widget it hit is replaced, or the run in progress drops the event): act only on an idle app,
    then wait for the action's result with expect(..., timeout=APP_IDLE_TIMEOUT_MS), never by acting again."""
    wait_for_app_idle(page, timeout_ms)
    expect(target).to_be_visible(timeout=timeout_ms)
    expect(target).to_be_enabled(timeout=timeout_ms)
    return target


def wait_until(page, condition, timeout_ms: int, message, *, fail: bool = True) -> bool:
    """Poll `condition()` every 100 ms until it is true; after `timeout_ms` fail with `message()` (or, with
    fail=False, return False)."""
    deadline = time.monotonic() + timeout_ms / 1000
    while not condition():
        if time.monotonic() > deadline:
            if fail:
                pytest.fail(message(), pytrace=False)
            return False
        page.wait_for_timeout(100)
    return True


def open_page(page, base_url: str, path: str = "/") -> None:
    """Navigate to base_url + path and wait until the app has run the page and drawn its charts."""
    page.goto(base_url.rstrip("/") + path, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stApp"]', timeout=APP_IDLE_TIMEOUT_MS)
    wait_for_app_idle(page)


def save_screenshot(page, tmp_path: Path, name: str) -> Path:
    """A screenshot of the whole page in tmp_path, also copied to /tmp/attention-lab-shots/<name>.png.

    Streamlit scrolls an inner container, so the viewport is grown to the content's height first.
    """
    content_height = page.evaluate(
        """() => Math.max(...['[data-testid="stMain"]', '[data-testid="stMainBlockContainer"]', 'body']
              .map(s => document.querySelector(s)).filter(Boolean).map(e => e.scrollHeight))"""
    )
    original = page.viewport_size
    grow = original and content_height and content_height > original["height"]
    if grow:
        page.set_viewport_size({"width": original["width"], "height": min(int(content_height) + 40, MAX_SHOT_HEIGHT)})
        wait_for_app_idle(page)  # charts re-layout to the new size
    path = tmp_path / f"{name}.png"
    try:
        page.screenshot(path=str(path), full_page=True, animations="disabled")
    finally:
        if grow:
            page.set_viewport_size(original)
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, SHOTS_DIR / f"{name}.png")
    return path
