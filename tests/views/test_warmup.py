"""The server's warm-up (ui/warmup.py): the pages it opens are the app's, it is off when asked, and a server
that does not answer gives a reported error, never an exception or a hang. tests/e2e/test_warmup.py watches
a real server warm itself."""

import re
import socket
import time
from pathlib import Path

import pytest

from ui import warmup

ROOT = Path(__file__).resolve().parents[2]


def test_every_warmed_page_is_a_page_of_the_app():
    app = (ROOT / "app.py").read_text(encoding="utf-8")  # a page's url path: its file's stem, or a package's url_path
    pages = set(re.findall(r'st\.Page\("views/(\w+)\.py"', app)) | set(re.findall(r'url_path="(\w+)"', app))
    assert {"inspector", "release"} <= pages
    assert set(warmup.WARM_PAGES) <= pages
    assert {"training", "release", "monitoring"}.isdisjoint(warmup.WARM_PAGES)  # they compute on request only


@pytest.mark.parametrize("value, on", [(None, True), ("1", True), ("0", False), ("off", False), (" False ", False)])
def test_lab_warmup_turns_it_on_and_off(monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv(warmup.ENV, raising=False)
    else:
        monkeypatch.setenv(warmup.ENV, value)
    assert warmup.enabled() is on


def test_a_server_that_does_not_answer_is_reported_not_raised():
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        started = time.monotonic()
        result = warmup.visit(f"http://127.0.0.1:{port}", ("masks",), timeout=5)
    assert time.monotonic() - started < 30  # refused at once, not waited on (a bound on the test, not a speed claim)
    assert len(result.errors) == 1 and "could not be reached" in result.errors[0]
    assert "1 errors" in result.describe()


def test_the_command_refuses_a_lab_on_another_machine(capsys):
    assert warmup.main(["--url", "http://example.org:8501"]) == 2
    assert "this machine's lab" in capsys.readouterr().err
