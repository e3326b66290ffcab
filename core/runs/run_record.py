"""The record of a run trained on the page (run.json), kept beside its bundle so the run outlives the browser
session.

run.json is written last and atomically, so a run directory with a record is complete; it names the bundle, the
owner by the sha256 of the session's token (never the token) and the corpus, whose text is kept beside it so the
Release page can rebuild the held-out split. Everything read back comes from a directory others can write to:
a damaged or foreign record is skipped, never raised, and every path is confined to its run directory. The runs
directory is kept under a size cap by removing the oldest runs that were not released.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.files import read_regular_file, write_bytes_atomic, write_json_atomic
from core.i18n import _
from core.jsonfile import read_json
from core.model.bundle_checks import MANIFEST, BundleError, read_manifest
from core.model.corpus import MAX_BYTES, Corpus, CorpusError, corpus_from_text
from core.numbers import is_int

RECORD = "run.json"
CORPUS_COPY = "corpus.txt"
BUNDLE = "bundle"  # the bundle's folder inside a run directory (runs.JobDir(..., bundle=BUNDLE))
FORMAT = 1
MAX_RECORD_BYTES = 64 * 1024  # a record is a few hundred bytes; anything larger is not ours
MAX_LABEL_CHARS = 500
MAX_RUNS = 10_000  # run directories looked at in one scan
ENV_VAR = "LAB_RUNS_MAX_BYTES"
DEFAULT_MAX_BYTES = 500 * 2**20  # 500 MB
_VERSION = re.compile(r"[0-9A-Za-z_-]{1,64}")  # a bundle version is 16 hex digits; a word at most
_OWNER = re.compile(r"[0-9a-f]{64}")
_SIZE = re.compile(r"(\d+)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}


@dataclass(frozen=True)
class RunRecord:
    run_dir: Path
    bundle_path: Path
    version: str
    label: str
    owner: str  # sha256 hex of the owner session's token, never the token
    created: float  # time.time() when the record was written
    bytes: int  # the run directory's size when the record was written


class HashedOwner(str):
    """An owner already hashed (the sha256 hex): a run's own process has only the hash its job keeps
    (the queue), never the session's token. `owner_hash` passes it through."""


def owner_hash(token: str) -> str:
    """The sha256 hex of a session token: what a record stores as its owner."""
    if isinstance(token, HashedOwner) and _OWNER.fullmatch(token):
        return str(token)
    if not isinstance(token, str) or not token:
        raise ValueError(f"an owner token must be a non-empty string, got {type(token).__name__}")
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def run_label(preset: str, corpus_label: str, iters: int, causal: bool, run_id: str) -> str:
    """How a run trained here is named in the model picker (the page's label and the record's, the same)."""
    unsafe = "" if causal else ", NO causal mask (unsafe)"
    return f"Trained here: {preset} on {corpus_label}, {iters} steps{unsafe} [{run_id[:6]}]"


# ---- writing -------------------------------------------------------------------------------------


def write_record(
    run_dir: str | os.PathLike,
    *,
    bundle_path: str | os.PathLike,
    version: str,
    label: str,
    owner_token: str,
    corpus_text: str | None,
) -> RunRecord:
    """Write corpus.txt (when `corpus_text` is given) and then run.json into `run_dir`, each atomically.

    `bundle_path` must be a bundle inside `run_dir` whose manifest names `version`; the record keeps the
    manifest's corpus name, source and fingerprint so `corpus_of` can rebuild the same documents. ValueError
    (or BundleError for an unreadable manifest) says what was wrong."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir() or run_dir.is_symlink():
        raise ValueError(f"{str(run_dir)!r} is not a run directory")
    bundle = Path(bundle_path)
    relative = _inside(run_dir, bundle)
    if relative is None:
        raise ValueError(f"the bundle {str(bundle)!r} is not inside its run directory {str(run_dir)!r}")
    if not _is_version(version):
        raise ValueError(f"{version!r} is not a version name (letters, digits, '-' or '_', at most 64)")
    if not isinstance(label, str) or not label or len(label) > MAX_LABEL_CHARS:
        raise ValueError(f"a run's label must be 1 to {MAX_LABEL_CHARS} characters")
    if corpus_text is not None and not isinstance(corpus_text, str):
        raise ValueError(f"corpus_text must be a string or None, got {type(corpus_text).__name__}")
    manifest = read_manifest(bundle / MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("version") != version:
        raise ValueError(f"the bundle at {str(bundle)!r} is not version {version}")
    corpus = manifest["corpus"] if isinstance(manifest.get("corpus"), dict) else {}
    source, fingerprint = corpus.get("source"), corpus.get("fingerprint")
    copied = None
    if corpus_text is not None and isinstance(source, str) and isinstance(fingerprint, str):
        # corpus_from_text drops one leading BOM: a text that still starts with one gets it back on reading
        data = (("\ufeff" if corpus_text.startswith("\ufeff") else "") + corpus_text).encode("utf-8")
        if len(data) > MAX_BYTES:
            raise ValueError(f"the training text is {len(data):,} bytes, more than the limit of {MAX_BYTES:,}")
        write_bytes_atomic(run_dir / CORPUS_COPY, data)
        copied = {"name": _corpus_name(source), "source": source, "fingerprint": fingerprint, "file": CORPUS_COPY}
    created = time.time()
    size = _dir_bytes(run_dir)
    write_json_atomic(
        run_dir / RECORD,
        {
            "format": FORMAT,
            "bundle": relative,
            "version": version,
            "label": label,
            "owner": owner_hash(owner_token),
            "created": created,
            "bytes": size,
            "corpus": copied,
        },
    )
    return RunRecord(run_dir, run_dir / relative, version, label, owner_hash(owner_token), created, size)


def keep_run(
    bundle_path: str | os.PathLike, *, preset: str, corpus_label: str, owner_token: str, corpus_text: str | None
) -> RunRecord:
    """The record of the run whose bundle was just saved (and tuned) at `bundle_path`, in its parent run
    directory: version, steps and mask read from the bundle's manifest, the label `run_label` gives."""
    bundle = Path(bundle_path)
    manifest = read_manifest(bundle / MANIFEST)
    try:
        iters, causal = manifest["training"]["metrics"]["iters"], manifest["architecture"]["causal"]
        version = manifest["version"]
    except (KeyError, TypeError):
        raise BundleError(f"{str(bundle)!r} has no training record in its {MANIFEST}") from None
    label = run_label(preset, corpus_label, iters, causal, bundle.parent.name)
    return write_record(
        bundle.parent,
        bundle_path=bundle,
        version=version,
        label=label,
        owner_token=owner_token,
        corpus_text=corpus_text,
    )


