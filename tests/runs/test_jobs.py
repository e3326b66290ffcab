"""The training queue on disk: a server-wide limit across workers (two JobQueues on one runs folder stand for two
Streamlit workers), places in line, one run per session, a stop that acts within a step, failures as data, a
killed run's slot freed by the OS, and a log read back whole lines only."""

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from core.runs import queue as run_queue
from core.runs.queue import ALIVE, DONE, FAILED, FINISHED, JOB, LOG, QUEUED, RUNNING, STOPPED, JobError, JobQueue
from tests.runs import job_fixture

FIXTURE = job_fixture  # a stand-in run process: steps, gates opened by files, should_stop


def wait_for(predicate, timeout=120.0):  # polls: a long limit costs nothing when the condition comes early
    done = threading.Event()
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        done.wait(0.02)
    raise AssertionError("condition not reached in time")


def workers(tmp_path, n=2, max_running=1):
    """`n` independent queues on one runs folder: what `n` Streamlit worker processes each hold."""
    return [JobQueue(tmp_path / "runs", max_running, entry=FIXTURE) for _ in range(n)]


def open_gate(queue, job_id, name):
    (queue.runs_dir / job_id / name).touch()


def test_two_workers_with_a_limit_of_one_never_run_two_at_once_and_the_second_waits_first_in_line(tmp_path):
    first, second = workers(tmp_path)
    a = first.submit("alice", {"steps": 2, "hold_end": True}, name="a")
    b = second.submit("bob", {"steps": 2}, name="b")
    wait_for(lambda: second.view(a).state == RUNNING)
    for q in (first, second):  # both workers read the same line from the runs folder
        assert (q.view(a).state, q.view(a).place) == (RUNNING, 0)
        assert (q.view(b).state, q.view(b).place) == (QUEUED, 1)
    c = first.submit("carol", {"steps": 1}, name="c")
    assert second.view(c).place == 2  # arrival order across workers
    open_gate(first, a, "finish")
    views = [second.wait(j, 120) for j in (a, b, c)]
    assert [v.state for v in views] == [DONE, DONE, DONE]
    # Never two at once: each run started after the one before it had ended (times from the runs' own logs).
    assert views[0].finished <= views[1].started and views[1].finished <= views[2].started
    assert views[1].result == {"last_step": 1, "stopped": False}


def test_a_second_worker_sees_the_first_workers_run_and_its_events_in_order(tmp_path):
    first, second = workers(tmp_path)
    job = first.submit("alice", {"steps": 5, "hold_end": True})
    wait_for(lambda: len(second.view(job).events) == 5)
    view = second.view(job)
    assert view.state == RUNNING and [e["step"] for e in view.events] == [0, 1, 2, 3, 4]
    assert view.owner != "alice" and "alice" not in (tmp_path / "runs" / job / "job.json").read_text()  # hashed
    open_gate(second, job, "finish")
    assert first.wait(job, 120).state == DONE


def test_one_unfinished_run_per_session_on_every_worker_and_sessions_see_only_their_own(tmp_path):
    first, second = workers(tmp_path, max_running=2)
    a = first.submit("alice", {"steps": 1, "hold_end": True})
    with pytest.raises(JobError, match="already has a run"):
        second.submit("alice", {"steps": 1})  # the learner's next page served by another worker
    b = second.submit("bob", {"steps": 1})
    assert [v.id for v in second.jobs_of("alice")] == [a]
    assert [v.id for v in first.jobs_of("bob")] == [b]
    open_gate(first, a, "finish")
    assert first.wait(a, 120).state == DONE and first.wait(b, 120).state == DONE
    assert second.active_job("alice") is None
    first.wait(second.submit("alice", {"steps": 1}), 120)  # a finished run frees the session's place


