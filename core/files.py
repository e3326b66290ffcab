"""How a file or a directory is written so that a reader never sees half of it, and how a file the lab reads is
opened so that it cannot hang or flood the server: written once, here.

Writes go to a temporary sibling (fsync'ed) and are renamed into place; a staged directory is renamed whole and
never replaces something that appeared meanwhile. Reads refuse anything but a regular file, within a byte limit:
a manifest that was a FIFO hung `suggest` for good, and one linked to /dev/zero was read until memory ran out.
A damaged SQLite database is set aside (never deleted) and made anew.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import shutil
import sqlite3
import stat
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from filelock import FileLock, Timeout


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write `data` as indented ASCII JSON (NaN and inf refused) and fsync it."""
    with open(path, "w", encoding="ascii") as f:
        json.dump(data, f, indent=2, ensure_ascii=True, allow_nan=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """`data` as write_json writes it, atomically: readers see the old file or the new one, never half of it."""
    text = json.dumps(data, indent=2, ensure_ascii=True, allow_nan=False) + "\n"
    write_bytes_atomic(Path(path), text.encode("ascii"))


class FileRefused(ValueError):
    """A file the lab will not read: `problem` says what it is instead of a regular file of a bounded size."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in the words of a message."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    ):
        if test(mode):
            return name
    return "a special file"


@contextlib.contextmanager
# Every file of a bundle and every JSON file the lab reads is opened here: a manifest that was a FIFO hung `suggest`
# for good, and one linked to /dev/zero was read until memory ran out.
def open_regular(path: str | os.PathLike, *, follow_symlinks: bool = False) -> Iterator[BinaryIO]:
    """`path` opened to read in binary, if it is a regular file; FileRefused ("not a regular file (it is a named
    pipe (FIFO))") otherwise. OSError (missing, unreadable) passes through.

    A FIFO is never opened (opening one to read waits for a writer), nor a device. On POSIX open itself refuses a
    symlink (O_NOFOLLOW) and never waits (O_NONBLOCK). Windows has neither flag (nor FIFOs), so the refusal does not
    rest on them: stat before opening (lstat without follow_symlinks) refuses anything but a regular file, and fstat
    after it checks the file opened is the one seen (device, inode), so a file swapped in between (for a link, a
    FIFO) is refused too: opened for that moment, never read. With follow_symlinks a link to a regular file is
    read (the registry's own files may sit behind a link the teacher made); a link to /dev/zero is still refused."""
    seen = os.stat(path) if follow_symlinks else os.lstat(path)
    if not stat.S_ISREG(seen.st_mode):
        kind = _kind(seen.st_mode)
        if stat.S_ISLNK(seen.st_mode):
            with contextlib.suppress(OSError):
                kind += f" to {os.readlink(os.fspath(path))[:200]!r}"
        raise FileRefused(f"not a regular file (it is {kind})")
    nofollow = 0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0)
    flags = os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP and nofollow:  # O_NOFOLLOW met a link that replaced the file since lstat
            raise FileRefused("not a regular file (it became a symbolic link while it was opened)") from None
        raise
    with os.fdopen(fd, "rb") as f:
        opened = os.fstat(f.fileno())
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
            raise FileRefused(f"not a regular file (it was replaced by {_kind(opened.st_mode)} while it was opened)")
        yield f


def read_bounded(path: str | os.PathLike, limit: int, *, follow_symlinks: bool = False) -> bytes:
    """The bytes of the regular file at `path` (open_regular), refused by its size before a byte is read and never
    read past `limit` + 1 bytes (it may grow meanwhile); FileRefused saying what was wrong, OSError passes through."""
    with open_regular(path, follow_symlinks=follow_symlinks) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise FileRefused(f"{max(size, len(data)):,} bytes is more than the {limit:,} it may hold")
    return data


def read_regular_file(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file (not a symlink, not a FIFO) of at most `limit` bytes (read_bounded), else None."""
    try:
        return read_bounded(path, limit)
    except (FileRefused, OSError):
        return None


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """`data` into a temporary sibling (fsynced), then os.replace onto `path` (readable by everyone: 0644)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def staged_dir(out: str | os.PathLike) -> Iterator[Path]:
    """A new empty directory `.<name>.<random>.tmp` beside `out` (its parent is created); removed when the
    block raises. The block builds the content and ends with install_dir."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield staged
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise


# Without overwrite nothing at `out` is ever replaced: if something appeared there meanwhile, the staged copy is kept
# under a visible sibling name and `error` names it, so nothing is lost either way. With overwrite an existing `out` is
# moved aside first and removed after.
def install_dir(staged: Path, out: Path, *, overwrite: bool = False, error: type[Exception] = OSError) -> None:
    """Rename `staged` to `out` (mode 0755), see the module docstring. POSIX rename succeeds only onto
    nothing or an empty directory, so without overwrite a directory that appeared since the caller checked
    `out` is never replaced."""
    os.chmod(staged, 0o755)  # mkdtemp creates 0700; a bundle is for everyone to read
    if not overwrite or not out.exists():
        try:
            os.rename(staged, out)
        except OSError as e:
            kept = out.parent / f"{out.name}.new-{uuid.uuid4().hex[:8]}"
            os.rename(staged, kept)
            raise error(
                f"{str(out)!r} appeared while it was being written ({e.strerror or e}); "
                f"nothing there was replaced and the new copy is kept in {str(kept)!r}"
            ) from None
        return
    old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
    os.rename(out, old)
    os.rename(staged, out)
    shutil.rmtree(old, ignore_errors=True)


# What SQLite says of a file that is not (or no longer) a database; anything else (locked, read-only) is reported
# and the file left alone.
DAMAGED_SQLITE = ("file is not a database", "malformed", "corrupt", "no such table", "no such column")


def damaged_sqlite(e: BaseException) -> bool:
    """Whether `e` says the file is not (or no longer) a database: a sqlite3.DatabaseError, or SQLAlchemy's error
    wrapping one (its `orig`), whose message has one of DAMAGED_SQLITE."""
    said = getattr(e, "orig", None) or e
    return isinstance(said, sqlite3.DatabaseError) and any(sign in str(said) for sign in DAMAGED_SQLITE)


def set_aside_sqlite(path: Path) -> Path:
    """Move the database at `path` and its -wal and -shm files to `<name>.damaged-<UTC time>`; return that path."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        part = Path(str(path) + suffix)
        if part.exists():
            part.replace(Path(str(aside) + suffix))
    return aside


def prepare_sqlite(
    path: Path, create: Callable[[], None], *, what: str, timeout_s: float, error: Callable[[str], Exception]
) -> str | None:
    """The first use of the SQLite database at `path` ("the class database", says `what`): make its folder, then run
    `create` (WAL on, the schema made or migrated). First uses take turns behind `<path>.lock`, across sessions and
    processes: thirty at once deadlock inside SQLite (a reader upgrading to a writer gets "database is locked" at
    once, without the busy timeout). A file SQLite cannot read as a database (DAMAGED_SQLITE) is set aside and
    `create` runs on a fresh one: the notice saying so is returned, else None. Anything else raises error(message).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise error(f"cannot create the folder of the {what} {str(path)!r}: {e.strerror or e}") from None
    try:
        with FileLock(str(path) + ".lock", timeout=timeout_s):
            try:
                create()
            except Exception as e:
                said = getattr(e, "orig", None) or e  # SQLAlchemy wraps the driver's error
                if not isinstance(said, sqlite3.Error):
                    raise
                if not damaged_sqlite(e):
                    raise error(f"the {what} {str(path)!r} cannot be used: {said}") from None
                aside = set_aside_sqlite(path)
                create()
                return (
                    f"The {what} {path.name} could not be read ({said}); it was kept as {aside.name} and a fresh one "
                    "was started."
                )
    except Timeout:
        raise error(f"the {what} {str(path)!r} is being set up by another session for too long; try again") from None
    except OSError as e:  # the lock file cannot be made beside it (a read-only folder)
        raise error(f"the {what} {str(path)!r} cannot be used: {e.strerror or e}") from None
    return None
