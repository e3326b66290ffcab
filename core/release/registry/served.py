"""What the registry serves, and the checks a version passes first: the registry's read side.

Nothing read from the registry is trusted as a path. A version is served only if its name is a manifest version
(16 lowercase hex digits), its directory is a real one inside versions/, its rubric records a pass for it and its
bundle loads with that version. Otherwise the last known-good version is served (earlier currents, latest first,
then any other promoted version), else an n-gram fallback; the reason is said in the app's banner, and reading
never raises for a bad registry. A folder that is not a registry the lab made is refused at once (`--registry
/proc` once hung `release rollback` on a lock that could never be made there).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from core.jsonfile import read_json_file
from core.model.bundle import VERSION_LENGTH, Bundle, is_version, load_bundle
from core.model.bundle_checks import BundleError
from core.release.baselines.baseline_bundle import BaselineBundle, load_baseline
from core.release.gate.rubric import RUBRIC
from core.release.registry.registry_log import LOG
from core.release.serving.predictor import Predictor
from core.release.serving.transformer_predictor import TransformerPredictor

# A registry:  versions/<version>/{bundle/, ngram/ (its n-gram fallback), rubric.json, record.json (when, from
# where, by whom, why)};  current {"version", "history" (earlier currents, oldest first), "switched", "reason"};
# log.jsonl;  .lock (filelock, portable to Windows, held while the registry changes).
CURRENT = "current"
VERSIONS = "versions"
BUNDLE = "bundle"
FALLBACK = "ngram"
RECORD = "record.json"
MAX_RECORD_BYTES = 1 << 20  # `current` and a stored rubric.json: a few kB (a pointer grows ~20 bytes a promotion)
NAME_RULE = f"{VERSION_LENGTH} lowercase hex digits, as `release status` lists them"
RECORD_FIX = "the registry file was damaged or edited by hand; promote or roll back again to rewrite it"
LOCK = ".lock"  # held (filelock) while the registry changes
LAYOUT = (VERSIONS, CURRENT, LOG, LOCK)  # what the lab makes in a registry; a folder holding none of them is not one
MAX_REGISTRY_ENTRIES = 1_000  # a registry holds the LAYOUT and a few leftovers of interrupted promotions
MAX_VERSIONS = 10_000  # versions/ is listed at most this far (a class promotes a few a term)

Loaded = TypeVar("Loaded")


class RegistryError(ValueError):
    """The registry cannot do what was asked; the message says why."""


@dataclass(frozen=True)
class ServedVersion:
    """The version the registry serves now (resolve_version): its bundle, its kind, and why it and not another."""

    bundle: Bundle | BaselineBundle | None  # what to serve; None when nothing loads
    version: str | None
    kind: str | None  # "transformer", "ngram" or None
    reason: str  # names the version served and why (the app's banner)
    degraded: bool  # True unless the current version is served

    @property
    def predictor(self) -> Predictor | None:
        """The served bundle behind the evaluation's predictor interface (None when nothing loads)."""
        if isinstance(self.bundle, Bundle):
            return TransformerPredictor(self.bundle.model, self.bundle.tokenizer)
        return None if self.bundle is None else self.bundle.predictor

    def to_dict(self) -> dict:
        return {"version": self.version, "kind": self.kind, "reason": self.reason, "degraded": self.degraded}


@dataclass(frozen=True)
class VersionInfo:
    version: str
    promoted: str | None
    verifies: bool
    problem: str


