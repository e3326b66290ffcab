"""The teacher passcode cannot be guessed fast, nor turned against the teacher (issue 24 case 3, issue 35 case 3).

A session gets FREE_TRIES wrong passcodes at once, then waits of 1, 2, 4 ... s and a lockout of that session at
SESSION_LIMIT; the server compares SERVER_FREE wrong ones at once and then one per SERVER_INTERVAL_S, from every
session, thread and worker process together, so a burst of parallel attempts gets exactly that many compared, a
record that cannot be locked or written refuses (never fails open), and the teacher's right passcode is compared
within one interval of the guesses stopping. An attempt refused is not compared at all. Time is a fake clock the tests
move (ui.teacher.clock), never a sleep; a page is the Checkpoint page's teacher view through AppTest, and a crowd of
other sessions is threads calling the Unlock button's callback, each with a session state of its own.
"""

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock

from core.classroom.store import class_db_path
from tests.apptest import open_page
from ui import teacher
from ui.teacher import (
    FREE_TRIES,
    LOCKOUT_S,
    SERVER_FREE,
    SERVER_INTERVAL_S,
    SESSION_LIMIT,
    WINDOW_S,
    AttemptsRecord,
    attempts_path,
    guesses_left,
    server_wait,
    session_wait,
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


class SessionPerThread:
    """st.session_state outside a page: each thread sees the dict it last `use`d, so each thread (or each dict) is a
    browser session of its own."""

    def __init__(self):
        self._local = threading.local()

    def use(self, state: dict) -> None:
        self._local.state = state

    def get(self, key, default=None):
        return self._local.state.get(key, default)

    def __getitem__(self, key):
        return self._local.state[key]

    def __setitem__(self, key, value):
        self._local.state[key] = value

    def pop(self, key, *default):
        return self._local.state.pop(key, *default)


@contextlib.contextmanager
def outside_a_page():
    fake = SessionPerThread()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(teacher.st, "session_state", fake)
        yield fake


def press_unlock(state: dict, passcode: str) -> dict:
    """The Unlock button's callback in the browser session whose state is `state` (kept across presses)."""
    with outside_a_page() as sessions:
        sessions.use(state)
        state["teacher_passcode_input"] = passcode
        teacher._try_unlock()
    return state


def burst(n: int, passcode: str, before=lambda: None) -> list[dict]:
    """n new browser sessions press Unlock with `passcode` at the same moment: n threads, released together by a
    barrier once `before` has run (every thread started first). Their session states afterwards."""
    states: list[dict] = [{"teacher_passcode_input": passcode} for _ in range(n)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(n + 1)

    def press(state: dict) -> None:
        try:
            sessions.use(state)
            barrier.wait(timeout=60)
            teacher._try_unlock()
        except Exception as e:  # handed to the test, which fails on it
            errors.append(e)

    with outside_a_page() as sessions:
        threads = [threading.Thread(target=press, args=(state,)) for state in states]
        for thread in threads:
            thread.start()
        before()
        barrier.wait(timeout=60)
        for thread in threads:
            thread.join(timeout=60)
    assert not errors, errors
    assert all(not state["teacher_unlocked"] and state["teacher_note"] for state in states)
    return states


def test_a_session_waits_after_its_free_tries_and_a_run_locks_it_out():
    """The session's rule by hand: n wrong passcodes in a row, the last at time 0, give these waits."""
    waits = [session_wait([float(i - n + 1) for i in range(n)], 0.0) for n in range(1, SESSION_LIMIT + 1)]
    assert waits == [0.0] * FREE_TRIES + [1.0, LOCKOUT_S]  # typos cost nothing
    assert session_wait([0.0] * 4, 30.0) == 0.0  # a wait runs from the last failure
    assert session_wait([-WINDOW_S - 1.0] * SESSION_LIMIT, 0.0) == 0.0  # failures older than the window no longer count


def test_the_server_spends_a_guess_per_wrong_passcode_and_gets_one_back_per_interval():
    """The server's rule by hand: a bucket of SERVER_FREE guesses, one back every SERVER_INTERVAL_S, never more than
    SERVER_FREE; a time in the future (a clock set back) gives none back."""
    assert guesses_left(0.0, 0.0, SERVER_INTERVAL_S / 2) == 0.5 and server_wait(0.5) == SERVER_INTERVAL_S / 2
    assert guesses_left(0.0, 0.0, SERVER_INTERVAL_S) == 1.0 and server_wait(1.0) == 0.0
    assert guesses_left(3.0, 0.0, 1e9) == SERVER_FREE  # a quiet night refills it, no further
    assert guesses_left(0.0, 100.0, 0.0) == 0.0 and server_wait(0.0) == SERVER_INTERVAL_S


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
    assert PASSCODE not in attempts_path().read_text()  # only the guesses left and a time are kept


def test_a_burst_of_parallel_sessions_gets_exactly_the_servers_guesses_compared(server, clock, compared):
    """40 sessions at one instant (threads of one worker): the check, the comparison and the record are one step,
    so exactly SERVER_FREE are compared, as one after another would be (a race compared 18 of 40)."""
    burst(40, "wrong guess")
    assert len(compared) == SERVER_FREE
    assert json.loads(attempts_path().read_text())["left"] == 0.0


BURST = """
import sys
import time
from pathlib import Path
from ui import teacher
from tests.views.test_teacher_lockout import burst, T0
teacher.clock = lambda: T0
compared = []
real = teacher.passcode_matches
teacher.passcode_matches = lambda typed, configured: compared.append(1) or real(typed, configured)
ready, go = Path(sys.argv[1]), Path(sys.argv[2])


def when_both_are_ready():
    ready.touch()
    while not go.exists():
        time.sleep(0.005)


burst(20, "wrong guess", before=when_both_are_ready)
print(len(compared))
"""


def test_worker_processes_share_the_critical_section(server, tmp_path):
    """Two worker processes, 20 sessions each, all at one instant: SERVER_FREE compared in all (a lock of one process,
    or a check outside the lock, would let each process compare its own)."""
    env = {**os.environ, "LAB_TEACHER_ATTEMPTS": str(attempts_path())}
    ready = [tmp_path / f"ready-{k}" for k in (0, 1)]
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BURST, str(r), str(go)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
        )
        for r in ready
    ]
    try:
        while not all(r.exists() for r in ready) and all(p.poll() is None for p in procs):
            time.sleep(0.005)  # until both have imported and started their threads (or one died: its output says why)
        go.touch()
        outs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sum(int(out) for out in outs) == SERVER_FREE


