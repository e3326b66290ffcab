"""The Streamlit way, on a fresh machine: `pip install -r requirements.txt` then `streamlit run app.py`.

A new venv of this Python installs from requirements.txt alone (not the lab's own package: `streamlit run` finds
core/ and ui/ beside app.py), holds no CUDA package, and the server it starts runs every lab page without an error
(opened over Streamlit's own websocket by ui.warmup.visit, as a browser would).

PIP_RETRIES=1: these machines have no route to PyTorch's CPU index (requirements.txt's --extra-index-url) and take
torch from a local wheel; with pip's default five retries each of about sixty lookups would wait about 8 s for an
index that cannot answer. On a normal network the index answers at once and the setting changes nothing.
"""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ui.warmup import WARM_PAGES, visit

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 1200
START_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"streamlit exited with {proc.returncode}"
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read() == b"ok":
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"{url} did not answer within {timeout} s")


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    env = {**os.environ, "PIP_RETRIES": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "-r", "requirements.txt"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    return py


def test_the_environment_holds_no_cuda_package(fresh_venv):
    listed = subprocess.run(
        [str(fresh_venv), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout.lower()
    assert "torch==" in listed
    cuda = [line for line in listed.splitlines() if line.startswith(("nvidia-", "cuda-", "triton"))]
    assert cuda == [], "the CPU build of torch needs no CUDA libraries"


def test_streamlit_run_app_py_serves_every_page(fresh_venv, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "LAB_WARMUP": "0",
        "LAB_CLASS_DB": str(tmp_path / "class.db"),
        "LAB_TELEMETRY_DB": str(tmp_path / "telemetry.db"),
        "LAB_REGISTRY_DIR": str(tmp_path / "registry"),
        "LAB_RUNS_DIR": str(tmp_path / "runs"),
    }
    streamlit = [str(fresh_venv), "-m", "streamlit", "run", "app.py"]
    options = ["--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(
        [*streamlit, *options], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_healthy(url, proc, START_TIMEOUT_S)
        result = visit(url, WARM_PAGES)
        assert result.errors == ()
        assert len(result.pages) == len(WARM_PAGES)
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
