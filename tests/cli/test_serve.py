"""`python -m core serve`: the HAProxy configuration (checked by HAProxy itself), the refusals of a class server, the
addresses it prints, and real servers: one laptop, and a class of two workers behind the proxy, one of them killed.

The server tests start real processes in their own process groups and always stop them in a `finally`, whatever
failed; every wait is a bounded poll, never a sleep that decides anything.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from cli.haproxy import COOKIE, WORKER_HEADER, ProxySettings, haproxy_config
from cli.serve import configured_passcode, join_urls, network_ipv4

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180  # two workers starting on a busy 2-core machine
PASSCODE = "serve-test-5b27"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def haproxy() -> str:
    found = shutil.which("haproxy")
    if found is None:
        pytest.fail("these tests need HAProxy: apt-get install haproxy (lab.py test installs it)", pytrace=False)
    return found


# --------------------------------------------------------------------------- the configuration


@pytest.fixture(scope="module")
def pem(tmp_path_factory) -> Path:
    """A throwaway self-signed certificate and its key in one PEM, as LAB_TLS_CERT names one."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=lab",
         "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    (d / "lab.pem").write_bytes((d / "cert.pem").read_bytes() + (d / "key.pem").read_bytes())
    return d / "lab.pem"


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_the_generated_configuration_passes_haproxy_check_with_cookie_affinity(tmp_path, pem, tls):
    settings = ProxySettings(
        "0.0.0.0",
        8443 if tls else 8501,
        (9001, 9002, 9003),
        tls_cert=pem if tls else None,
        http_port=8080 if tls else None,
    )
    text = haproxy_config(settings)
    (tmp_path / "haproxy.cfg").write_text(text, encoding="utf-8")
    check = subprocess.run([haproxy(), "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    lines = [line.split("#")[0].strip() for line in text.splitlines()]
    assert f"cookie {COOKIE} insert indirect nocache httponly" + (" secure" if tls else "") in lines
    assert [line for line in lines if line.startswith("server ")] == [
        f"server w{i} 127.0.0.1:{port} check cookie w{i}" for i, port in ((1, 9001), (2, 9002), (3, 9003))
    ]
    assert not any(re.match(r"balance\s+source", line) for line in lines)  # a school's NAT: one address for all
    for wanted in ("option httpchk GET /_stcore/health", "option redispatch 1", "timeout tunnel 1h"):
        assert wanted in lines
    binds = [line for line in lines if line.startswith("bind ")]
    assert binds == ([f'bind 0.0.0.0:8443 ssl crt "{pem}"', "bind 0.0.0.0:8080"] if tls else ["bind 0.0.0.0:8501"])


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(address="0.0.0.0\n    bind 1.2.3.4:1"), "IPv4 address"),
        (dict(address="localhost"), "IPv4 address"),
        (dict(port=70000), "1 to 65535"),
        (dict(worker_ports=(8501,)), "must all differ"),
        (dict(worker_ports=()), "1 to 32 workers"),
        (dict(tls_cert=Path('/tmp/a" ssl crt /etc/x.pem')), "LAB_TLS_CERT"),
        (dict(http_port=8080), "only with TLS"),
    ],
)
def test_settings_that_would_write_a_wrong_or_injected_configuration_are_refused(kwargs, words):
    given = dict(address="0.0.0.0", port=8501, worker_ports=(8502, 8503)) | kwargs
    with pytest.raises(ValueError, match=words):
        ProxySettings(**given)


# --------------------------------------------------------------------------- refusals


def serve(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", "serve", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This environment without a passcode, a join address or a certificate; HOME in tmp (no ~/.streamlit)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LAB_TEACHER_PASSCODE", "LAB_JOIN_URL", "LAB_TLS_CERT")}
    return env | {"HOME": str(tmp_path), "LAB_RUN_DIR": str(tmp_path / "run")} | extra


