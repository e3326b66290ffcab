"""The job queue: a server-wide limit, places in line, one run per session, stop, failures as data."""

import threading

import pytest

from core.model.jobs import DONE, FAILED, QUEUED, RUNNING, STOPPED, JobError, JobQueue


def gated_work(gate: threading.Event, steps: int = 3):
    """A job that reports `steps` events, then waits for `gate` (or a stop) before finishing."""

    def work(report, should_stop):
        for i in range(steps):
            report({"step": i})
        while not gate.wait(0.01):
            if should_stop():
                return "stopped early"
        return "finished"

    return work


def wait_for(predicate, timeout=120.0):  # polls: a long limit costs nothing when the condition comes early
    done = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        done.wait(0.01)
    raise AssertionError("condition not reached in time")


def test_limit_of_one_runs_jobs_in_arrival_order_with_places():
    q = JobQueue(max_running=1)
    gates = [threading.Event() for _ in range(3)]
    ids = [q.submit(f"session-{i}", gated_work(g), name=f"run {i}") for i, g in enumerate(gates)]
    wait_for(lambda: q.view(ids[0]).state == RUNNING)
    assert [q.view(i).state for i in ids] == [RUNNING, QUEUED, QUEUED]
    assert [q.view(i).place for i in ids] == [0, 1, 2]
    gates[0].set()
    wait_for(lambda: q.view(ids[1]).state == RUNNING)
    assert q.view(ids[0]).state == DONE and q.view(ids[0]).result == "finished"
    assert q.view(ids[2]).place == 1
    gates[1].set()
    gates[2].set()
    assert q.wait(ids[2], 120).state == DONE


def test_events_reach_the_view_in_order():
    q = JobQueue()
    gate = threading.Event()
    gate.set()
    job = q.submit("s", gated_work(gate, steps=5))
    view = q.wait(job, 120)
    assert [e["step"] for e in view.events] == [0, 1, 2, 3, 4]


def test_one_unfinished_run_per_session_and_sessions_see_only_their_own():
    q = JobQueue(max_running=2)
    gate = threading.Event()
    a = q.submit("alice", gated_work(gate))
    with pytest.raises(JobError, match="already has a run"):
        q.submit("alice", gated_work(gate))
    b = q.submit("bob", gated_work(gate))
    assert [v.id for v in q.jobs_of("alice")] == [a]
    assert [v.id for v in q.jobs_of("bob")] == [b]
    gate.set()
    q.wait(a, 120)
    q.wait(b, 120)
    assert q.active_job("alice") is None
    q.submit("alice", gated_work(gate))  # a finished run frees the session's slot


def test_stop_a_running_job_and_a_waiting_one():
    q = JobQueue(max_running=1)
    running = q.submit("a", gated_work(threading.Event()))
    waiting = q.submit("b", gated_work(threading.Event()))
    wait_for(lambda: q.view(running).state == RUNNING)
    q.stop(waiting)
    assert q.wait(waiting, 120).state == STOPPED and q.view(waiting).started is None
    q.stop(running)
    view = q.wait(running, 120)
    assert view.state == STOPPED and view.result == "stopped early"


def test_a_failing_job_reports_its_message_and_frees_the_slot():
    q = JobQueue(max_running=1)

    def broken(report, should_stop):
        raise ValueError("corpus too small for the context length")

    bad = q.submit("a", broken)
    view = q.wait(bad, 120)
    assert view.state == FAILED and "corpus too small" in view.error
    gate = threading.Event()
    gate.set()
    assert q.wait(q.submit("b", gated_work(gate)), 120).state == DONE


def test_bad_limit_and_unknown_job():
    with pytest.raises(ValueError):
        JobQueue(max_running=0)
    with pytest.raises(JobError, match="no run"):
        JobQueue().view("nope")
