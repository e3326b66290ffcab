"""The registry's log: one JSON line per promotion, refusal, rollback and cleanup, appended and fsync'ed,
never rewritten. Reading skips a line the bounded JSON reader refuses and, past MAX_LOG_BYTES, keeps the newest
entries.
"""

from __future__ import annotations

import datetime
import json
import os
import stat
from pathlib import Path
from typing import Any

from core.files import FileRefused, open_regular
from core.jsonfile import JsonFileError, read_json

LOG = "log.jsonl"
MAX_LINE_BYTES = 1 << 20  # one entry: a few hundred bytes (a refusal lists its failed checks)
MAX_LOG_BYTES = 16 << 20  # read_log reads at most the newest 16 MiB: some 50,000 entries, years of a class


def now() -> str:
    """The time a registry records: UTC, ISO 8601, microseconds (so entries of one second stay ordered)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")


def append_log(reg: Path, event: str, version: str | None, reason: str, **extra: Any) -> None:
    """Append one JSON line (opened in append mode, fsync'ed): the log is never rewritten."""
    entry = {"time": now(), "event": event, "version": version, "reason": reason}
    entry.update({k: v for k, v in extra.items() if v is not None})
    # O_NONBLOCK: a log that is a FIFO would wait for a reader forever (it fails at once, ENXIO); O_NOFOLLOW: never
    # append to a link's target. Anything but a regular file is an OSError, which callers report.
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(reg / LOG, flags, 0o644)
    with open(fd, "a", encoding="utf-8") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{LOG} in {str(reg)!r} is not a regular file")
        f.write(json.dumps(entry, ensure_ascii=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_log(registry: str | os.PathLike) -> list[dict]:
    """Every log entry, oldest first. A line that is not a JSON object the bounded reader accepts (torn by a
    crash, nested half a million deep, holding NaN) is skipped: the log is a record to read, never a reason
    for a page or `release status` to fail."""
    path = Path(registry) / LOG
    try:
        with open_regular(path) as f:  # never a FIFO, a device or a link (one to /dev/zero never ends)
            size = os.fstat(f.fileno()).st_size
            skipped = max(0, size - MAX_LOG_BYTES)  # a log past its bound is read from its newest entries
            f.seek(skipped)
            data = f.read(MAX_LOG_BYTES)
    except (FileRefused, OSError):  # missing, unreadable or not a regular file: nothing to show
        return []
    if skipped:
        data = data.split(b"\n", 1)[-1]  # the first line read was cut
    entries: list[dict] = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        try:
            entry = read_json(line, f"{LOG} line {number}", max_bytes=MAX_LINE_BYTES)
        except JsonFileError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries
