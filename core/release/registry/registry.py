"""The model registry: immutable versions, an atomically switched `current` pointer and an append-only log.

A bundle is promoted only if it passes the release rubric; a refusal is logged and `current` stays. A version is
copied (never moved: nothing a user trained is deleted) into a staged directory, renamed into place, and never
changed afterwards; `current` is rewritten whole, so a reader sees the old pointer or the new one. A killed
promotion leaves only its staged directory, which the next promote or rollback removes under the lock.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from core.files import install_dir, staged_dir, write_json, write_json_atomic
from core.model.bundle import is_version, load_bundle
from core.model.bundle_checks import BundleError
from core.model.corpus import Corpus
from core.release.baselines.baseline_bundle import read_kind, save_baseline
from core.release.gate.gate import check_release
from core.release.gate.rubric import DEFAULT_POLICY, RUBRIC, ReleaseCheck, ReleasePolicy, Rubric
from core.release.registry.leftovers import find_leftovers, remove
from core.release.registry.registry_log import append_log as _log  # a module global: tests make it fail
from core.release.registry.registry_log import now
from core.release.registry.served import (
    BUNDLE,
    CURRENT,
    FALLBACK,
    LOCK,
    NAME_RULE,
    RECORD,
    VERSIONS,
    RegistryError,
    check_registry,
    load_version,
    pointer,
    quote,
    read_current,
    short,
    version_dir,
)

LOCK_TIMEOUT = 120.0  # seconds a promote or rollback waits for another to finish (an install takes seconds)
MAX_NOTE_CHARS = 500  # actor, why and a rollback reason, as typed on a form


@dataclass(frozen=True)
class PromoteResult:
    promoted: bool
    version: str | None
    reason: str
    rubric: Rubric | None
    current: str | None  # the current version afterwards
    cleaned: tuple[str, ...] = ()  # leftovers of interrupted promotions removed first


@dataclass(frozen=True)
class RollbackResult:
    switched: bool
    version: str | None  # current afterwards
    previous: str | None  # current before
    reason: str
    cleaned: tuple[str, ...] = ()


# ---- promote and rollback --------------------------------------------------------------------------


def promote(
    bundle_dir: str | os.PathLike,
    registry: str | os.PathLike = "registry",
    *,
    corpus: Corpus | str | None = None,
    policy: ReleasePolicy = DEFAULT_POLICY,
    check: ReleaseCheck | None = None,
    actor: str | None = None,
    why: str | None = None,
) -> PromoteResult:
    """Check the bundle with the rubric; if it passes, install it as a version and make it current.

    `check` reuses a check_release result of this bundle (a page that has just shown the rubric); the
    copy installed must then still have the version that was checked, or the promotion fails. `actor`
    and `why` (who asked, and why) are written into the log entry and the version's record."""
    reg, source, who = Path(registry), Path(bundle_dir), _who(actor, why)
    _make(reg)
    try:
        kind = read_kind(source)
    except BundleError as e:
        return _refuse(reg, None, f"{e}", source, None, who)
    if kind != "transformer":
        return _refuse(
            reg, None, f"only transformer bundles are promoted, {str(source)!r} is a {kind!r} bundle", source, None, who
        )
    if check is None:
        check = check_release(source, corpus=corpus, policy=policy)  # outside the lock: it takes a while
    elif Path(check.rubric.bundle).resolve() != source.resolve():
        raise RegistryError(f"the check given is of {check.rubric.bundle!r}, not of {str(source)!r}")
    rubric = check.rubric
    if not rubric.passed:
        return _refuse(
            reg, rubric.version, "failed the release rubric: " + "; ".join(rubric.failures()), source, rubric, who
        )
    version = rubric.version
    if version is None:  # a passed rubric loaded the bundle, so it names its version
        raise RegistryError(f"the rubric of {str(source)!r} passed but names no version; check it again")
    with _locked(reg):
        cleaned = _clean_leftovers(reg)
        vdir = version_dir(reg, version)
        if vdir.exists():
            try:
                load_version(reg, version)
            except BundleError as e:
                return _refuse(
                    reg,
                    version,
                    f"the stored copy of version {version} is damaged and is kept for inspection ({short(e)})",
                    source,
                    rubric,
                    who,
                    cleaned,
                )
        else:
            _install(vdir, source, version, check, who)
        current, problem = pointer(reg)
        if current and current["version"] == version:
            reason = f"version {version} is already current"
        else:
            history = [*current["history"], current["version"]] if current else []
            _switch(reg, version, history, f"promoted from {source}")
            reason = f"version {version} is now current" + (f" (was {current['version']})" if current else "")
            reason += f" ({problem}; it is replaced)" if problem else ""
        _log(
            reg, "promote", version, reason, source=str(source), previous=current["version"] if current else None, **who
        )
    return PromoteResult(True, version, reason, rubric, version, cleaned)


