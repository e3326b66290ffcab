"""The queue of training runs: each run in a process of its own, limited server-wide through files in the runs
folder.

A Streamlit worker must not train in its own interpreter (a run slows every rerun it serves), and several workers
serve one class, so the queue lives where all of them see it: the runs folder. A waiting run costs a launcher
thread in the worker that queued it, not a process (an interpreter with torch holds about 150 MB). A run holds a
slot lock for its whole life, so the OS frees it even on SIGKILL; it starts in a session of its own, so a worker
that dies never takes a started run with it. A run that dies after logging what it saved is read back failed with
that result; what a killed save left half-written is removed once its process is gone.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from filelock import FileLock, Timeout

from core import i18n
from core.files import write_json_atomic
from core.i18n import _
from core.jsonfile import read_json_file
from core.numbers import is_int
from core.process import own_group
from core.runs.run_record import BUNDLE, owner_hash

# The files, under the runs folder:
#   .slots/slot-<k>.lock    k < max_running. A running run holds one (filelock) for its whole life; the OS frees it
#                           when the run's process ends, even by SIGKILL, so a killed run never keeps a slot
#   .line/<key>.json, .lock the waiting line. key = queued-at in ns + job id, so names sorted are arrival order; the
#                           worker that queued the run holds the .lock while the run waits
#   <id>/job.json           what was asked: the owner (the sha256 of the session's token), name, queued-at, payload
#   <id>/log.jsonl          written by the run's process, append-only, one JSON object a line: "started" (it holds a
#                           slot), "event" (a progress report), "saved" (what is kept so far, what is left to do), "end"
#   <id>/alive.lock         held by the run's process while it lives
#   <id>/stop               a stop request: any worker writes it; the run polls it at every step
#   <id>/process.log        the run process's stderr (a traceback lands here, never on a page)
DONE, STOPPED, FAILED = "done", "stopped", "failed"
JOB, LOG, ALIVE, STOP, PROCESS_LOG = "job.json", "log.jsonl", "alive.lock", "stop", "process.log"
SLOTS, LINE = ".slots", ".line"
POLL_SECONDS = 0.1  # how often a run waiting for a slot (and a waiting run's launcher) looks again
MAX_JOB_BYTES = 64 * 1024  # job.json holds settings; the training text is a file beside it
OWNER = re.compile(r"[0-9a-f]{64}")  # the sha256 hex of a session's token (the run record's owner_hash)

Work = Callable[[Callable[[Any], None], Callable[[], bool]], Any]


def same(data: Any) -> Any:
    """The codec of events that are JSON already (the default on both sides)."""
    return data


def read_job(run_dir: str | os.PathLike) -> tuple[str, dict]:
    """(owner, payload) of the job in `run_dir`, as `submit` wrote it: the owner is the sha256 of the session's
    token. ValueError when job.json is missing or not a job."""
    try:
        raw = read_json_file(Path(run_dir) / JOB, max_bytes=MAX_JOB_BYTES)
    except (OSError, ValueError):
        raw = None
    if not isinstance(raw, dict) or not isinstance(raw.get("payload"), dict):
        raise ValueError(f"{str(run_dir)!r} holds no job")
    owner = raw.get("owner")
    if not isinstance(owner, str) or OWNER.fullmatch(owner) is None:
        raise ValueError(f"the job in {str(run_dir)!r} names no owner")
    return owner, raw["payload"]


def serve(run_dir: str | os.PathLike, slots: int, work: Work, *, write_event: Callable[[Any], Any] = same):
    """Run `work` as the run in `run_dir`: hold alive.lock, take one of `slots` slots (waiting for one, in
    the rare case another machine's run took it), log "started", each reported event (through `write_event`,
    to JSON) and the end. The work's return value must already be JSON (the entry encodes it). Returns it."""
    run_dir = Path(run_dir)
    runs_dir = run_dir.parent
    alive = FileLock(run_dir / ALIVE, thread_local=False)
    alive.acquire(timeout=0)
    stop_file = run_dir / STOP
    slot = None
    while slot is None and not stop_file.exists():
        slot = next((s for k in range(slots) if (s := try_lock(runs_dir / SLOTS / f"slot-{k}.lock"))), None)
        if slot is None:
            time.sleep(POLL_SECONDS)
    logged = run_dir / LOG
    if slot is None:
        append_line(logged, {"kind": "end", "state": STOPPED, "time": time.time()})
        return None
    append_line(logged, {"kind": "started", "time": time.time(), "pid": os.getpid()})
    result, error = None, None
    try:
        result = work(
            lambda event: append_line(logged, {"kind": "event", "data": write_event(event)}), stop_file.exists
        )
        state = STOPPED if stop_file.exists() else DONE
    except Exception as err:  # failures are data: the page shows the message, the traceback goes to stderr
        log.exception("run %s failed", run_dir.name)
        state, error = FAILED, f"{type(err).__name__}: {err}"
    append_line(logged, {"kind": "end", "state": state, "result": result, "error": error, "time": time.time()})
    slot.release()
    alive.release()
    return result


