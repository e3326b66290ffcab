"""The model registry: immutable versions, an atomically switched `current` pointer, an append-only log,
and what to serve when the current version cannot be loaded.

    registry/
      versions/<version>/bundle/      a verified copy of the promoted bundle (its files made read-only)
      versions/<version>/ngram/       its named fallback: the n-gram baseline trained on the same split
      versions/<version>/rubric.json  the rubric it passed
      versions/<version>/record.json  when it was promoted, from where, by whom and why
      current                         {"version", "history" (earlier currents, oldest first), "switched", "reason"}
      log.jsonl                       one JSON line per promotion, refusal, rollback and cleanup: time, event,
                                      version, reason (and actor, why when the caller gave them)
      .lock                           held (filelock, portable to Windows) while the registry changes

`promote` runs the release rubric (core.release.gate.check_release) first; a bundle that fails is refused,
the refusal is logged with the failed checks, and `current` stays where it was. A version directory is
installed by copying into a temporary sibling `versions/.<version>.<8 hex>.tmp` and renaming it into place,
and is never changed or removed afterwards; `current` is rewritten whole (temporary file + os.replace), so
a reader sees the old pointer or the new one. A process killed mid-promotion leaves its temporary
directory: `status` lists such leftovers and the next promote or rollback removes them (under the lock,
so never one in progress). Nothing here deletes what a user trained: the promoted bundle is copied, never
moved, and a refused bundle is left untouched where it was.

Nothing read from the registry is trusted as a path. A version is served only if its name has the form
core.model.bundle.manifest_version gives (16 lowercase hex digits; every `history` entry and rollback target
too), its directory is a real directory inside versions/ (no symbolic link), its stored rubric.json
records a passed rubric of that version, and its bundle loads with that version.

`resolve_served` is the serving side: the current version if it passes those checks; otherwise the
last known-good version (a promoted version that passes them: the earlier currents, latest first, then
any other promoted version, newest first); otherwise the n-gram fallback stored with a version. The
returned `reason` names what is served and why, for the app's banner. It never raises for a bad registry.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import os
import re
import shutil
import stat
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from core.model.bundle import VERSION_LENGTH, Bundle, BundleError, is_version, load_bundle
from core.release.baselines import BaselineBundle, load_baseline, read_kind, save_baseline
from core.release.gate import RUBRIC, ReleaseCheck, ReleasePolicy, Rubric, check_release, write_json_atomic

CURRENT = "current"
LOG = "log.jsonl"
LOCK = ".lock"
VERSIONS = "versions"
BUNDLE = "bundle"
FALLBACK = "ngram"
RECORD = "record.json"
LOCK_TIMEOUT = 120.0  # seconds a promote or rollback waits for another to finish (an install takes seconds)
MAX_RECORD_BYTES = 1 << 20  # `current` and a stored rubric.json: a few kB (a pointer grows ~20 bytes a promotion)
MAX_NOTE_CHARS = 500  # actor, why and a rollback reason, as typed on a form
MAX_COUNTED_FILES = 10_000  # files counted for a leftover's size (ours hold 8)
_LEFTOVER = re.compile(rf"\.[0-9a-f]{{{VERSION_LENGTH}}}\.[0-9a-f]{{8}}\.tmp")  # versions/ temp dirs of _install
_POINTER_TMP = re.compile(rf"\.{CURRENT}\.[a-z0-9_]+\.tmp")  # registry/ temp files of write_json_atomic
_NAME_RULE = f"{VERSION_LENGTH} lowercase hex digits, as `release status` lists them"

DEFAULT_POLICY = ReleasePolicy()  # frozen: one shared default is safe


class RegistryError(ValueError):
    """The registry cannot do what was asked; the message says why."""


@dataclass(frozen=True)
class Served:
    model: Bundle | BaselineBundle | None  # what to serve; None when nothing loads
    version: str | None
    kind: str | None  # "transformer", "ngram" or None
    reason: str  # names the version served and why (the app's banner)
    degraded: bool  # True unless the current version is served

    @property
    def predictor(self):
        """The served model behind the evaluation's predictor interface (None when nothing loads)."""
        from core.release.evaluation import TransformerPredictor

        if isinstance(self.model, Bundle):
            return TransformerPredictor(self.model.model, self.model.tokenizer)
        return None if self.model is None else self.model.model

    def to_dict(self) -> dict:
        return {"version": self.version, "kind": self.kind, "reason": self.reason, "degraded": self.degraded}


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


@dataclass(frozen=True)
class VersionInfo:
    version: str
    promoted: str | None
    verifies: bool
    problem: str


@dataclass(frozen=True)
class Leftover:
    path: str  # relative to the registry, e.g. versions/.<version>.<8 hex>.tmp
    bytes: int  # its size (counted over at most MAX_COUNTED_FILES files)