def test_a_class_server_is_refused_without_a_teacher_passcode(tmp_path):
    if (ROOT / ".streamlit" / "secrets.toml").is_file():
        pytest.skip("this checkout has a .streamlit/secrets.toml, which may hold a passcode")
    done = serve("--class", env=clean_env(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "LAB_TEACHER_PASSCODE" in done.stderr and "secrets.toml" in done.stderr
    assert not (tmp_path / "run").exists()  # nothing was started or written


def test_a_class_server_is_refused_without_haproxy(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    done = serve("--class", env=clean_env(tmp_path, PATH=str(empty), LAB_TEACHER_PASSCODE=PASSCODE))
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "apt-get install haproxy" in done.stderr


def test_the_passcode_is_found_as_the_workers_find_it(tmp_path):
    home, project = tmp_path / "home.toml", tmp_path / "project.toml"
    home.write_text('LAB_TEACHER_PASSCODE = "from-home"\n', encoding="utf-8")
    assert configured_passcode({}, [home, project]) == "from-home"  # the project's file is missing: no error
    project.write_text("LAB_TEACHER_PASSCODE = 1234\n", encoding="utf-8")
    assert configured_passcode({}, [home, project]) == "1234"  # the project's wins; a number counts as its digits
    assert configured_passcode({"LAB_TEACHER_PASSCODE": "env"}, [home, project]) == "env"
    project.write_text('LAB_TEACHER_PASSCODE = "   "\n', encoding="utf-8")
    assert configured_passcode({"LAB_TEACHER_PASSCODE": " "}, [project]) == ""
    project.write_text("this is [not toml", encoding="utf-8")
    assert configured_passcode({}, [project]) == ""


# --------------------------------------------------------------------------- the addresses learners type


def test_the_network_addresses_are_those_of_the_interfaces_that_are_up():
    """Against iproute2's own list (`ip -4 -o addr show up`), without loopback and link-local addresses."""
    if shutil.which("ip") is None:
        pytest.skip("iproute2's `ip` is the reference here")
    listed = subprocess.run(["ip", "-4", "-o", "addr", "show", "up"], capture_output=True, text=True, check=True)
    want = {
        a
        for a in re.findall(r"\binet (\d+\.\d+\.\d+\.\d+)/", listed.stdout)
        if not (ipaddress.IPv4Address(a).is_loopback or ipaddress.IPv4Address(a).is_link_local)
    }
    assert set(network_ipv4()) == want


def test_the_join_addresses_name_the_port_unless_it_is_the_schemes_default(pem):
    assert join_urls(ProxySettings("10.1.2.3", 8501, (8502,))) == ["http://10.1.2.3:8501/"]
    assert join_urls(ProxySettings("10.1.2.3", 443, (8502,), tls_cert=pem)) == ["https://10.1.2.3/"]
    every = join_urls(ProxySettings("0.0.0.0", 80, (8502,)))
    assert every == [f"http://{a}/" for a in network_ipv4()] + [f"http://{socket.gethostname()}/"]


# --------------------------------------------------------------------------- real servers


def free_ports(n: int) -> int:
    """A port P such that P .. P+n-1 are all free on 127.0.0.1 now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n <= 65535 and all(_free(base + i) for i in range(n)):
            return base
    pytest.fail("no run of free ports found")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def get(port: int, path: str = "/_stcore/health", worker: str | None = None):
    """(status, headers) of one GET through 127.0.0.1:port, with a LABWORKER cookie when `worker` is given."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if worker is not None:
        request.add_header("Cookie", f"{COOKIE}={worker}")
    try:
        with _NO_PROXY.open(request, timeout=10) as r:
            r.read()
            return r.status, r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.headers
    except OSError:
        return None, None


def answered_by(port: int, worker: str | None = None) -> str | None:
    """The worker that answered a GET through the proxy (X-Lab-Worker), None when nothing answered."""
    headers = get(port, worker=worker)[1]
    return None if headers is None else headers.get(WORKER_HEADER)


def wait_for(condition, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout:g} s; serve's output:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.25)


def start_serve(args: list[str], tmp_path: Path, **extra: str) -> tuple[subprocess.Popen, Path]:
    env = clean_env(
        tmp_path, LAB_WARMUP="0", LAB_TEACHER_PASSCODE=PASSCODE, LAB_RUNS_DIR=str(tmp_path / "runs"),
        LAB_REGISTRY_DIR=str(tmp_path / "registry"), LAB_CLASS_DB=str(tmp_path / "class.db"),
        LAB_TELEMETRY_DB=str(tmp_path / "telemetry.db"), **extra,
    )  # fmt: skip
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "core", "serve", *args], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return proc, log


def descendants(proc: subprocess.Popen) -> list[psutil.Process]:
    try:
        return psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def stop_everything(proc: subprocess.Popen, children: list[psutil.Process]) -> None:
    """Teardown whatever happened: SIGTERM serve (which stops its children), then kill anything left."""
    children = children + descendants(proc)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for child in children:
        try:
            os.killpg(child.pid, signal.SIGKILL) if child.is_running() else None
        except OSError:
            pass


def test_one_laptop_serves_on_localhost_and_stops_on_sigterm(tmp_path):
    port = free_ports(1)
    proc, log = start_serve(["--port", str(port)], tmp_path)
    children: list[psutil.Process] = []
    try:
        wait_for(lambda: get(port)[0] == 200, START_TIMEOUT_S, f"the lab did not answer on port {port}", log)
        children = descendants(proc)
        commands = [" ".join(c.cmdline()) for c in children]
        assert any("ui.warmup --url http://localhost:" + str(port) in c for c in commands), commands
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert get(port) == (None, None)
        assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    finally:
        stop_everything(proc, children)


def test_a_class_of_two_workers_keeps_affinity_survives_a_dead_worker_and_stops_cleanly(tmp_path):
    port = free_ports(3)
    w1, w2 = port + 1, port + 2
    proc, log = start_serve(["--class", "--workers", "2", "--port", str(port), "--address", "127.0.0.1"], tmp_path)
    children: list[psutil.Process] = []
    try:
        for p in (port, w1, w2):
            wait_for(lambda p=p: get(p)[0] == 200, START_TIMEOUT_S, f"nothing healthy answered on port {p}", log)
        for name in ("w1", "w2"):  # HAProxy's own health checks have seen the worker up
            wait_for(lambda name=name: answered_by(port, name) == name, 30, f"{name} never in use", log)
        assert f"http://127.0.0.1:{port}/" in log.read_text()  # the address learners type

        for _ in range(2):  # a new browser is given a worker and a cookie naming it
            status, headers = get(port)
            assert status == 200
            cookie = re.search(rf"\b{COOKIE}=(w[12]);", " ".join(headers.get_all("Set-Cookie", [])))
            assert cookie is not None and cookie.group(1) == headers[WORKER_HEADER], dict(headers)
        for worker in ("w1", "w2", "w2", "w1"):  # a browser holding a cookie is answered by that worker
            assert answered_by(port, worker) == worker

        children = descendants(proc)
        worker1 = [c for c in children if f"--server.port {w1}" in " ".join(c.cmdline())]
        assert len(worker1) == 1, [c.cmdline() for c in children]
        os.killpg(worker1[0].pid, signal.SIGKILL)
        worker1[0].wait(timeout=10)
        for _ in range(3):  # a learner pinned to the dead worker is answered by the live one, with no error
            status, headers = get(port, worker="w1")
            assert status == 200 and headers[WORKER_HEADER] == "w2"
        wait_for(lambda: get(w1)[0] == 200, START_TIMEOUT_S, "worker 1 was not started again on its port", log)
        assert re.search(r"worker w1 \(port \d+\) exited with status -9; starting it again", log.read_text())
        wait_for(lambda: answered_by(port, "w1") == "w1", 30, "the proxy never took w1 back", log)

        children = descendants(proc)  # the restarted worker included
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert [get(p) for p in (port, w1, w2)] == [(None, None)] * 3
        assert not [c.cmdline() for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    finally:
        stop_everything(proc, children)


def test_when_haproxy_dies_the_class_server_says_so_and_stops_its_workers(tmp_path):
    port = free_ports(2)
    proc, log = start_serve(["--class", "--workers", "1", "--port", str(port), "--address", "127.0.0.1"], tmp_path)
    children: list[psutil.Process] = []
    try:
        wait_for(lambda: get(port + 1)[0] == 200, START_TIMEOUT_S, "the worker did not answer", log)
        children = descendants(proc)
        proxy = [c for c in children if c.name() == "haproxy"]
        assert len(proxy) == 1, [c.cmdline() for c in children]
        os.killpg(proxy[0].pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == 1
        assert re.search(r"error: HAProxy stopped \(exit status -9\), so the class server stops", log.read_text())
        assert [get(p) for p in (port, port + 1)] == [(None, None)] * 2
        assert not [c.cmdline() for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    finally:
        stop_everything(proc, children)