# ---- reading -------------------------------------------------------------------------------------


def read_records(runs_dir: str | os.PathLike) -> list[RunRecord]:
    """Every valid record under `runs_dir`, oldest first; anything damaged, foreign or escaping is skipped."""
    root = Path(runs_dir)
    try:
        if not root.is_dir():
            return []
        children = sorted(p for _, p in zip(range(MAX_RUNS), root.iterdir()))
    except OSError:
        return []
    records = [r for r in (_read(child)[0] for child in children) if r is not None]
    return sorted(records, key=lambda r: (r.created, r.run_dir.name))


def find(runs_dir: str | os.PathLike, version: str) -> RunRecord | None:
    """The newest record of `version` (checked to be a version-like word first), or None."""
    if not _is_version(version):
        return None
    matches = [r for r in read_records(runs_dir) if r.version == version]
    return matches[-1] if matches else None


def owned_by(runs_dir: str | os.PathLike, token: str) -> list[RunRecord]:
    """The records whose owner is the session holding `token`, oldest first."""
    try:
        owner = owner_hash(token)
    except ValueError:
        return []
    return [r for r in read_records(runs_dir) if hmac.compare_digest(r.owner, owner)]


def for_bundle(runs_dir: str | os.PathLike, bundle_path: str | os.PathLike) -> RunRecord | None:
    """The record of the run whose bundle is at `bundle_path`, when that is a run directly under `runs_dir`."""
    bundle = Path(bundle_path)
    run_dir = bundle.parent
    try:
        if run_dir.is_symlink() or run_dir.resolve().parent != Path(runs_dir).resolve():
            return None
        record = _read(run_dir)[0]
        if record is None or record.bundle_path.resolve() != bundle.resolve():
            return None
    except OSError:
        return None
    return record


def corpus_of(record: RunRecord) -> Corpus | None:
    """The run's training corpus rebuilt from its copy (same names, source and fingerprint as training used,
    so the same held-out split), or None when there is no copy or it does not match the record."""
    try:
        _, raw = _read(record.run_dir)
        if raw is None or raw.get("version") != record.version or not isinstance(raw.get("corpus"), dict):
            return None
        kept = raw["corpus"]
        name, source, fingerprint = kept.get("name"), kept.get("source"), kept.get("fingerprint")
        if not (isinstance(name, str) and name and isinstance(source, str) and isinstance(fingerprint, str)):
            return None
        if kept.get("file") != CORPUS_COPY:
            return None
        data = read_regular_file(record.run_dir / CORPUS_COPY, MAX_BYTES)
        if data is None:
            return None
        corpus = corpus_from_text(name, data, source=source)
    except (OSError, CorpusError):
        return None
    return corpus if corpus.fingerprint == fingerprint else None


# ---- the cap -------------------------------------------------------------------------------------