def resolve_version(registry: str | os.PathLike = "registry") -> ServedVersion:
    """What to serve now, and why (see the module docstring). Reads only; never raises for a bad registry."""
    reg = Path(registry)
    foreign = registry_problem(reg)
    if foreign:
        return ServedVersion(None, None, None, f"{foreign}; nothing is served from it", True)
    current, problem = pointer(reg)
    stored = [v.version for v in reversed(list_versions(reg))]  # newest first
    if current is None:
        if not stored and not problem:
            return ServedVersion(None, None, None, f"nothing has been promoted to {str(reg)!r} yet", True)
        why, failed = problem or "the current pointer is missing", None
    else:
        failed = current["version"]
        try:
            bundle = load_version(reg, failed)
            return ServedVersion(bundle, failed, "transformer", f"serving the current version {failed}", False)
        except BundleError as e:
            why = f"the current version {failed} fails to load or verify ({short(e)})"
    order = list(reversed(current["history"])) if current else []
    candidates = [v for v in dict.fromkeys(order + stored) if v != failed]
    for version in candidates:
        try:
            bundle = load_version(reg, version)
        except BundleError:
            continue
        return ServedVersion(
            bundle, version, "transformer", f"{why}; serving the last known-good version {version}", True
        )
    for owner in ([failed] if failed else []) + candidates:
        try:
            baseline = read_version(reg, owner, FALLBACK, load_baseline)
        except BundleError:
            continue
        return ServedVersion(
            baseline,
            baseline.version,
            "ngram",
            f"{why}, and no earlier version loads; serving the n-gram baseline {baseline.version} "
            f"(the named fallback of version {owner})",
            True,
        )
    return ServedVersion(None, None, None, f"{why}; no known-good version and no n-gram fallback loads", True)


def read_current(registry: str | os.PathLike) -> dict | None:
    """The current pointer, or None when it is missing, unreadable or names anything but versions."""
    return pointer(Path(registry))[0]


def list_versions(registry: str | os.PathLike, *, verify: bool = False) -> list[VersionInfo]:
    """Installed versions (directories named as versions), oldest promotion first; with verify=True each
    is checked as resolve_version checks it, to say whether it can be served."""
    root = Path(registry) / VERSIONS
    if registry_problem(Path(registry)):
        return []
    try:
        listed = list(itertools.islice(root.iterdir(), MAX_VERSIONS)) if root.is_dir() else []
        vdirs = [d for d in listed if is_version(d.name) and d.is_dir()]
    except OSError:
        return []
    infos: list[VersionInfo] = []
    for vdir in vdirs:
        try:
            promoted = read_small(vdir / RECORD, f"{VERSIONS}/{vdir.name}/{RECORD}").get("promoted")
        except (OSError, ValueError, AttributeError):
            promoted = None
        ok, problem = True, ""
        if verify:
            try:
                load_version(Path(registry), vdir.name)
            except BundleError as e:
                ok, problem = False, short(e)
        infos.append(VersionInfo(vdir.name, promoted if isinstance(promoted, str) else None, ok, problem))
    return sorted(infos, key=lambda v: (v.promoted or "", v.version))


def registry_problem(reg: Path) -> str:
    """Why `reg` is not a registry the lab made, naming it; "" when it is one, or when nothing is there yet (the first
    promotion makes it). A registry is a directory of at most MAX_REGISTRY_ENTRIES entries, empty or holding one of
    LAYOUT: /proc, /dev or a home folder hold none, and are refused before anything in them is locked or read."""
    try:
        if not os.path.lexists(reg):
            return ""
        if not reg.is_dir():
            return (
                f"the registry {str(reg)!r} is not a directory; choose the folder `release promote` made, or a new one"
            )
        with os.scandir(reg) as entries:
            names = {e.name for e in itertools.islice(entries, MAX_REGISTRY_ENTRIES + 1)}
    except OSError as e:
        return f"the registry {str(reg)!r} cannot be listed ({e.strerror or e})"
    if len(names) > MAX_REGISTRY_ENTRIES:
        return (
            f"{str(reg)!r} holds more than {MAX_REGISTRY_ENTRIES:,} entries, so it is not a model registry (one holds "
            f"{', '.join(LAYOUT)}); choose the folder `release promote` made, or a new one"
        )
    if names and not names & set(LAYOUT):
        return (
            f"{str(reg)!r} is not a model registry (it holds none of {', '.join(LAYOUT)}); choose the folder "
            "`release promote` made, or a new one"
        )
    return ""


def check_registry(reg: Path) -> None:
    """RegistryError unless `reg` may be used as a registry (registry_problem)."""
    problem = registry_problem(reg)
    if problem:
        raise RegistryError(problem)


