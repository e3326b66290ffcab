"""The teacher passcode's lockout in a real browser (issue 24, case 3): on a server of its own (so no other browser
test meets its lockout), wrong passcodes typed as fast as the page answers end in "Too many wrong passcodes: try
again in N s" (this session's lockout); then the right passcode is refused too, in the same words, and the teacher
view stays locked. The server's record is the file beside the class database, holding its guesses left and a time
only. (The server-wide throttle across sessions and worker processes is held by tests/views/test_teacher_lockout.py
on a fake clock: reaching it here would take minutes of real waiting.)"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from ui.teacher import LOCKOUT_S, SERVER_FREE, SESSION_LIMIT

from .conftest import TEACHER_PASSCODE, VIEWPORT, open_page, streamlit_server, wait_for_app_idle, when_idle

MAX_TRIES = 40  # a refused attempt during the 1 s wait is one more round trip; the lockout comes well before
TOO_MANY = re.compile(r"Too many wrong passcodes: try again in (\d+) s\.")


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("lockout-server")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("LAB_TEACHER_ATTEMPTS", raising=False)  # the default: beside the server's class database
        with streamlit_server(log_dir, warmup=False) as srv:
            yield srv, log_dir


def submit(page, passcode: str) -> str:
    when_idle(page, page.get_by_label("Teacher passcode")).fill(passcode)
    when_idle(page, page.get_by_role("button", name="Unlock", exact=True)).click()
    wait_for_app_idle(page)
    return " ".join(page.locator('[data-testid="stAlertContentError"]').all_inner_texts())


def guess_until_locked_out(page) -> tuple[int, str]:
    """Wrong passcodes until the page announces a wait of more than a minute (the lockout, not a short delay)."""
    for tries in range(1, MAX_TRIES + 1):
        said = submit(page, f"wrong-{tries}")
        waits = [int(s) for s in TOO_MANY.findall(said)]
        if waits and waits[-1] > 60:
            return tries, said
    pytest.fail(f"no lockout after {MAX_TRIES} wrong passcodes; last said: {said!r}")


@pytest.fixture
def page(browser):
    """A page of its own context (pytest-playwright's would start the session's shared server too)."""
    context = browser.new_context(viewport=VIEWPORT, reduced_motion="reduce", service_workers="block")
    yield context.new_page()
    context.close()


def test_wrong_passcodes_lock_the_session_out_and_the_right_one_is_then_refused(own_server, page):
    server, log_dir = own_server
    open_page(page, server.url, "/checkpoint")
    tries, said = guess_until_locked_out(page)
    assert tries >= SESSION_LIMIT and "not the teacher passcode" in said  # the fifth was still compared
    said = submit(page, TEACHER_PASSCODE)
    [wait] = [int(s) for s in TOO_MANY.findall(said)]
    assert said == f"Too many wrong passcodes: try again in {wait} s." and 60 < wait <= LOCKOUT_S
    expect(page.get_by_text("unlocked for this browser session only")).to_have_count(0)
    expect(page.get_by_label("Teacher passcode")).to_be_visible()  # still locked: the form is still there

    record = (log_dir / "teacher_attempts.json").read_text()  # the server's guesses, beside its class database
    spent = SERVER_FREE - json.loads(record)["left"]  # one per wrong passcode compared, less what came back meanwhile
    assert SESSION_LIMIT - 1 < spent <= SESSION_LIMIT and TEACHER_PASSCODE not in record