def test_a_stop_acts_at_the_next_step_and_a_waiting_run_never_starts(tmp_path):
    first, second = workers(tmp_path)
    running = first.submit("a", {"steps": None, "hold_at": 3})  # runs until stopped; holds after step 3
    waiting = second.submit("b", {"steps": 1})
    wait_for(lambda: len(first.view(running).events) == 4)
    second.stop(waiting)  # from the other worker
    assert first.wait(waiting, 120).state == STOPPED and first.view(waiting).started is None
    second.stop(running)  # requested while the run holds after step 3 ...
    open_gate(first, running, "go")  # ... then it goes on: the stop must act at the next step's check
    view = first.wait(running, 120)
    assert view.state == STOPPED and view.result == {"last_step": 3, "stopped": True}
    assert [e["step"] for e in view.events] == [0, 1, 2, 3]  # zero steps after the request


def test_a_failing_run_reports_its_message_and_frees_the_slot(tmp_path):
    first, second = workers(tmp_path)
    bad = first.submit("a", {"steps": 1, "fail": "corpus too small for the context length"})
    view = second.wait(bad, 120)
    assert view.state == FAILED and "corpus too small" in view.error and view.result is None
    assert second.wait(second.submit("b", {"steps": 1}), 120).state == DONE


def test_a_run_killed_with_sigkill_frees_its_slot_and_is_shown_failed(tmp_path):
    first, second = workers(tmp_path)
    victim = first.submit("a", {"steps": 1, "hold_end": True})
    after = second.submit("b", {"steps": 1})
    wait_for(lambda: first.pid(victim) is not None and second.view(after).place == 1)
    os.kill(first.pid(victim), signal.SIGKILL)
    assert second.wait(after, 120).state == DONE  # the OS let go of the killed run's slot
    view = second.wait(victim, 120)
    assert view.state == FAILED and view.state in FINISHED and view.result is None
    assert "process" in view.error


def test_a_run_killed_after_it_saved_says_what_it_saved_and_its_half_written_save_is_removed(tmp_path):
    """Killed mid-tune, a run whose bundle was saved is read back with that result and what was left undone, never
    "nothing was saved"; the staged `.bundle.*.tmp` a killed save leaves is removed once the process is gone."""
    first, second = workers(tmp_path)
    job = first.submit("a", {"steps": 1, "hold_end": True, "staged": True, "saved": "saved but not tuned"})
    run_dir = first.runs_dir / job
    wait_for(lambda: first.pid(job) is not None and (run_dir / "bundle" / ".manifest.json.fixture.tmp").exists())
    assert second.view(job).state == RUNNING and (run_dir / ".bundle.fixture.tmp").is_dir()  # alive: left alone
    os.kill(first.pid(job), signal.SIGKILL)
    view = second.wait(job, 120)
    assert view.state == FAILED and view.result == {"last_step": 0, "saved": True}
    assert "saved but not tuned" in view.error and "nothing was saved" not in view.error
    wait_for(lambda: not (run_dir / ".bundle.fixture.tmp").exists())  # by the launcher, once it reaped the process
    assert not (run_dir / "bundle" / ".manifest.json.fixture.tmp").exists()
    assert (run_dir / "bundle" / "model.safetensors").read_bytes() == b"whole"  # only staged entries go


def test_the_next_submit_clears_what_a_dead_run_left_half_written_and_never_a_live_runs(tmp_path):
    """A save killed together with the worker that launched it has no launcher to clean up after it: the next
    submit on any worker does, and leaves the staged entries of a run that is still alive."""
    first, second = workers(tmp_path, max_running=2)
    dead = first.submit("a", {"steps": 1})
    assert first.wait(dead, 120).state == DONE
    leftover = first.runs_dir / dead / ".bundle.left.tmp"  # as a save killed with its worker leaves it
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"half")
    live = first.submit("b", {"steps": 1, "hold_end": True, "staged": True})
    assert not leftover.exists() and (first.runs_dir / dead / "job.json").exists()  # the leftover only
    wait_for(lambda: (first.runs_dir / live / "bundle" / ".manifest.json.fixture.tmp").exists())
    assert second.wait(second.submit("c", {"steps": 1}), 120).state == DONE
    assert (first.runs_dir / live / ".bundle.fixture.tmp").is_dir()  # its process still holds alive.lock
    open_gate(first, live, "finish")
    assert first.wait(live, 120).state == DONE