def record_saved(run_dir: str | os.PathLike, result: Any, unfinished: str) -> None:
    """Log what the work has kept so far (`result`, JSON, as the work will return it) and what is still to do
    (`unfinished`, a sentence), before it goes on: a run whose process then dies (killed, out of memory) or fails is
    read back with this result and that sentence (`JobQueue.view`), not as a run that saved nothing."""
    append_line(Path(run_dir) / LOG, {"kind": "saved", "result": result, "unfinished": unfinished})


QUEUED, RUNNING = "queued", "running"
FINISHED = (DONE, STOPPED, FAILED)
ROOT = Path(__file__).resolve().parents[2]  # where `python -m <entry>` finds the lab's packages
MAX_LOG_BYTES = 64 * 2**20  # a default run's log is about 10 MB (a snapshot is 128 x 128 weights)
MAX_JOBS = 10_000  # run folders looked at in one scan (as the run record)
MAX_NAME_CHARS = 500
_ID = re.compile(r"[0-9a-f]{12}")
_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
log = logging.getLogger(__name__)


class JobError(ValueError):
    """A request the queue refuses (a second run for the same session, a run this server does not have)."""


@dataclass(frozen=True)
class JobView:
    id: str
    owner: str  # the sha256 of the owner's token, as job.json stores it
    name: str
    state: str
    place: int  # 0 = running or finished; n = n-th in the waiting line
    events: tuple[Any, ...]  # every event reported so far, oldest first
    result: Any
    error: str | None
    created: float
    started: float | None
    finished: float | None


@dataclass
class _Log:
    """What this worker has parsed of one run's log so far."""

    offset: int = 0
    started: float | None = None
    pid: int | None = None
    events: list[Any] = field(default_factory=list)
    saved: dict | None = None  # the last "saved" line: what the work kept before it went on
    end: dict | None = None


@dataclass(frozen=True)
class _Job:
    owner: str
    name: str
    created: float
    key: str


def _same_result(data: Any, run_dir: Path) -> Any:
    return data