@dataclass(frozen=True)
class RegistryStatus:
    registry: str
    current: str | None
    history: tuple[str, ...]
    versions: tuple[VersionInfo, ...]  # oldest promotion first
    served: Served
    log: tuple[dict, ...]  # the latest entries, oldest first
    leftovers: tuple[Leftover, ...] = ()  # of interrupted promotions; the next promote or rollback removes them

    def to_dict(self) -> dict:
        return {
            "registry": self.registry,
            "current": self.current,
            "history": list(self.history),
            "versions": [v.__dict__ for v in self.versions],
            "served": self.served.to_dict(),
            "log": list(self.log),
            "leftovers": [v.__dict__ for v in self.leftovers],
        }


# ---- promote and rollback --------------------------------------------------------------------------


def promote(
    bundle_dir,
    registry="registry",
    *,
    corpus=None,
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
    reg.mkdir(parents=True, exist_ok=True)
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
    with _locked(reg):
        cleaned = _clean_leftovers(reg)
        vdir = _version_dir(reg, version)
        if vdir.exists():
            try:
                _load_version(reg, version)
            except BundleError as e:
                return _refuse(
                    reg,
                    version,
                    f"the stored copy of version {version} is damaged and is kept for inspection ({_short(e)})",
                    source,
                    rubric,
                    who,
                    cleaned,
                )
        else:
            _install(vdir, source, version, check, who)
        current, problem = _pointer(reg)
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
    registry="registry",
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
        raise RegistryError(f"rollback target {_quote(to)} is not a version name ({_NAME_RULE})")
    with _locked(reg):
        cleaned = _clean_leftovers(reg)
        current, problem = _pointer(reg)
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
            _load_version(reg, target)
        except BundleError as e:
            return _refuse_rollback(
                reg, current["version"], f"version {target} does not load ({_short(e)})", who, cleaned
            )
        _switch(reg, target, history, f"rollback from {current['version']}: {reason}")
        message = f"current is version {target} again (was {current['version']}): {reason}"
        _log(reg, "rollback", target, message, previous=current["version"], **who)
    return RollbackResult(True, target, current["version"], message, cleaned)


# ---- serving -------------------------------------------------------------------------------------


def resolve_served(registry="registry") -> Served:
    """What to serve now, and why (see the module docstring). Reads only; never raises for a bad registry."""
    reg = Path(registry)
    current, problem = _pointer(reg)
    stored = [v.version for v in reversed(list_versions(reg))]  # newest first
    if current is None:
        if not stored and not problem:
            return Served(None, None, None, f"nothing has been promoted to {str(reg)!r} yet", True)
        why, failed = problem or "the current pointer is missing", None
    else:
        failed = current["version"]
        try:
            bundle = _load_version(reg, failed)
            return Served(bundle, failed, "transformer", f"serving the current version {failed}", False)
        except BundleError as e:
            why = f"the current version {failed} fails to load or verify ({_short(e)})"
    order = list(reversed(current["history"])) if current else []
    candidates = [v for v in dict.fromkeys(order + stored) if v != failed]
    for version in candidates:
        try:
            bundle = _load_version(reg, version)
        except BundleError:
            continue
        return Served(bundle, version, "transformer", f"{why}; serving the last known-good version {version}", True)
    for owner in ([failed] if failed else []) + candidates:
        try:
            baseline = _read_version(reg, owner, FALLBACK, load_baseline)
        except BundleError:
            continue
        return Served(
            baseline,
            baseline.version,
            "ngram",
            f"{why}, and no earlier version loads; serving the n-gram baseline {baseline.version} "
            f"(the named fallback of version {owner})",
            True,
        )
    return Served(None, None, None, f"{why}; no known-good version and no n-gram fallback loads", True)


def status(registry="registry", *, log_tail: int = 10) -> RegistryStatus:
    reg = Path(registry)
    current = read_current(reg)
    return RegistryStatus(
        str(reg),
        current["version"] if current else None,
        tuple(current["history"]) if current else (),
        tuple(list_versions(reg, verify=True)),
        resolve_served(reg),
        tuple(read_log(reg)[-log_tail:] if log_tail else ()),
        tuple(find_leftovers(reg)),
    )


# ---- reading ---------------------------------------------------------------------------------------


def read_current(registry) -> dict | None:
    """The current pointer, or None when it is missing, unreadable or names anything but versions."""
    return _pointer(Path(registry))[0]


def read_log(registry) -> list[dict]:
    """Every log entry, oldest first (a line that does not parse is skipped)."""
    path = Path(registry) / LOG
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return entries


def list_versions(registry, *, verify: bool = False) -> list[VersionInfo]:
    """Installed versions (directories named as versions), oldest promotion first; with verify=True each
    is checked as resolve_served checks it, to say whether it can be served."""
    root = Path(registry) / VERSIONS
    try:
        vdirs = [d for d in root.iterdir() if is_version(d.name) and d.is_dir()] if root.is_dir() else []
    except OSError:
        return []
    infos = []
    for vdir in vdirs:
        try:
            promoted = json.loads(_read_small(vdir / RECORD)).get("promoted")
        except (OSError, ValueError, AttributeError):
            promoted = None
        ok, problem = True, ""
        if verify:
            try:
                _load_version(Path(registry), vdir.name)
            except BundleError as e:
                ok, problem = False, _short(e)
        infos.append(VersionInfo(vdir.name, promoted if isinstance(promoted, str) else None, ok, problem))
    return sorted(infos, key=lambda v: (v.promoted or "", v.version))


def find_leftovers(registry) -> list[Leftover]:
    """Temporary directories and files that a killed promote, rollback or switch left behind."""
    reg, found = Path(registry), []
    for folder, pattern, is_dir in ((reg / VERSIONS, _LEFTOVER, True), (reg, _POINTER_TMP, False)):
        try:
            entries = sorted(folder.iterdir()) if folder.is_dir() else []
        except OSError:
            continue
        for p in entries:
            if pattern.fullmatch(p.name) and not p.is_symlink() and (p.is_dir() if is_dir else p.is_file()):
                found.append(Leftover(p.relative_to(reg).as_posix(), _size(p)))
    return found


# ---- what may be served --------------------------------------------------------------------------


def _version_dir(reg: Path, version: str) -> Path:
    """versions/<version>, confined to versions/; BundleError naming what is wrong."""
    if not is_version(version):
        raise BundleError(f"{_quote(version)} is not a version name ({_NAME_RULE})")
    root = reg / VERSIONS
    vdir = root / version
    if vdir.is_symlink():
        raise BundleError(f"{VERSIONS}/{version} is a symbolic link; a version is a real directory of the registry")
    if vdir.resolve().parent != root.resolve():
        raise BundleError(f"{VERSIONS}/{version} resolves outside {str(root)!r}")
    return vdir


def _checked_dir(reg: Path, version: str, part: str) -> Path:
    """versions/<version>/<part> of a version whose stored rubric says it passed; else BundleError."""
    vdir = _version_dir(reg, version)
    where = f"{VERSIONS}/{version}/{RUBRIC}"
    if (vdir / RUBRIC).is_symlink() or (vdir / part).is_symlink():
        raise BundleError(f"{VERSIONS}/{version} holds a symbolic link ({RUBRIC} or {part}/); it is not served")
    try:
        rubric = json.loads(_read_small(vdir / RUBRIC))
    except (OSError, ValueError) as e:
        raise BundleError(
            f"{where} is missing or unreadable ({type(e).__name__}); only a version the gate passed is served"
        ) from None
    checks = rubric.get("checks") if isinstance(rubric, dict) else None
    if not (
        isinstance(checks, list)
        and checks
        and rubric.get("passed") is True
        and rubric.get("version") == version
        and all(isinstance(c, dict) and c.get("passed") is True for c in checks)
    ):
        raise BundleError(
            f"{where} does not record a passed release rubric of version {version}; only a version "
            f"the gate passed is served"
        )
    return vdir / part


def _load_version(reg: Path, version: str) -> Bundle:
    """The bundle of a version that may be served (see the module docstring); else BundleError."""
    bundle = _read_version(reg, version, BUNDLE, load_bundle)
    if bundle.version != version:
        raise BundleError(f"{VERSIONS}/{version} holds a bundle of version {bundle.version}, not {version}")
    return bundle


def _read_version(reg: Path, version: str, part: str, loader):
    try:
        return loader(_checked_dir(reg, version, part))
    except (OSError, RuntimeError) as e:  # unreadable, or a loop of links (RuntimeError before Python 3.13)
        raise BundleError(f"{VERSIONS}/{version} could not be read ({type(e).__name__}: {_short(e, 120)})") from None


def _pointer(reg: Path) -> tuple[dict | None, str]:
    """(the current pointer, "") or (None, what is wrong with it; "" when there is none)."""
    path = reg / CURRENT
    try:
        if not (path.exists() or path.is_symlink()):
            return None, ""
        data = json.loads(_read_small(path))
    except (OSError, ValueError) as e:
        return None, f"the current pointer is unreadable ({type(e).__name__}: {_short(e, 80)})"
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        return None, "the current pointer is not a JSON object with a version and a history"
    for which, name in [("version", data.get("version")), *(("history entry", h) for h in data["history"])]:
        if not is_version(name):
            return None, f"the current pointer's {which} {_quote(name)} is not a version name ({_NAME_RULE})"
    return data, ""


def _read_small(path: Path) -> str:
    size = path.stat().st_size
    if size > MAX_RECORD_BYTES:
        raise ValueError(f"{path.name} is {size:,} bytes, more than MAX_RECORD_BYTES={MAX_RECORD_BYTES:,}")
    return path.read_text(encoding="utf-8")


# ---- helpers -------------------------------------------------------------------------------------


def _install(vdir: Path, source: Path, version: str, check, who: dict) -> None:
    """Copy the bundle, its fallback, rubric and record into a temporary sibling, verify, rename."""
    tmp = vdir.parent / f".{version}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir(parents=True)
    try:
        shutil.copytree(source, tmp / BUNDLE)
        copied = load_bundle(tmp / BUNDLE)
        if copied.version != version:
            raise RegistryError(
                f"{str(source)!r} changed while it was being promoted (version {copied.version}, "
                f"checked {version}); promote it again"
            )
        save_baseline(
            tmp / FALLBACK,
            check.fallback,
            corpus=check.corpus,
            val_fraction=check.split["val_fraction"],
            seed=check.split["seed"],
        )
        write_json_atomic(tmp / RUBRIC, check.rubric.to_dict())
        write_json_atomic(tmp / RECORD, {"version": version, "promoted": _now(), "source": str(source), **who})
        for path in tmp.rglob("*"):
            if path.is_file():
                path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # read-only: versions are immutable
        os.rename(tmp, vdir)
    except BaseException:
        with contextlib.suppress(OSError):
            _remove(tmp)
        raise


def _clean_leftovers(reg: Path) -> tuple[str, ...]:
    """Remove what find_leftovers lists (the caller holds the lock, so none is in progress) and log it."""
    removed = []
    for leftover in find_leftovers(reg):
        with contextlib.suppress(OSError):
            _remove(reg / leftover.path)
            removed.append(leftover.path)
    if removed:
        _log(
            reg, "cleanup", None, f"removed {len(removed)} leftover(s) of interrupted promotions: " + ", ".join(removed)
        )
    return tuple(removed)


def _remove(path: Path) -> None:
    def writable_then_retry(func, p, _exc):  # the files are read-only, and Windows refuses to delete those
        os.chmod(p, stat.S_IRUSR | stat.S_IWUSR)
        func(p)

    if path.is_dir():
        shutil.rmtree(path, **{"onexc" if sys.version_info >= (3, 12) else "onerror": writable_then_retry})
    else:
        path.unlink()


def _size(path: Path) -> int:
    files = itertools.islice(path.rglob("*"), MAX_COUNTED_FILES) if path.is_dir() else [path]
    return sum(p.lstat().st_size for p in files if not p.is_dir())


def _switch(reg: Path, version: str, history: list[str], reason: str) -> None:
    write_json_atomic(reg / CURRENT, {"version": version, "history": history, "switched": _now(), "reason": reason})


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
        return f"{reason} (this refusal could not be logged: {type(e).__name__}: {_short(e, 120)})"
    return reason


def _log(reg: Path, event: str, version: str | None, reason: str, **extra: Any) -> None:
    """Append one JSON line (opened in append mode, fsync'ed): the log is never rewritten."""
    entry = {"time": _now(), "event": event, "version": version, "reason": reason}
    entry.update({k: v for k, v in extra.items() if v is not None})
    with open(reg / LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _who(actor: str | None, why: str | None, **more: str) -> dict:
    """actor and why for the log (the ones given), each checked: a string of at most MAX_NOTE_CHARS."""
    for name, value in (("actor", actor), ("why", why), *more.items()):
        if value is not None and not isinstance(value, str):
            raise RegistryError(f"{name} must be a string, got {type(value).__name__}")
        if value is not None and len(value) > MAX_NOTE_CHARS:
            raise RegistryError(f"{name} is {len(value):,} characters long; keep it to at most {MAX_NOTE_CHARS}")
    return {k: v for k, v in (("actor", actor), ("why", why)) if v is not None}


@contextlib.contextmanager
def _locked(reg: Path) -> Iterator[None]:
    reg.mkdir(parents=True, exist_ok=True)
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


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")


def _quote(value: object, limit: int = 40) -> str:
    """A value read from a file, shown short (it may be anything)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(e: Exception | str, limit: int = 200) -> str:
    """One line of at most `limit` characters; a loader's "bundle '<path>' refused: " is dropped (the
    reason names the version already, and the path would crowd out what was wrong)."""
    text = " ".join(str(e).split())
    if text.startswith("bundle '") and " refused: " in text:
        text = text.split(" refused: ", 1)[1]
    return text if len(text) <= limit else text[: limit - 3] + "..."