def rollback(
    registry: str | os.PathLike = "registry",
    *,
    to: str | None = None,
    reason: str = "manual rollback",
    actor: str | None = None,
    why: str | None = None,
) -> RollbackResult:
    """Switch `current` back to the version that was current before it (or to the promoted version `to`).

    A `to` that is not a version name raises RegistryError (bad input); `actor` and `why` go into the log."""
    reg, who = Path(registry), _who(actor, why, reason=reason)
    if to is not None and not is_version(to):
        raise RegistryError(f"rollback target {quote(to)} is not a version name ({NAME_RULE})")
    _make(reg)
    with _locked(reg):
        cleaned = _clean_leftovers(reg)
        current, problem = pointer(reg)
        if current is None:
            return _refuse_rollback(reg, None, problem or "there is no current version to roll back from", who, cleaned)
        history = list(current["history"])
        if to is None:
            if not history:
                return _refuse_rollback(
                    reg, current["version"], f"version {current['version']} has no earlier version", who, cleaned
                )
            target, history = history[-1], history[:-1]
        else:
            if to == current["version"]:
                return _refuse_rollback(reg, current["version"], f"version {to} is already current", who, cleaned)
            if not os.path.lexists(reg / VERSIONS / to):  # `to` is a version name: no path can hide in it
                return _refuse_rollback(
                    reg, current["version"], f"version {to!r} was never promoted here", who, cleaned
                )
            target, history = to, [h for h in history if h != to]
        try:
            load_version(reg, target)
        except BundleError as e:
            return _refuse_rollback(
                reg, current["version"], f"version {target} does not load ({short(e)})", who, cleaned
            )
        _switch(reg, target, history, f"rollback from {current['version']}: {reason}")
        message = f"current is version {target} again (was {current['version']}): {reason}"
        _log(reg, "rollback", target, message, previous=current["version"], **who)
    return RollbackResult(True, target, current["version"], message, cleaned)


# ---- helpers -------------------------------------------------------------------------------------


def _install(vdir: Path, source: Path, version: str, check: ReleaseCheck, who: dict) -> None:
    """Copy the bundle, its fallback, rubric and record into a staged sibling, verify, rename into place."""
    if check.fallback is None or check.corpus is None or check.split is None:
        raise RegistryError(f"the check of {str(source)!r} holds no n-gram fallback; check it again")
    with staged_dir(vdir) as staged:
        shutil.copytree(source, staged / BUNDLE)
        copied = load_bundle(staged / BUNDLE)
        if copied.version != version:
            raise RegistryError(
                f"{str(source)!r} changed while it was being promoted (version {copied.version}, "
                f"checked {version}); promote it again"
            )
        save_baseline(
            staged / FALLBACK,
            check.fallback,
            corpus=check.corpus,
            val_fraction=check.split["val_fraction"],
            seed=check.split["seed"],
            suggestion=check.fallback_policy,
        )
        write_json(staged / RUBRIC, check.rubric.to_dict())  # the staged directory is renamed whole
        write_json(staged / RECORD, {"version": version, "promoted": now(), "source": str(source), **who})
        for path in staged.rglob("*"):
            if path.is_file():
                path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # read-only: versions are immutable
        install_dir(staged, vdir, error=RegistryError)