def test_a_run_that_ends_while_it_is_read_is_shown_done_not_dead(tmp_path, monkeypatch):
    """The run's process writes its end line, then lets go of alive.lock. A reader that read the log just before the
    end line and checks the lock just after must read the log again: this run finished, it did not die (a reader that
    did not was seen once in CI, with both cores busy: wait() returned 'failed' for a run that ended well)."""
    (queue,) = workers(tmp_path, n=1)
    job = queue.submit("alice", {"steps": 1, "hold_end": True})
    wait_for(lambda: queue.view(job).state == RUNNING and len(queue.view(job).events) == 1)
    plain = run_queue.held

    def ends_now(path):  # the run finishes between the reader's log read and its check of alive.lock
        if path.name == ALIVE:
            open_gate(queue, job, "finish")
            wait_for(lambda: not plain(path))
        return plain(path)

    monkeypatch.setattr(run_queue, "held", ends_now)
    view = queue.view(job)
    assert view.state == DONE and view.result == {"last_step": 0, "stopped": False}, (view.state, view.error)


def test_bad_limit_unknown_run_and_a_file_name_that_is_not_plain(tmp_path):
    with pytest.raises(ValueError):
        JobQueue(tmp_path, max_running=0, entry=FIXTURE)
    q = JobQueue(tmp_path / "runs", entry=FIXTURE)
    for unknown in ("nope", "0123456789ab", "../../etc"):
        with pytest.raises(JobError, match="no run"):
            q.view(unknown)
        with pytest.raises(JobError, match="no run"):
            q.stop(unknown)
    with pytest.raises(ValueError, match="not a file name"):
        q.submit("a", {}, files={"../escape.txt": b"x"})
    (tmp_path / "blocked").write_text("a file where the runs folder should be")
    with pytest.raises(JobError, match="cannot be written"):
        JobQueue(tmp_path / "blocked", entry=FIXTURE).submit("a", {})


def test_the_log_is_read_whole_lines_only_and_a_damaged_line_is_skipped(tmp_path):
    """A reader polling while the run appends: a line without its newline yet is left for the next read."""
    runs = tmp_path / "runs"
    run_dir = runs / "0123456789ab"
    run_dir.mkdir(parents=True)
    job = {"id": run_dir.name, "owner": "0" * 64, "name": "n", "queued_at": 1.0, "key": f"{1:020d}-{run_dir.name}"}
    (run_dir / JOB).write_text(json.dumps({**job, "payload": {}}))
    log = run_dir / LOG
    log.write_text('{"kind":"event","data":1}\n{"kind":"event","da')
    q = JobQueue(runs, entry=FIXTURE)
    assert q.view(run_dir.name).events == (1,)
    with open(log, "a") as f:
        f.write('ta":2}\nnot json\n{"kind":"event","data":3}\n')
    assert q.view(run_dir.name).events == (1, 2, 3)
    with open(log, "a") as f:
        f.write('{"kind":"end","state":"done","result":7,"time":2.0}\n')
    view = q.view(run_dir.name)
    assert (view.state, view.result, view.finished) == (DONE, 7, 2.0)


def test_a_run_folder_that_is_not_a_job_is_not_listed(tmp_path):
    runs = tmp_path / "runs"
    (runs / "0123456789ab").mkdir(parents=True)
    (runs / "0123456789ab" / JOB).write_text('{"id": "0123456789ab", "owner": "x"}')
    assert JobQueue(runs, entry=FIXTURE).jobs_of("anyone") == []
    assert Path(runs / "0123456789ab").is_dir()
