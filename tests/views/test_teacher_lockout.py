"""The teacher passcode cannot be guessed at 8 a second (issue 24, case 3): after the first FREE_TRIES wrong passcodes
each further one makes the next attempt wait 1, 2, 4 ... s, SESSION_LIMIT in a session or SERVER_LIMIT on the server
lock out for LOCKOUT_S, and an attempt refused meanwhile is not compared at all, a right one included. The server's
count lives in one file shared by worker processes. Time is a fake clock the tests move (ui.teacher.clock), never a
sleep; the pages are the Checkpoint page's teacher view, through AppTest."""

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from core.classroom.store import class_db_path
from tests.apptest import open_page
from ui import teacher
from ui.teacher import (
    FREE_TRIES,
    LOCKOUT_S,
    MAX_DELAY_S,
    SERVER_LIMIT,
    SESSION_LIMIT,
    WINDOW_S,
    AttemptsRecord,
    attempts_path,
    wait_seconds,
)

PASSCODE = "lockout-9b2d-teacher"
ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000.0


class FakeClock:
    def __init__(self):
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(teacher, "clock", fake)
    return fake


@pytest.fixture
def compared(monkeypatch):
    """Every passcode comparison made (hmac.compare_digest's calls): a refused attempt must add none."""
    calls = []
    real = teacher.hmac.compare_digest
    monkeypatch.setattr(teacher.hmac, "compare_digest", lambda a, b: calls.append(1) or real(a, b))
    return calls


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A configured passcode and a class database (the Checkpoint page's teacher view is what the gate guards)."""
    monkeypatch.setenv("LAB_CLASS_DB", str(tmp_path / "class.db"))
    monkeypatch.setenv("LAB_TEACHER_PASSCODE", PASSCODE)
    return tmp_path


def attempt(at, passcode: str) -> str:
    at.text_input(key="teacher_passcode_input").input(passcode)
    next(b for b in at.button if b.label == "Unlock").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return " ".join(e.value for e in at.error)


def unlocked(at) -> bool:
    return at.session_state["teacher_unlocked"] is True


def test_the_wait_grows_after_the_free_tries_and_a_run_locks_out():
    """The rule by hand: n wrong passcodes in a row, the last at time 0, give these waits."""
    session = {n: wait_seconds([-1.0 * (n - i) for i in range(1, n)] + [0.0], [], 0.0) for n in range(1, 6)}
    assert [session[n] for n in range(1, FREE_TRIES + 1)] == [0.0] * FREE_TRIES  # typos cost nothing
    assert (session[FREE_TRIES + 1], session[SESSION_LIMIT]) == (1.0, LOCKOUT_S)
    server = [wait_seconds([], [float(-i) for i in range(n)][::-1], 0.0) for n in range(1, SERVER_LIMIT + 1)]
    assert server == [0.0, 0.0, 0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, LOCKOUT_S]
    assert wait_seconds([], [float(-i) for i in range(12)][::-1], 0.0) == LOCKOUT_S
    assert wait_seconds([0.0] * 4, [], 30.0) == 0.0  # a wait runs from the last failure
    old = [-WINDOW_S - 1.0] * SERVER_LIMIT  # failures older than the window no longer count
    assert wait_seconds(old, old, 0.0) == 0.0


def test_a_session_is_slowed_then_locked_out_and_a_right_passcode_meanwhile_is_not_compared(server, clock, compared):
    at = open_page("checkpoint")
    for _ in range(FREE_TRIES):  # answered at once, as before
        said = attempt(at, "wrong guess")
        assert said.startswith("Refused: that is not the teacher passcode") and "Too many" not in said
    said = attempt(at, "wrong guess")  # the fourth: the next attempt waits 1 s
    assert said.endswith("Too many wrong passcodes: try again in 1 s.")
    assert len(compared) == FREE_TRIES + 1

    said = attempt(at, PASSCODE)  # the right one, within that second: refused, not compared
    assert said == "Too many wrong passcodes: try again in 1 s." and not unlocked(at)
    assert len(compared) == FREE_TRIES + 1

    clock.now += 1
    said = attempt(at, "wrong again")  # the fifth in a row: locked out
    assert said.endswith(f"Too many wrong passcodes: try again in {LOCKOUT_S:.0f} s.")
    clock.now += LOCKOUT_S - 0.5
    wrong, right = attempt(at, "another guess"), attempt(at, PASSCODE)
    assert wrong == right == "Too many wrong passcodes: try again in 1 s."  # the same words: nothing is given away
    assert not unlocked(at) and len(compared) == SESSION_LIMIT

    clock.now += 0.5
    attempt(at, PASSCODE)
    assert unlocked(at) and len(compared) == SESSION_LIMIT + 1
    assert PASSCODE not in json.dumps(json.loads(attempts_path().read_text()))  # only times are kept


def test_the_server_locks_everyone_out_after_its_limit_across_sessions(server, clock, compared):
    """Two sessions share the server's count (a script that opens new sessions gains nothing); a third session's
    right passcode is refused without being compared."""
    for _session in range(2):
        at = open_page("checkpoint")
        for _ in range(SERVER_LIMIT // 2):
            clock.now += MAX_DELAY_S  # past any wait so far: every one of these is compared
            attempt(at, "wrong guess")
    assert len(compared) == SERVER_LIMIT
    assert len(json.loads(attempts_path().read_text())["failures"]) == SERVER_LIMIT

    fresh = open_page("checkpoint")
    clock.now += 1
    said = attempt(fresh, PASSCODE)
    assert said == f"Too many wrong passcodes: try again in {LOCKOUT_S - 1:.0f} s." and not unlocked(fresh)
    assert len(compared) == SERVER_LIMIT
    clock.now += LOCKOUT_S
    attempt(fresh, PASSCODE)
    assert unlocked(fresh)


def test_every_failure_is_logged_without_the_guess(server, clock, caplog):
    at = open_page("checkpoint")
    with caplog.at_level(logging.INFO, logger="ui.teacher"):
        for guess in ("first-guess-3e1", "second-guess-77a"):
            attempt(at, guess)
    mine = [r for r in caplog.records if r.name == "ui.teacher"]
    warnings = [r.getMessage() for r in mine if r.levelno == logging.WARNING]
    assert warnings == [
        "wrong teacher passcode: 1 in a row in this session, 1 on this server in the last 10 min",
        "wrong teacher passcode: 2 in a row in this session, 2 on this server in the last 10 min",
    ]
    assert not [r for r in mine if "guess" in r.getMessage()]


def test_a_damaged_record_counts_as_empty_and_is_rewritten(tmp_path, caplog):
    path = tmp_path / "attempts.json"
    path.write_text("[" * 1000 + "]" * 1000)
    record = AttemptsRecord(path)
    with caplog.at_level(logging.WARNING, logger="ui.teacher"):
        assert record.recent(T0) == []
    assert "the attempts record is damaged" in caplog.text and f"{path}: nested 1,000 levels deep" in caplog.text
    assert record.add(T0) == [T0] and json.loads(path.read_text()) == {"failures": [T0]}


def test_the_default_record_sits_beside_the_class_database(tmp_path):
    assert attempts_path({}) == class_db_path().parent / "teacher_attempts.json"
    assert attempts_path({"LAB_TEACHER_ATTEMPTS": str(tmp_path / "x.json")}) == tmp_path / "x.json"


WORKER = """
import sys
from pathlib import Path
from ui.teacher import AttemptsRecord
record, first = AttemptsRecord(Path(sys.argv[1])), float(sys.argv[2])
for i in range(6):
    record.add(first + 2 * i)
"""


def test_worker_processes_count_together_under_the_file_lock(tmp_path):
    """Two processes add six failures each at once, at interleaved times: the file keeps the latest SERVER_LIMIT of
    all twelve (a lost update, two workers rewriting the file from the same read, would drop some)."""
    path = tmp_path / "attempts.json"
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(path), str(T0 + k)], cwd=ROOT, stderr=subprocess.PIPE)
        for k in (0, 1)
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    every = sorted(T0 + k + 2 * i for k in (0, 1) for i in range(6))
    assert AttemptsRecord(path).recent(every[-1]) == every[-SERVER_LIMIT:]