def _clean_leftovers(reg: Path) -> tuple[str, ...]:
    """Remove what find_leftovers lists (the caller holds the lock, so none is in progress) and log it."""
    removed: list[str] = []
    for leftover in find_leftovers(reg):
        with contextlib.suppress(OSError):
            remove(reg / leftover.path)
            removed.append(leftover.path)
    if removed:
        _log(
            reg, "cleanup", None, f"removed {len(removed)} leftover(s) of interrupted promotions: " + ", ".join(removed)
        )
    return tuple(removed)


def _switch(reg: Path, version: str, history: list[str], reason: str) -> None:
    write_json_atomic(reg / CURRENT, {"version": version, "history": history, "switched": now(), "reason": reason})


def _refuse(
    reg: Path,
    version: str | None,
    reason: str,
    source: Path,
    rubric: Rubric | None,
    who: dict,
    cleaned: tuple[str, ...] = (),
) -> PromoteResult:
    current = read_current(reg)  # one appended line needs no lock; callers may hold it already
    reason = _log_refusal(
        reg,
        "refuse",
        version,
        reason,
        source=str(source),
        failed=[c.name for c in rubric.checks if not c.passed] if rubric else None,
        **who,
    )
    return PromoteResult(False, version, reason, rubric, current["version"] if current else None, cleaned)


def _refuse_rollback(
    reg: Path, current: str | None, reason: str, who: dict, cleaned: tuple[str, ...]
) -> RollbackResult:
    reason = _log_refusal(reg, "rollback-refused", current, reason, **who)
    return RollbackResult(False, current, current, reason, cleaned)


def _log_refusal(reg: Path, event: str, version: str | None, reason: str, **extra: Any) -> str:
    """Log a refusal; when the log cannot be written (a read-only registry) keep the reason and say so."""
    try:
        _log(reg, event, version, reason, **extra)
    except OSError as e:
        return f"{reason} (this refusal could not be logged: {type(e).__name__}: {short(e, 120)})"
    return reason


def _who(actor: str | None, why: str | None, **more: str) -> dict:
    """actor and why for the log (the ones given), each checked: a string of at most MAX_NOTE_CHARS."""
    for name, value in (("actor", actor), ("why", why), *more.items()):
        if value is not None and not isinstance(value, str):
            raise RegistryError(f"{name} must be a string, got {type(value).__name__}")
        if value is not None and len(value) > MAX_NOTE_CHARS:
            raise RegistryError(f"{name} is {len(value):,} characters long; keep it to at most {MAX_NOTE_CHARS}")
    return {k: v for k, v in (("actor", actor), ("why", why)) if v is not None}


def _make(reg: Path) -> None:
    """The registry folder, made if it is new; RegistryError at once for a folder that is not a registry the lab made
    (`registry_problem`: /proc, /dev, a home folder) or that cannot be made."""
    check_registry(reg)
    try:
        reg.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RegistryError(
            f"cannot make the registry {str(reg)!r} ({e.strerror or e}); choose a folder you can write to"
        ) from None


@contextlib.contextmanager
def _locked(reg: Path) -> Iterator[None]:
    # filelock retries a lock file it cannot create until its timeout, so a folder where no file can be made
    # (read-only, /proc) waited LOCK_TIMEOUT s before saying so: a file made and removed at once says it now. Not the
    # lock file itself: for filelock's SoftFileLock (and a Windows share) a lock file that exists is a lock held.
    try:
        fd, probe = tempfile.mkstemp(prefix=f"{LOCK}.", suffix=".check", dir=reg)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise RegistryError(
            f"cannot lock the registry {str(reg)!r} ({type(e).__name__}: {e.strerror or e}); it may be read-only"
        ) from None
    lock = FileLock(str(reg / LOCK), timeout=LOCK_TIMEOUT)
    try:
        lock.acquire()
    except Timeout:
        raise RegistryError(
            f"the registry {str(reg)!r} is locked by another promotion or rollback (waited "
            f"{LOCK_TIMEOUT:g} s); try again when it has finished"
        ) from None
    except OSError as e:
        raise RegistryError(
            f"cannot lock the registry {str(reg)!r} ({type(e).__name__}: {e}); it may be read-only"
        ) from None
    try:
        yield
    finally:
        lock.release()