def version_dir(reg: Path, version: str) -> Path:
    """versions/<version>, confined to versions/; BundleError naming what is wrong."""
    if not is_version(version):
        raise BundleError(f"{quote(version)} is not a version name ({NAME_RULE})")
    root = reg / VERSIONS
    vdir = root / version
    if vdir.is_symlink():
        raise BundleError(f"{VERSIONS}/{version} is a symbolic link; a version is a real directory of the registry")
    if vdir.resolve().parent != root.resolve():
        raise BundleError(f"{VERSIONS}/{version} resolves outside {str(root)!r}")
    return vdir


def checked_dir(reg: Path, version: str, part: str) -> Path:
    """versions/<version>/<part> of a version whose stored rubric says it passed; else BundleError."""
    vdir = version_dir(reg, version)
    where = f"{VERSIONS}/{version}/{RUBRIC}"
    if (vdir / RUBRIC).is_symlink() or (vdir / part).is_symlink():
        raise BundleError(f"{VERSIONS}/{version} holds a symbolic link ({RUBRIC} or {part}/); it is not served")
    try:
        rubric = read_small(vdir / RUBRIC, where)
    except (OSError, ValueError) as e:
        raise BundleError(
            f"{where} is missing or unreadable ({type(e).__name__}{_detail(e)}); only a version the gate passed "
            "is served"
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


def load_version(reg: Path, version: str) -> Bundle:
    """The bundle of a version that may be served (see the module docstring); else BundleError."""
    bundle = read_version(reg, version, BUNDLE, load_bundle)
    if bundle.version != version:
        raise BundleError(f"{VERSIONS}/{version} holds a bundle of version {bundle.version}, not {version}")
    return bundle


def read_version(reg: Path, version: str, part: str, loader: Callable[[Path], Loaded]) -> Loaded:
    """loader(versions/<version>/<part>) of a version whose stored rubric passed; an unreadable one is a
    BundleError naming the version."""
    try:
        return loader(checked_dir(reg, version, part))
    except (OSError, RuntimeError) as e:  # unreadable, or a loop of links (RuntimeError before Python 3.13)
        raise BundleError(f"{VERSIONS}/{version} could not be read ({type(e).__name__}: {short(e, 120)})") from None


def pointer(reg: Path) -> tuple[dict | None, str]:
    """(the current pointer, "") or (None, what is wrong with it; "" when there is none)."""
    path = reg / CURRENT
    try:
        if not (path.exists() or path.is_symlink()):
            return None, ""
        data = read_small(path, CURRENT)
    except (OSError, ValueError) as e:
        return None, f"the current pointer is unreadable ({type(e).__name__}: {short(e, 80)})"
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        return None, "the current pointer is not a JSON object with a version and a history"
    for which, name in [("version", data.get("version")), *(("history entry", h) for h in data["history"])]:
        if not is_version(name):
            return None, f"the current pointer's {which} {quote(name)} is not a version name ({NAME_RULE})"
    return data, ""


def read_small(path: Path, label: str) -> Any:
    """A registry record (`current`, a rubric.json or record.json) through the one bounded JSON reader
    (the bounded JSON reader): refused above MAX_RECORD_BYTES, nested too deeply, holding NaN or not JSON, with a
    JsonFileError (a ValueError) naming `label`. Every caller treats it as an unreadable record."""
    return read_json_file(path, label, max_bytes=MAX_RECORD_BYTES, fix=RECORD_FIX)


def _detail(e: Exception) -> str:
    """What a JsonFileError found (its problem, short), for a reason that has room for one clause."""
    problem = getattr(e, "problem", None)
    return f": {short(problem, 100)}" if isinstance(problem, str) else ""


def quote(value: object, limit: int = 40) -> str:
    """A value read from a file, shown short (it may be anything)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short(e: Exception | str, limit: int = 200) -> str:
    """One line of at most `limit` characters; a loader's "bundle '<path>' refused: " is dropped (the
    reason names the version already, and the path would crowd out what was wrong)."""
    text = " ".join(str(e).split())
    if text.startswith("bundle '") and " refused: " in text:
        text = text.split(" refused: ", 1)[1]
    return text if len(text) <= limit else text[: limit - 3] + "..."