def max_bytes_from_env(environ: dict[str, str] | None = None) -> int:
    """The runs directory's cap: LAB_RUNS_MAX_BYTES (bytes, or with a K, M or G suffix: "500M"), default 500 MB.
    ValueError with a message for anything else."""
    value = (os.environ if environ is None else environ).get(ENV_VAR)
    if value is None or not value.strip():
        return DEFAULT_MAX_BYTES
    m = _SIZE.fullmatch(value.strip())
    if m is None or int(m.group(1)) <= 0:
        raise ValueError(
            _(
                "{setting} is not a size: give a positive number of bytes, or one with a K, M or G suffix (for example "
                "500M); unset it for the default of {size} MB"
            ).format(setting=f"{ENV_VAR}={value[:40]!r}", size=DEFAULT_MAX_BYTES // 2**20)
        )
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def enforce_cap(runs_dir: str | os.PathLike, max_bytes: int, keep_versions: set[str]) -> list[RunRecord]:
    """While the runs directory holds more than `max_bytes`, remove the oldest recorded run whose version is
    not in `keep_versions` (the released ones) and that is not being written (a staged file in it); return the
    removed records, oldest first. Runs without a record (still training, or not the page's) are never removed."""
    if not is_int(max_bytes) or max_bytes < 0:
        raise ValueError(f"max_bytes must be a non-negative int, got {max_bytes!r}")
    root = Path(runs_dir)
    total = _dir_bytes(root)
    removed: list[RunRecord] = []
    for record in read_records(root):
        if total <= max_bytes:
            break
        if record.version in keep_versions or _busy(record.run_dir):
            continue
        size = _dir_bytes(record.run_dir)
        if _remove(root, record.run_dir):
            total -= size
            removed.append(record)
    return removed


# ---- helpers -------------------------------------------------------------------------------------


def _is_version(version: object) -> bool:
    return isinstance(version, str) and _VERSION.fullmatch(version) is not None


def _corpus_name(source: str) -> str:
    """The name corpus_from_text was given: the upload's name, or a file's (load_corpus uses path.name)."""
    return source.removeprefix("upload:") if source.startswith("upload:") else Path(source).name or source


def _inside(run_dir: Path, path: Path) -> str | None:
    """`path` relative to `run_dir` when it resolves strictly inside it (no symlink on the way out), else None."""
    try:
        root, target = run_dir.resolve(), path.resolve()
    except OSError:
        return None
    if target == root or not target.is_relative_to(root):
        return None
    return target.relative_to(root).as_posix()


def _read(run_dir: Path) -> tuple[RunRecord | None, dict[str, Any] | None]:
    """(the record, its raw JSON) of one run directory, or (None, None) for anything not a valid record."""
    try:
        if run_dir.is_symlink() or not run_dir.is_dir():
            return None, None
        data = read_regular_file(run_dir / RECORD, MAX_RECORD_BYTES)
        raw = read_json(data, RECORD, max_bytes=MAX_RECORD_BYTES) if data is not None else None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None, None
    record = _parse(run_dir, raw)
    return (record, raw) if record is not None else (None, None)


def _parse(run_dir: Path, raw: Any) -> RunRecord | None:
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        return None
    bundle, version, label = raw.get("bundle"), raw.get("version"), raw.get("label")
    owner, created, size = raw.get("owner"), raw.get("created"), raw.get("bytes")
    if not isinstance(bundle, str) or not bundle or bundle.startswith("/") or "\\" in bundle or "\0" in bundle:
        return None
    if not isinstance(version, str) or not _is_version(version):
        return None
    if not isinstance(label, str) or not 0 < len(label) <= MAX_LABEL_CHARS:
        return None
    if not isinstance(owner, str) or _OWNER.fullmatch(owner) is None:
        return None
    if isinstance(created, bool) or not isinstance(created, (int, float)) or not math.isfinite(created):
        return None
    if not is_int(size) or size < 0:
        return None
    if any(part.startswith(".") and part.endswith(".tmp") for part in bundle.split("/")):
        return None  # a staged save (core.files), half-written or left by a killed run: never listed as a bundle
    if _inside(run_dir, run_dir / bundle) is None or not (run_dir / bundle).is_dir():
        return None
    return RunRecord(run_dir, run_dir / bundle, version, label, owner, float(created), size)


def _dir_bytes(path: Path) -> int:
    """Bytes of the regular files under `path` (symbolic links not followed, unreadable entries skipped)."""
    total = 0
    for top, _dirs, files in os.walk(path, followlinks=False):
        for name in files:
            try:
                st = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


def _busy(run_dir: Path) -> bool:
    """A staged entry (".name.xxxx.tmp": an atomic write, write_record) in the run or its bundle: being written."""
    for _top, dirs, files in os.walk(run_dir, followlinks=False):
        if any(n.startswith(".") and n.endswith(".tmp") for n in (*dirs, *files)):
            return True
    return False


def _remove(root: Path, run_dir: Path) -> bool:
    """shutil.rmtree of a run directory directly under `root` (never a symlink, never anything outside)."""
    try:
        if run_dir.is_symlink() or run_dir.resolve().parent != root.resolve():
            return False
        shutil.rmtree(run_dir, onerror=_ignore_missing)
    except OSError:
        return False
    return not run_dir.exists()


def _ignore_missing(function, path, exc_info) -> None:
    if not issubclass(exc_info[0], FileNotFoundError):  # another remover got there first
        raise exc_info[1]
