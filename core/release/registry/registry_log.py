"""The registry's log: one JSON line per promotion, refusal, rollback and cleanup, appended, never rewritten.

append_log(reg, event, version, reason, **extra)   time, event, version, reason (and actor, why ... when given),
                                                    opened in append mode and fsync'ed
read_log(registry)                                  every entry, oldest first (a line the bounded JSON reader,
                                                    core.jsonfile, refuses is skipped)
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any

from core.jsonfile import JsonFileError, read_json

LOG = "log.jsonl"
MAX_LINE_BYTES = 1 << 20  # one entry: a few hundred bytes (a refusal lists its failed checks)


def now() -> str:
    """The time a registry records: UTC, ISO 8601, microseconds (so entries of one second stay ordered)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")


def append_log(reg: Path, event: str, version: str | None, reason: str, **extra: Any) -> None:
    """Append one JSON line (opened in append mode, fsync'ed): the log is never rewritten."""
    entry = {"time": now(), "event": event, "version": version, "reason": reason}
    entry.update({k: v for k, v in extra.items() if v is not None})
    with open(reg / LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_log(registry: str | os.PathLike) -> list[dict]:
    """Every log entry, oldest first. A line that is not a JSON object the bounded reader accepts (torn by a
    crash, nested half a million deep, holding NaN) is skipped: the log is a record to read, never a reason
    for a page or `release status` to fail."""
    path = Path(registry) / LOG
    if not path.is_file():
        return []
    entries: list[dict] = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        try:
            entry = read_json(line, f"{LOG} line {number}", max_bytes=MAX_LINE_BYTES)
        except JsonFileError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries
