"""The model registry: immutable versions, an atomically switched `current` pointer, an append-only log,
and what to serve when the current version cannot be loaded.

    registry/
      versions/<version>/bundle/      a verified copy of the promoted bundle (its files made read-only)
      versions/<version>/ngram/       its named fallback: the n-gram baseline trained on the same split
      versions/<version>/rubric.json  the rubric it passed
      versions/<version>/record.json  when it was promoted and from where
      current                         {"version", "history" (earlier currents, oldest first), "switched", "reason"}
      log.jsonl                       one JSON line per promotion, refusal and rollback: time, event, version, reason
      .lock                           held (flock) while the registry changes

`promote` runs the release rubric (core.release.check_release) first; a bundle that fails is refused,
the refusal is logged with the failed checks, and `current` stays where it was. A version directory is
installed by copying into a temporary sibling and renaming it into place, and is never changed or
removed afterwards; `current` is rewritten whole (temporary file + os.replace), so a reader sees the old
pointer or the new one. Nothing here deletes what a user trained: the promoted bundle is copied, never
moved, and a refused bundle is left untouched where it was.

`resolve_served` is the serving side: the current version if it loads and verifies; otherwise the
last known-good version (a promoted version that still loads: the earlier currents, latest first, then
any other promoted version, newest first); otherwise the n-gram fallback stored with a version. The
returned `reason` names what is served and why, for the app's banner.
"""
from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import shutil
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from core.baselines import BaselineBundle, load_baseline, read_kind, save_baseline
from core.bundle import Bundle, BundleError, load_bundle
from core.release import RUBRIC, ReleaseCheck, ReleasePolicy, Rubric, check_release, write_json_atomic

CURRENT = "current"
LOG = "log.jsonl"
VERSIONS = "versions"
BUNDLE = "bundle"
FALLBACK = "ngram"
RECORD = "record.json"


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
        from core.evaluation import TransformerPredictor

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


@dataclass(frozen=True)
class RollbackResult:
    switched: bool
    version: str | None  # current afterwards
    previous: str | None  # current before
    reason: str


@dataclass(frozen=True)
class VersionInfo:
    version: str
    promoted: str | None
    verifies: bool
    problem: str


@dataclass(frozen=True)
class RegistryStatus:
    registry: str
    current: str | None
    history: tuple[str, ...]
    versions: tuple[VersionInfo, ...]  # oldest promotion first
    served: Served
    log: tuple[dict, ...]  # the latest entries, oldest first

    def to_dict(self) -> dict:
        return {"registry": self.registry, "current": self.current, "history": list(self.history),
                "versions": [v.__dict__ for v in self.versions], "served": self.served.to_dict(),
                "log": list(self.log)}


# ---- promote and rollback --------------------------------------------------------------------------

def promote(bundle_dir, registry="registry", *, corpus=None, policy: ReleasePolicy = ReleasePolicy(),
            check: ReleaseCheck | None = None) -> PromoteResult:
    """Check the bundle with the rubric; if it passes, install it as a version and make it current.

    `check` reuses a check_release result of this bundle (a page that has just shown the rubric); the
    copy installed must then still have the version that was checked, or the promotion fails."""
    reg, source = Path(registry), Path(bundle_dir)
    reg.mkdir(parents=True, exist_ok=True)
    try:
        kind = read_kind(source)
    except BundleError as e:
        return _refuse(reg, None, f"{e}", source)
    if kind != "transformer":
        return _refuse(reg, None, f"only transformer bundles are promoted, {str(source)!r} is a {kind!r} bundle", source)
    if check is None:
        check = check_release(source, corpus=corpus, policy=policy)  # outside the lock: it takes a while
    elif Path(check.rubric.bundle).resolve() != source.resolve():
        raise RegistryError(f"the check given is of {check.rubric.bundle!r}, not of {str(source)!r}")
    rubric = check.rubric
    if not rubric.passed:
        return _refuse(reg, rubric.version, "failed the release rubric: " + "; ".join(rubric.failures()), source, rubric)
    version = rubric.version
    with _locked(reg):
        vdir = reg / VERSIONS / version
        if vdir.exists():
            try:
                load_bundle(vdir / BUNDLE)
            except BundleError as e:
                return _refuse(reg, version, f"the stored copy of version {version} is damaged and is kept for "
                                             f"inspection ({e})", source, rubric)
        else:
            _install(vdir, source, version, check)
        current = read_current(reg)
        if current and current["version"] == version:
            reason = f"version {version} is already current"
        else:
            history = [*current["history"], current["version"]] if current else []
            _switch(reg, version, history, f"promoted from {source}")
            reason = f"version {version} is now current" + (f" (was {current['version']})" if current else "")
        _log(reg, "promote", version, reason, source=str(source), previous=current["version"] if current else None)
    return PromoteResult(True, version, reason, rubric, version)


def rollback(registry="registry", *, to: str | None = None, reason: str = "manual rollback") -> RollbackResult:
    """Switch `current` back to the version that was current before it (or to the promoted version `to`)."""
    reg = Path(registry)
    with _locked(reg):
        current = read_current(reg)
        if current is None:
            return _refuse_rollback(reg, None, "there is no current version to roll back from")
        history = list(current["history"])
        if to is None:
            if not history:
                return _refuse_rollback(reg, current["version"], f"version {current['version']} has no earlier version")
            target, history = history[-1], history[:-1]
        else:
            if to == current["version"]:
                return _refuse_rollback(reg, current["version"], f"version {to} is already current")
            if not (reg / VERSIONS / to).is_dir():
                return _refuse_rollback(reg, current["version"], f"version {to!r} was never promoted here")
            target, history = to, [h for h in history if h != to]
        try:
            load_bundle(reg / VERSIONS / target / BUNDLE)
        except BundleError as e:
            return _refuse_rollback(reg, current["version"], f"version {target} does not load ({e})")
        _switch(reg, target, history, f"rollback from {current['version']}: {reason}")
        message = f"current is version {target} again (was {current['version']}): {reason}"
        _log(reg, "rollback", target, message, previous=current["version"])
    return RollbackResult(True, target, current["version"], message)


# ---- serving -------------------------------------------------------------------------------------

def resolve_served(registry="registry") -> Served:
    """What to serve now, and why (see the module docstring). Reads only; never raises for a bad registry."""
    reg = Path(registry)
    current = read_current(reg)
    stored = [v.version for v in reversed(list_versions(reg))]  # newest first
    if current is None:
        if not stored:
            return Served(None, None, None, f"nothing has been promoted to {str(reg)!r} yet", True)
        why, failed = "the current pointer is missing or unreadable", None
    else:
        failed = current["version"]
        try:
            bundle = load_bundle(reg / VERSIONS / failed / BUNDLE)
            return Served(bundle, failed, "transformer", f"serving the current version {failed}", False)
        except BundleError as e:
            why = f"the current version {failed} fails to load or verify ({_short(e)})"
    order = list(reversed(current["history"])) if current else []
    candidates = list(dict.fromkeys(order + stored))
    candidates = [v for v in candidates if v != failed]
    for version in candidates:
        try:
            bundle = load_bundle(reg / VERSIONS / version / BUNDLE)
        except BundleError:
            continue
        return Served(bundle, version, "transformer", f"{why}; serving the last known-good version {version}", True)
    for owner in ([failed] if failed else []) + candidates:
        try:
            baseline = load_baseline(reg / VERSIONS / owner / FALLBACK)
        except BundleError:
            continue
        return Served(baseline, baseline.version, "ngram",
                      f"{why}, and no earlier version loads; serving the n-gram baseline {baseline.version} "
                      f"(the named fallback of version {owner})", True)
    return Served(None, None, None, f"{why}; no known-good version and no n-gram fallback loads", True)


