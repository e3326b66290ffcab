"""A training run's own process: take a slot, run the work, log what happens; the files both sides share.

core.model.jobs (in the Streamlit workers) queues a run and starts its process once a slot is free; the entry module
(cli.run_job for the Training page) calls `serve` here. This module names the files both sides share, and writes
and reads them. Under the runs folder (LAB_RUNS_DIR):

    .slots/slot-<k>.lock    k < max_running. A running run holds one (filelock) for its whole life; the OS frees
                            it when the run's process ends, even by SIGKILL, so a killed run never keeps a slot
    .line/<key>.json, .lock the waiting line. key = queued-at in ns + job id, so names sorted are arrival order;
                            the worker that queued the run holds the .lock while the run waits
    <id>/job.json           what was asked: the owner (the sha256 of the session's token), name, queued-at, payload
    <id>/log.jsonl          what happened, written by the run's process, append-only, one JSON object a line:
                            "started" (it holds a slot), "event" (a progress report), "saved" (what the work has
                            kept so far, and what it has still to do), "end" (state, result, error)
    <id>/alive.lock         held by the run's process while it lives
    <id>/stop               a stop request: any worker writes it; the run polls it at every step
    <id>/process.log        the run process's stderr (a traceback lands here, never on a page)

The helpers:

    append_line(path, entry)   one JSON line added with one write() in append mode: a reader sees the whole line or
                               none of it
    try_lock(path), held(path) a filelock taken without waiting; whether a live process holds one (the OS lets go
                               of a dead process's locks, so a killed run never keeps a slot)
    read_json(path, limit)     a small JSON file, bounded
    clear_leftovers(run_dir)   the staged ".<name>.<random>.tmp" entries a killed run left half-written (a save cut
                               short), once its process is gone
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

DONE, STOPPED, FAILED = "done", "stopped", "failed"
JOB, LOG, ALIVE, STOP, PROCESS_LOG = "job.json", "log.jsonl", "alive.lock", "stop", "process.log"
SLOTS, LINE = ".slots", ".line"
POLL_SECONDS = 0.1  # how often a run waiting for a slot (and a waiting run's launcher) looks again
MAX_JOB_BYTES = 64 * 1024  # job.json holds settings; the training text is a file beside it
OWNER = re.compile(r"[0-9a-f]{64}")  # the sha256 hex of a session's token (core.model.run_record.owner_hash)

Work = Callable[[Callable[[Any], None], Callable[[], bool]], Any]
log = logging.getLogger(__name__)


def same(data: Any) -> Any:
    """The codec of events that are JSON already (the default on both sides)."""
    return data


def read_job(run_dir: str | os.PathLike) -> tuple[str, dict]:
    """(owner, payload) of the job in `run_dir`, as `submit` wrote it: the owner is the sha256 of the session's
    token. ValueError when job.json is missing or not a job."""
    raw = read_json(Path(run_dir) / JOB, MAX_JOB_BYTES)
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
    read back with this result and that sentence (core.model.jobs), not as a run that saved nothing."""
    append_line(Path(run_dir) / LOG, {"kind": "saved", "result": result, "unfinished": unfinished})


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
    """A staged entry's name (core.files: ".<name>.<random>.tmp"), written and then renamed into place."""
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


def read_json(path: Path, limit: int) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
        return json.loads(data) if len(data) <= limit else None
    except (OSError, ValueError, RecursionError):
        return None
