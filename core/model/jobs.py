"""Background jobs with a server-wide limit: how a classroom shares one CPU for training.

A `JobQueue` runs at most `max_running` jobs at once; the others wait in arrival order and can be
told their place. Each owner (a browser session) has at most one unfinished job. A job is a plain
function `work(report, should_stop)`: it reports progress through `report(event)` and polls
`should_stop()`; it never touches the UI. Pages poll `JobQueue.view(job_id)`, which returns a frozen
copy, so the worker thread and the page never share mutable state.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

QUEUED, RUNNING, DONE, STOPPED, FAILED = "queued", "running", "done", "stopped", "failed"
FINISHED = (DONE, STOPPED, FAILED)

Work = Callable[[Callable[[Any], None], Callable[[], bool]], Any]


class JobError(ValueError):
    """A request the queue refuses (for example a second run for the same session)."""


@dataclass
class _Job:
    id: str
    owner: str
    name: str
    work: Work | None
    state: str = QUEUED
    events: list[Any] = field(default_factory=list)
    result: Any = None
    error: str | None = None
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    stop: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class JobView:
    id: str
    owner: str
    name: str
    state: str
    place: int  # 0 = running or finished; n = n-th in the waiting line
    events: tuple[Any, ...]  # every event reported so far, oldest first
    result: Any
    error: str | None
    created: float
    started: float | None
    finished: float | None

    @property
    def finished_ok(self) -> bool:
        return self.state == DONE


class JobQueue:
    def __init__(self, max_running: int = 1):
        if max_running < 1:
            raise ValueError(f"max_running must be >= 1, got {max_running}")
        self.max_running = max_running
        self._jobs: dict[str, _Job] = {}
        self._waiting: list[str] = []
        self._running = 0
        self._cond = threading.Condition()

    def submit(self, owner: str, work: Work, *, name: str = "job") -> str:
        """Queue `work` for `owner`; refuses while that owner has an unfinished job."""
        with self._cond:
            active = self.active_job(owner)
            if active is not None:
                raise JobError(f"this session already has a run ({active}); stop it or wait for it to finish first")
            job = _Job(id=uuid.uuid4().hex[:12], owner=owner, name=name, work=work)
            self._jobs[job.id] = job
            self._waiting.append(job.id)
        threading.Thread(target=self._run, args=(job,), name=f"job-{job.id}", daemon=True).start()
        return job.id

    def _run(self, job: _Job) -> None:
        with self._cond:
            while not (self._waiting[0] == job.id and self._running < self.max_running) and not job.stop.is_set():
                self._cond.wait()
            self._waiting.remove(job.id)
            if job.stop.is_set():  # stopped while waiting: never started
                job.state, job.finished, job.work = STOPPED, time.time(), None
                self._cond.notify_all()
                return
            self._running += 1
            job.state, job.started = RUNNING, time.time()
            work = job.work  # set at submit; cleared only once the job has finished
        try:
            if work is None:
                raise RuntimeError(f"job {job.id} has no work to run")
            result = work(lambda event: self._report(job, event), job.stop.is_set)
            outcome, error = (STOPPED if job.stop.is_set() else DONE), None
        except Exception as err:  # the worker reports failures as data; the page shows the message
            result, outcome = None, FAILED
            error = f"{type(err).__name__}: {err}"
            logging.getLogger(__name__).exception("job %s (%s) failed", job.id, job.name)
        with self._cond:
            job.result, job.error, job.state, job.finished = result, error, outcome, time.time()
            job.work = None  # the closure may hold a whole corpus: release it with the run
            self._running -= 1
            self._cond.notify_all()

    def _report(self, job: _Job, event: Any) -> None:
        with self._cond:
            job.events.append(event)

    def stop(self, job_id: str) -> None:
        """Ask a job to stop: a waiting job never starts, a running one sees should_stop() turn True."""
        with self._cond:
            self._jobs[job_id].stop.set()
            self._cond.notify_all()

    def view(self, job_id: str) -> JobView:
        with self._cond:
            job = self._jobs.get(job_id)
            if job is None:
                raise JobError(f"no run with id {job_id!r} on this server")
            place = self._waiting.index(job.id) + 1 if job.id in self._waiting else 0
            return JobView(
                job.id,
                job.owner,
                job.name,
                job.state,
                place,
                tuple(job.events),
                job.result,
                job.error,
                job.created,
                job.started,
                job.finished,
            )

    def active_job(self, owner: str) -> str | None:
        """The owner's unfinished job, if any."""
        with self._cond:
            for job in self._jobs.values():
                if job.owner == owner and job.state not in FINISHED:
                    return job.id
        return None

    def jobs_of(self, owner: str) -> list[JobView]:
        """All of one owner's jobs, oldest first. Other owners' jobs are never listed."""
        with self._cond:
            ids = [j.id for j in self._jobs.values() if j.owner == owner]
        return [self.view(i) for i in ids]

    def wait(self, job_id: str, timeout: float) -> JobView:
        """Block until the job finishes or `timeout` seconds pass (for tests and the CLI)."""
        deadline = time.time() + timeout
        with self._cond:
            while self._jobs[job_id].state not in FINISHED and time.time() < deadline:
                self._cond.wait(timeout=max(0.0, min(0.5, deadline - time.time())))
        return self.view(job_id)