def status(registry="registry", *, log_tail: int = 10) -> RegistryStatus:
    reg = Path(registry)
    current = read_current(reg)
    return RegistryStatus(str(reg), current["version"] if current else None,
                          tuple(current["history"]) if current else (), tuple(list_versions(reg, verify=True)),
                          resolve_served(reg), tuple(read_log(reg)[-log_tail:] if log_tail else ()))


# ---- reading ---------------------------------------------------------------------------------------

def read_current(registry) -> dict | None:
    """The current pointer, or None when it is missing or unreadable."""
    try:
        data = json.loads((Path(registry) / CURRENT).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("version"), str) or not isinstance(data.get("history"), list):
        return None
    return data


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
    """Installed versions, oldest promotion first; with verify=True each is loaded to say if it still verifies."""
    root = Path(registry) / VERSIONS
    if not root.is_dir():
        return []
    infos = []
    for vdir in root.iterdir():
        if vdir.name.startswith(".") or not vdir.is_dir():
            continue
        try:
            promoted = json.loads((vdir / RECORD).read_text(encoding="utf-8")).get("promoted")
        except (OSError, ValueError):
            promoted = None
        ok, problem = True, ""
        if verify:
            try:
                load_bundle(vdir / BUNDLE)
            except BundleError as e:
                ok, problem = False, _short(e)
        infos.append(VersionInfo(vdir.name, promoted, ok, problem))
    return sorted(infos, key=lambda v: (v.promoted or "", v.version))


# ---- helpers -------------------------------------------------------------------------------------

def _install(vdir: Path, source: Path, version: str, check) -> None:
    """Copy the bundle, its fallback, rubric and record into a temporary sibling, verify, rename."""
    tmp = vdir.parent / f".{version}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir(parents=True)
    try:
        shutil.copytree(source, tmp / BUNDLE)
        copied = load_bundle(tmp / BUNDLE)
        if copied.version != version:
            raise RegistryError(f"{str(source)!r} changed while it was being promoted (version {copied.version}, "
                                f"checked {version}); promote it again")
        save_baseline(tmp / FALLBACK, check.fallback, corpus=check.corpus, val_fraction=check.split["val_fraction"],
                      seed=check.split["seed"])
        write_json_atomic(tmp / RUBRIC, check.rubric.to_dict())
        write_json_atomic(tmp / RECORD, {"version": version, "promoted": _now(), "source": str(source)})
        for path in tmp.rglob("*"):
            if path.is_file():
                path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # read-only: versions are immutable
        os.rename(tmp, vdir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _switch(reg: Path, version: str, history: list[str], reason: str) -> None:
    write_json_atomic(reg / CURRENT, {"version": version, "history": history, "switched": _now(), "reason": reason})


def _refuse(reg: Path, version: str | None, reason: str, source: Path, rubric: Rubric | None = None) -> PromoteResult:
    current = read_current(reg)  # one appended line needs no lock; callers may hold it already
    _log(reg, "refuse", version, reason, source=str(source),
         failed=[c.name for c in rubric.checks if not c.passed] if rubric else None)
    return PromoteResult(False, version, reason, rubric, current["version"] if current else None)


def _refuse_rollback(reg: Path, current: str | None, reason: str) -> RollbackResult:
    _log(reg, "rollback-refused", current, reason)
    return RollbackResult(False, current, current, reason)


def _log(reg: Path, event: str, version: str | None, reason: str, **extra: Any) -> None:
    """Append one JSON line (opened in append mode, fsync'ed): the log is never rewritten."""
    entry = {"time": _now(), "event": event, "version": version, "reason": reason}
    entry.update({k: v for k, v in extra.items() if v is not None})
    with open(reg / LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


@contextlib.contextmanager
def _locked(reg: Path) -> Iterator[None]:
    reg.mkdir(parents=True, exist_ok=True)
    with open(reg / ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def _short(e: Exception, limit: int = 200) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