class JobQueue:
    """One worker's handle on the runs folder's queue. Two JobQueues on one folder (two workers, or two objects
    in a test) see the same runs, the same line and the same slots. `entry` is the module a run's process runs
    (`python -m`, its name read off the module object); `read_event` and `read_result` decode what it logs."""

    def __init__(
        self,
        runs_dir: str | os.PathLike,
        max_running: int = 1,
        *,
        entry: ModuleType,
        read_event: Callable[[Any], Any] = same,
        read_result: Callable[[Any, Path], Any] = _same_result,
    ):
        if not isinstance(max_running, int) or max_running < 1:
            raise ValueError(f"max_running must be an integer >= 1, got {max_running!r}")
        self.runs_dir, self.max_running, self.entry = Path(runs_dir), max_running, entry
        self._read_event, self._read_result = read_event, read_result
        self._jobs: dict[str, _Job] = {}  # job.json never changes once written: read once
        self._logs: dict[str, _Log] = {}
        self._lock = threading.Lock()  # guards the two caches: a Streamlit worker serves sessions on threads

    # ---- asking -----------------------------------------------------------------------------------

    def submit(
        self, owner: str, payload: Mapping[str, Any], *, name: str = "job", files: Mapping[str, bytes] | None = None
    ) -> str:
        """Queue a run of `payload` for `owner` (a session's token; only its hash is written) with `files` beside
        job.json; refuses while that owner has an unfinished run anywhere on the server."""
        who = owner_hash(owner)
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
            raise ValueError(f"a run's name must be 1 to {MAX_NAME_CHARS} characters")
        bad = [f for f in files or {} if _FILE.fullmatch(f) is None or f in (JOB, LOG, ALIVE, STOP, PROCESS_LOG)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a file name a run may carry")
        try:
            (self.runs_dir / LINE).mkdir(parents=True, exist_ok=True)
            (self.runs_dir / SLOTS).mkdir(exist_ok=True)
            with FileLock(self.runs_dir / LINE / ".submit.lock"):  # check and queue as one step, across workers
                self._clear_leftovers()  # a save killed with its worker: the next run's submit finds it
                active = self.active_job(owner)
                if active is not None:
                    raise JobError(
                        _("this session already has a run ({run}); stop it or wait for it to finish first").format(
                            run=active
                        )
                    )
                job_id = uuid.uuid4().hex[:12]
                run_dir = self.runs_dir / job_id
                run_dir.mkdir()
                for fname, data in (files or {}).items():
                    (run_dir / fname).write_bytes(data)
                queued = time.time_ns()
                key = f"{queued:020d}-{job_id}"
                place = FileLock(self.runs_dir / LINE / f"{key}.lock", thread_local=False)
                place.acquire(timeout=0)  # held before the entry exists: nobody ever sees it without a holder
                job = {"format": 1, "id": job_id, "owner": who, "name": name, "queued_at": queued / 1e9, "key": key}
                write_json_atomic(run_dir / JOB, {**job, "payload": dict(payload)})
                write_json_atomic(self.runs_dir / LINE / f"{key}.json", {"id": job_id})
        except OSError as err:
            raise JobError(
                _("the runs folder {folder} cannot be written ({reason})").format(
                    folder=repr(str(self.runs_dir)), reason=err.strerror or err
                )
            ) from None
        threading.Thread(target=self._launch, args=(job_id, key, place), name=f"job-{job_id}", daemon=True).start()
        return job_id

    def stop(self, job_id: str) -> None:
        """Ask a run to stop: a waiting run never starts, a running one sees should_stop() turn True at its
        next step. Written into the run's folder, so it works from any worker."""
        run_dir = self._run_dir(job_id)
        try:
            (run_dir / STOP).touch()
        except OSError as err:
            raise JobError(f"the stop request for run {job_id} could not be written ({err.strerror})") from None

    def stop_requested(self, job_id: str) -> bool:
        """Whether someone asked the run to stop (its page says so at once, while the run saves what it learned)."""
        return (self._run_dir(job_id) / STOP).exists()

    # ---- the launcher (a thread of the worker that queued the run) --------------------------------

    def _launch(self, job_id: str, key: str, place: FileLock) -> None:
        run_dir = self.runs_dir / job_id
        process = None
        try:
            while process is None:
                if (run_dir / STOP).exists():
                    append_line(run_dir / LOG, {"kind": "end", "state": STOPPED, "time": time.time()})
                    return
                if self._ahead(key) == 0 and self._free_slot():
                    process = self._start(run_dir)
                else:
                    time.sleep(POLL_SECONDS)
            while process.poll() is None and self._parsed(job_id).started is None:
                time.sleep(POLL_SECONDS)  # leave the line only once the process holds its slot (or has ended)
        except Exception:  # a launcher's failure is the run's, shown on its page; the worker goes on
            log.exception("the launcher of run %s failed", job_id)
            append_line(run_dir / LOG, {"kind": "end", "state": FAILED, "error": "the run could not be started"})
        finally:
            place.release()  # then the entry goes; a reader between the two finds it dead and clears it too
            _leave(self.runs_dir / LINE, key)
        if process is None:
            return
        code = process.wait()  # reap it; the run's own log says how it ended
        if self._parsed(job_id).end is None:
            why = _last_line(run_dir / PROCESS_LOG) or f"exit status {code}"
            append_line(run_dir / LOG, {"kind": "end", "state": FAILED, "error": f"the run's process ended: {why}"})
        clear_leftovers(run_dir, (BUNDLE,))  # a save it was killed in the middle of

    def _start(self, run_dir: Path) -> subprocess.Popen:
        """The run's process: its own session (a worker's death or restart does not reach it), stderr to a file."""
        with open(run_dir / PROCESS_LOG, "ab") as err:
            return subprocess.Popen(
                [sys.executable, "-m", self.entry.__name__, str(run_dir), str(self.max_running)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                **own_group(),
            )

    def _ahead(self, key: str) -> int:
        """Waiting runs ahead of `key` whose worker still holds their place (a run that has started is leaving the
        line); dead entries are cleared away."""
        line = self.runs_dir / LINE
        try:
            keys = sorted(p.name[:-5] for p in line.iterdir() if p.name.endswith(".json"))
        except OSError:
            return 0
        ahead = 0
        for other in keys:
            if other >= key:
                break
            if held(line / f"{other}.lock"):
                ahead += self._parsed(other.rpartition("-")[2]).started is None  # started: about to leave
            else:
                _leave(line, other)  # its worker died while it waited
        return ahead

    def _free_slot(self) -> bool:
        return any(not held(self.runs_dir / SLOTS / f"slot-{k}.lock") for k in range(self.max_running))

    # ---- reading a run back -----------------------------------------------------------------------

    def view(self, job_id: str) -> JobView:
        job = self._job(job_id)
        if job is None:
            raise JobError(f"no run with id {job_id!r} on this server")
        parsed = self._parsed(job_id)
        run_dir = self.runs_dir / job_id
        alive = False
        if parsed.end is None and parsed.started is not None:
            alive = held(run_dir / ALIVE)
            if not alive:
                # The process writes its end line, then lets go of alive.lock: a run that ended between the read above
                # and the lock's check is read again, not called dead.
                parsed = self._parsed(job_id)
        result, error, finished, place = None, None, None, 0
        if parsed.end is not None:
            end = parsed.end
            state = str(end["state"]) if end.get("state") in FINISHED else FAILED
            error = end.get("error") if isinstance(end.get("error"), str) else None
            finished = _number(end.get("time"))
            if state == FAILED:  # the work raised, or its process ended without an end of its own
                result, undone = self._saved(parsed, run_dir)
                if undone is not None:
                    error = (error or _("it failed")) + "; " + i18n._(undone)
            elif end.get("result") is not None:
                try:
                    result = self._read_result(end["result"], run_dir)
                except (AttributeError, IndexError, KeyError, TypeError, ValueError) as err:
                    state, error = FAILED, _("its result could not be read back ({error})").format(error=err)
        elif parsed.started is not None:
            state = RUNNING if alive else FAILED
            if state == FAILED:
                result, undone = self._saved(parsed, run_dir)
                error = _("its process stopped without finishing (killed, or out of memory); {undone}").format(
                    undone=_("nothing was saved") if undone is None else i18n._(undone)
                )
        elif (self.runs_dir / LINE / f"{job.key}.json").exists() and held(self.runs_dir / LINE / f"{job.key}.lock"):
            state, place = QUEUED, self._ahead(job.key) + 1
        else:
            state, error = FAILED, _("the server process that queued it stopped before it started; start it again")
        return JobView(
            job_id,
            job.owner,
            job.name,
            state,
            place,
            tuple(parsed.events),
            result,
            error,
            job.created,
            parsed.started,
            finished,
        )

    def _saved(self, parsed: _Log, run_dir: Path) -> tuple[Any, str | None]:
        """(result, what it left undone) of a run that failed after its work logged what it saved
        (record_saved); (None, None) when it logged nothing, or nothing that can be read back."""
        saved = parsed.saved
        if saved is not None and saved.get("result") is not None and isinstance(saved.get("unfinished"), str):
            try:
                return self._read_result(saved["result"], run_dir), saved["unfinished"]
            except (AttributeError, IndexError, KeyError, TypeError, ValueError):
                pass
        return None, None

    def _clear_leftovers(self) -> None:
        """Staged entries of every run whose process has ended (clear_leftovers)."""
        try:
            run_dirs = [p for _, p in zip(range(MAX_JOBS), self.runs_dir.iterdir()) if _ID.fullmatch(p.name)]
        except OSError:
            return
        for run_dir in run_dirs:
            clear_leftovers(run_dir, (BUNDLE,))

    def active_job(self, owner: str) -> str | None:
        """The owner's unfinished run on the server, if any."""
        return next((v.id for v in self.jobs_of(owner) if v.state not in FINISHED), None)

    def jobs_of(self, owner: str) -> list[JobView]:
        """All of one owner's runs, oldest first. Other owners' runs are never listed."""
        who = owner_hash(owner)
        try:
            ids = [p.name for _, p in zip(range(MAX_JOBS), self.runs_dir.iterdir()) if _ID.fullmatch(p.name)]
        except OSError:
            return []
        mine = [(job.created, i) for i in ids if (job := self._job(i)) is not None and job.owner == who]
        return [self.view(i) for _, i in sorted(mine)]

    def wait(self, job_id: str, timeout: float) -> JobView:
        """Poll until the run finishes or `timeout` seconds pass (for tests and the CLI)."""
        deadline = time.monotonic() + timeout
        view = self.view(job_id)
        while view.state not in FINISHED and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            view = self.view(job_id)
        return view

    def _run_dir(self, job_id: str) -> Path:
        if not isinstance(job_id, str) or _ID.fullmatch(job_id) is None or self._job(job_id) is None:
            raise JobError(f"no run with id {str(job_id)[:40]!r} on this server")
        return self.runs_dir / job_id

    def _job(self, job_id: str) -> _Job | None:
        """job.json of a run folder, checked field by field; None for anything that is not a run."""
        with self._lock:
            if job_id in self._jobs:
                return self._jobs[job_id]
        raw = None
        if _ID.fullmatch(job_id):
            try:
                raw = read_json_file(self.runs_dir / job_id / JOB, max_bytes=MAX_JOB_BYTES)
            except (OSError, ValueError):
                pass
        if not isinstance(raw, dict) or raw.get("id") != job_id:
            return None
        owner, name, created, key = raw.get("owner"), raw.get("name"), _number(raw.get("queued_at")), raw.get("key")
        if not (isinstance(owner, str) and OWNER.fullmatch(owner) and isinstance(name, str) and created is not None):
            return None
        if not (isinstance(key, str) and re.fullmatch(r"[0-9]{20}-" + job_id, key)):
            return None
        job = _Job(owner, name[:MAX_NAME_CHARS], created, key)
        with self._lock:
            self._jobs[job_id] = job
        return job

    def _parsed(self, job_id: str) -> _Log:
        """The run's log as parsed so far, after reading what was appended since the last call."""
        with self._lock:
            parsed = self._logs.setdefault(job_id, _Log())
            if parsed.end is not None:
                return parsed
            path = self.runs_dir / job_id / LOG
            try:
                with open(path, "rb") as f:
                    f.seek(parsed.offset)
                    data = f.read(max(0, MAX_LOG_BYTES - parsed.offset))
            except OSError:
                return parsed
            complete = data[: data.rfind(b"\n") + 1]  # a line still being written is read next time
            parsed.offset += len(complete)
            for line in complete.splitlines():
                self._take(parsed, line)
            return parsed

    def _take(self, parsed: _Log, line: bytes) -> None:
        try:
            # json.loads, not the bounded reader: a diverged run's events carry NaN losses, which that reader refuses
            # (a line is bounded by MAX_LOG_BYTES, and RecursionError is caught below)
            entry = json.loads(line)
            kind = entry.get("kind")
            if kind == "started":
                parsed.started, parsed.pid = _number(entry.get("time")) or 0.0, entry.get("pid")
            elif kind == "event":
                parsed.events.append(self._read_event(entry["data"]))
            elif kind == "saved":
                parsed.saved = entry
            elif kind == "end" and parsed.end is None:
                parsed.end = entry
        except (AttributeError, IndexError, KeyError, TypeError, ValueError, RecursionError):
            log.warning("a damaged line in a run's log was skipped")

    def pid(self, job_id: str) -> int | None:
        """The run process's id once it has started (for the operator and the tests)."""
        pid = self._parsed(job_id).pid
        return pid if is_int(pid) else None


# ---- files -------------------------------------------------------------------------------------------


def append_line(path: Path, entry: dict) -> None:
    """One JSON line added with one write() in append mode: a reader sees the whole line or none of it."""
    line = (json.dumps(entry, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def try_lock(path: Path) -> FileLock | None:
    lock = FileLock(path, thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return None
    return lock


def held(path: Path) -> bool:
    """Whether a live process holds the lock at `path` (taken and let go at once when nobody does)."""
    lock = try_lock(path)
    if lock is None:
        return True
    lock.release()
    return False


def staged(name: str) -> bool:
    """A staged entry's name (the atomic writes': ".<name>.<random>.tmp"), written and then renamed into place."""
    return name.startswith(".") and name.endswith(".tmp")


def clear_leftovers(run_dir: Path, inside: tuple[str, ...] = ()) -> list[Path]:
    """Remove the staged entries of a run whose process has ended (alive.lock exists and nobody holds it): a save
    killed half-way leaves one (a `.bundle.*.tmp` folder) that nothing would ever finish. Looks at the run folder
    and the folders named in `inside` (the bundle), never further: a page may be writing elsewhere (a release
    record beside the bundle). A run still alive, or never started, is left alone. Returns what was removed."""
    try:
        if run_dir.is_symlink():
            return []
        folders = [run_dir, *(run_dir / name for name in inside if (run_dir / name).is_dir())]
        found = [e for folder in folders if not folder.is_symlink() for e in folder.iterdir() if staged(e.name)]
        if not found or not (run_dir / ALIVE).is_file() or held(run_dir / ALIVE):  # first the cheap look
            return []
    except OSError:
        return []
    removed = []
    for entry in found:
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:
            continue
        removed.append(entry)
    return removed


def _leave(line: Path, key: str) -> None:
    for suffix in (".json", ".lock"):
        (line / f"{key}{suffix}").unlink(missing_ok=True)


def _last_line(path: Path, limit: int = 4096) -> str:
    """The last non-empty line of a (bounded) text file, at most 300 characters."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
            tail = f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [x.strip() for x in tail.splitlines() if x.strip()]
    return lines[-1][:300] if lines else ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
