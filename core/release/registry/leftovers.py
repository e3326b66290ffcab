"""Leftovers of an interrupted promotion: the staged version directories and temporary `current` files a
killed promote, rollback or switch leaves in a registry. `release status` lists them; the registry removes them
under its lock, so never one still in progress.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.model.bundle import VERSION_LENGTH
from core.release.registry.served import CURRENT, MAX_REGISTRY_ENTRIES, MAX_VERSIONS, VERSIONS

MAX_COUNTED_FILES = 10_000  # files counted for a leftover's size (ours hold 8)
# tempfile.mkdtemp / mkstemp name their files with 8 characters of [a-z0-9_]
_STAGED = re.compile(rf"\.[0-9a-f]{{{VERSION_LENGTH}}}\.[a-z0-9_]{{8}}\.tmp")  # versions/ staged dirs
_POINTER_TMP = re.compile(rf"\.{CURRENT}\.[a-z0-9_]+\.tmp")  # registry/ temp files of write_json_atomic


@dataclass(frozen=True)
class Leftover:
    path: str  # relative to the registry, e.g. versions/.<version>.<8 characters>.tmp
    bytes: int  # its size (counted over at most MAX_COUNTED_FILES files)


def find_leftovers(registry: str | os.PathLike) -> list[Leftover]:
    """Temporary directories and files that a killed promote, rollback or switch left behind."""
    reg = Path(registry)
    found: list[Leftover] = []
    for folder, pattern, is_dir, bound in (
        (reg / VERSIONS, _STAGED, True, MAX_VERSIONS),
        (reg, _POINTER_TMP, False, MAX_REGISTRY_ENTRIES),
    ):
        try:
            entries = sorted(itertools.islice(folder.iterdir(), bound)) if folder.is_dir() else []
        except OSError:
            continue
        for p in entries:
            if pattern.fullmatch(p.name) and not p.is_symlink() and (p.is_dir() if is_dir else p.is_file()):
                found.append(Leftover(p.relative_to(reg).as_posix(), size(p)))
    return found


def remove(path: Path) -> None:
    """Delete a file or a directory tree whose files are read-only (a version's are)."""

    def writable_then_retry(func: Callable[[str], object], p: str, _exc: object) -> None:
        os.chmod(p, stat.S_IRUSR | stat.S_IWUSR)  # the files are read-only, and Windows refuses to delete those
        func(p)

    if not path.is_dir():
        path.unlink()
    elif sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=writable_then_retry)
    else:
        shutil.rmtree(path, onerror=writable_then_retry)


def size(path: Path) -> int:
    """Bytes of a file, or of the first MAX_COUNTED_FILES files of a directory tree."""
    files = itertools.islice(path.rglob("*"), MAX_COUNTED_FILES) if path.is_dir() else [path]
    return sum(p.lstat().st_size for p in files if not p.is_dir())