def test_a_record_that_cannot_be_locked_or_written_refuses_without_comparing(server, clock, compared, monkeypatch):
    """Never fail open: while the lock is held past LOCK_TIMEOUT_S, or the record cannot be written, the right
    passcode does not unlock and a wrong one is not compared (it would be a guess counted as nothing)."""
    at = open_page("checkpoint")
    with monkeypatch.context() as mp, FileLock(str(attempts_path()) + ".lock"):  # an attempt that does not finish
        mp.setattr(teacher, "LOCK_TIMEOUT_S", 0.05)
        said = [attempt(at, "wrong guess"), attempt(at, PASSCODE)]
    assert not compared and not unlocked(at)
    assert said == [said[0]] * 2 and said[0].startswith("The passcode cannot be checked right now")
    assert str(attempts_path()) not in said[0]  # the server's paths are for its log

    def unwritable(path, data):
        raise PermissionError(13, "Permission denied", str(path))

    with monkeypatch.context() as mp:
        mp.setattr(teacher, "write_json_atomic", unwritable)
        said = [attempt(at, "wrong guess"), attempt(at, PASSCODE)]
    assert not compared and not unlocked(at) and said == [said[0]] * 2
    attempt(at, PASSCODE)  # the record is usable again: nothing was counted meanwhile
    assert unlocked(at) and len(compared) == 1


def test_after_a_burst_the_right_passcode_is_compared_within_one_interval(server, clock, compared):
    """Other sessions spend every guess and go on pressing; the teacher's right passcode waits at most one interval
    (not a lockout), and attempts refused meanwhile are not counted, so they do not put that interval off."""
    burst(40, "wrong guess")
    teacher_view = open_page("checkpoint")
    clock.now += 1
    said = attempt(teacher_view, PASSCODE)
    assert said == f"Too many wrong passcodes: try again in {SERVER_INTERVAL_S - 1:.0f} s." and not unlocked(
        teacher_view
    )
    clock.now += SERVER_INTERVAL_S / 2
    burst(20, "wrong guess")  # refused uncompared
    assert len(compared) == SERVER_FREE
    clock.now = T0 + SERVER_INTERVAL_S
    attempt(teacher_view, PASSCODE)
    assert unlocked(teacher_view) and len(compared) == SERVER_FREE + 1


def test_a_wrong_guess_every_five_minutes_after_a_burst_never_keeps_the_teacher_out(server, clock, compared):
    """A burst, then one wrong passcode every 5 minutes from other sessions, for an hour: a second after each, the
    teacher's right passcode unlocks a new tab (it was refused for the whole lesson when the server locked everyone
    out for 5 minutes after each)."""
    burst(SERVER_FREE, "wrong guess")
    for k in range(1, 13):
        clock.now = T0 + 300 * k
        assert "not the teacher passcode" in press_unlock({}, f"wrong-{k}")["teacher_note"]
        clock.now += 1
        assert press_unlock({}, PASSCODE)["teacher_unlocked"] is True
    assert len(compared) == SERVER_FREE + 2 * 12


def test_an_hour_of_guessing_from_new_sessions_compares_at_most_the_free_guesses_and_one_an_interval(
    server, clock, compared
):
    """The bound the module docstring states: in t seconds at most SERVER_FREE + t / SERVER_INTERVAL_S wrong
    passcodes are compared, however many sessions press; a script pressing every 10 s in a new tab gets just that."""
    hour = 3600
    for k in range(hour // 10 + 1):
        clock.now = T0 + 10 * k
        press_unlock({}, f"guess-{k}")
    bound = SERVER_FREE + hour / SERVER_INTERVAL_S
    assert bound - 1 <= len(compared) <= bound  # a throttle, not a lockout: the last guess back may be a hair short


def test_every_failure_is_logged_without_the_guess(server, clock, caplog):
    at = open_page("checkpoint")
    guesses = ("first-guess-3e1", "second-guess-77a")
    with caplog.at_level(logging.INFO, logger="ui.teacher"):
        for guess in guesses:
            attempt(at, guess)
    mine = [r for r in caplog.records if r.name == "ui.teacher"]
    warnings = [r.getMessage() for r in mine if r.levelno == logging.WARNING]
    assert warnings == [
        f"wrong teacher passcode: 1 in a row in this session; the server has {SERVER_FREE - 1} of its 10 guesses left",
        f"wrong teacher passcode: 2 in a row in this session; the server has {SERVER_FREE - 2} of its 10 guesses left",
    ]
    assert not [r for r in mine if any(guess in r.getMessage() for guess in guesses)]


def test_a_damaged_record_counts_as_unused_and_is_rewritten(tmp_path, clock, caplog):
    path = tmp_path / "attempts.json"
    record = AttemptsRecord(path)
    for damaged in ("[" * 1000 + "]" * 1000, '{"left": "none", "at": 0}', '{"left": NaN, "at": 0}'):
        path.write_text(damaged)
        with caplog.at_level(logging.WARNING, logger="ui.teacher"):
            assert record.read() == (SERVER_FREE, 0.0)
        assert "the attempts record" in caplog.text
    assert f"{path}: nested 1,000 levels deep" in caplog.text
    assert record.attempt(lambda: False).left == SERVER_FREE - 1
    assert json.loads(path.read_text()) == {"left": SERVER_FREE - 1, "at": T0}


def test_the_default_record_sits_beside_the_class_database(tmp_path):
    assert attempts_path({}) == class_db_path().parent / "teacher_attempts.json"
    assert attempts_path({"LAB_TEACHER_ATTEMPTS": str(tmp_path / "x.json")}) == tmp_path / "x.json"
