"""Baseline bundles: a rule or n-gram predictor stored with the transformer's manifest shape, and loaded back.

Counts are plain JSON whose sha256 the manifest lists, saved staged and renamed into place: no pickle anywhere.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.files import install_dir, staged_dir
from core.jsonfile import read_json_file
from core.model.bundle import (
    FORMAT_VERSION,
    SUPPORTED_FORMAT_VERSIONS,
    Bundle,
    load_bundle,
    manifest_version,
    verify_bundle,
    write_manifest,
)
from core.model.bundle_checks import MANIFEST, BundleError, entry_problems, file_sha256, read_manifest
from core.model.corpus import Corpus, split_documents
from core.model.tokenizer import CharTokenizer
from core.numbers import is_int
from core.release.baselines.counts import DEFAULT_ADD_K, key_alphabet
from core.release.baselines.ngram import DEFAULT_ORDER, NGramModel, train_ngram
from core.release.baselines.rule import MAX_WORD_CHARS, RuleModel, train_rule
from core.release.serving.policy import MAX_CHARS, SuggestionPolicy
from core.release.serving.predictor import is_word_char

COUNTS = "counts.json"
# A 5-gram table of the stdlib corpus is tens of MB of JSON; 256 MiB bounds what a loader reads at all.
MAX_COUNTS_BYTES = 256 << 20
KINDS = ("ngram", "rule")
Baseline = NGramModel | RuleModel


@dataclass(frozen=True)
class BaselineBundle:
    """A loaded baseline bundle: the predictor (an NGramModel or a RuleModel), its manifest and path."""

    predictor: Baseline
    manifest: dict
    path: Path

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def version(self) -> str:
        return self.manifest["version"]

    @property
    def tokenizer(self) -> CharTokenizer:
        return self.predictor.tokenizer


def train_baseline(
    kind: str,
    corpus: Corpus,
    *,
    val_fraction: float = 0.1,
    seed: int = 0,
    tokenizer: CharTokenizer | None = None,
    order: int = DEFAULT_ORDER,
    add_k: float = DEFAULT_ADD_K,
) -> Baseline:
    """A baseline trained on the training documents of split_documents(corpus, val_fraction, seed).

    The tokenizer defaults to the one training builds (every character of the whole corpus)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    tokenizer = CharTokenizer.from_text(corpus.text) if tokenizer is None else tokenizer
    train_docs, _ = split_documents(corpus, val_fraction, seed)
    if kind == "ngram":
        return train_ngram(train_docs, tokenizer, order=order, add_k=add_k)
    return train_rule(train_docs, tokenizer, add_k=add_k)


def save_baseline(
    out_dir: str | os.PathLike,
    predictor: Baseline,
    *,
    corpus: Corpus,
    val_fraction: float,
    seed: int,
    command: Sequence[str] = (),
    suggestion: SuggestionPolicy | None = None,
) -> Path:
    """Write a baseline bundle atomically (staged, loaded back, installed) and return its path.

    `suggestion` (its tuned threshold) is recorded as generation["suggestion"]; without
    it the bundle serves at the untuned default. An existing bundle at out_dir is replaced; any other non-empty
    directory is refused."""
    architecture: dict[str, object]
    counts: dict[str, object]
    metrics: dict[str, int]
    if isinstance(predictor, NGramModel):
        architecture = {
            "family": "ngram",
            "order": predictor.order,
            "add_k": predictor.add_k,
            "smoothing": "interpolated Witten-Bell, add-k unigram",
        }
        counts = {"ngrams": predictor.ngrams}
        metrics = {
            "train_tokens": sum(predictor.ngrams[0].values()),
            "distinct_ngrams": sum(len(table) for table in predictor.ngrams),
        }
        keep = max(1, predictor.order - 1)
    elif isinstance(predictor, RuleModel):
        architecture = {
            "family": "rule",
            "add_k": predictor.add_k,
            "max_word_chars": MAX_WORD_CHARS,
            "rule": "complete the most frequent training word extending the word being typed",
        }
        counts = {"words": predictor.words, "unigram": predictor.unigram_counts}
        metrics = {"train_tokens": sum(predictor.unigram_counts.values()), "distinct_words": len(predictor.words)}
        keep = MAX_WORD_CHARS
    else:
        raise BundleError(f"save_baseline needs an NGramModel or a RuleModel, got {type(predictor).__name__}")
    tok = predictor.tokenizer
    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": predictor.kind,
        "version": "",
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "tokenizer": {**tok.to_dict(), "content_hash": tok.content_hash},
        "architecture": architecture,
        "corpus": {"fingerprint": corpus.fingerprint, "source": corpus.source},
        "training": {
            "command": [str(a) for a in command],
            "metrics": metrics,
            "config": {"val_fraction": val_fraction, "seed": seed},
        },
        "safe": True,
        "unsafe_reason": None,
        "prompt_template": "{prompt}",
        "generation": {
            "temperature": 0.0,
            "top_k": None,
            "top_p": None,
            "max_new_tokens": MAX_CHARS,
            "use_cache": False,
            "keep": keep,
            **({"suggestion": suggestion.to_dict()} if suggestion is not None else {}),
        },
        "files": {},
    }
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST).is_file())):
        raise BundleError(f"{str(out)!r} exists and is not a bundle directory; choose another --out")
    with staged_dir(out) as staged:
        with open(staged / COUNTS, "w", encoding="ascii") as f:
            json.dump(
                {"format": f"attention-lab/{predictor.kind}-counts", **counts},
                f,
                sort_keys=True,
                ensure_ascii=True,
                separators=(",", ":"),
            )
        manifest["files"] = {COUNTS: file_sha256(staged / COUNTS)}
        manifest["version"] = manifest_version(manifest)
        write_manifest(staged, manifest)
        load_baseline(staged)  # never install a bundle the loader would refuse
        install_dir(staged, out, overwrite=True, error=BundleError)
    return out


def load_baseline(path: str | os.PathLike) -> BaselineBundle:
    """Verify and load an "ngram" or "rule" bundle; raises BundleError naming what failed."""
    problems, loaded = _inspect_baseline(Path(path))
    if problems or loaded is None:
        raise BundleError(f"bundle {str(path)!r} refused: " + "; ".join(problems))
    return loaded


def verify_baseline(path: str | os.PathLike) -> list[str]:
    """Every problem of a baseline bundle (empty: it loads)."""
    return _inspect_baseline(Path(path))[0]


def read_kind(path: str | os.PathLike) -> str:
    """The `kind` a bundle directory's manifest declares; raises BundleError if it has none."""
    if not Path(path).is_dir():
        raise BundleError(f"{str(path)!r} is not a directory (missing bundle)")  # as load_bundle says it
    try:
        kind = read_manifest(Path(path) / MANIFEST).get("kind")
    except BundleError as e:  # too large, too deep, NaN or not JSON (core.jsonfile): it names file and field
        raise BundleError(f"{str(path)!r}: {e}") from None
    except (OSError, AttributeError) as e:
        raise BundleError(f"{str(path)!r} has no readable {MANIFEST} ({type(e).__name__}: {e})") from None
    if not isinstance(kind, str):
        raise BundleError(f"{str(path)!r}: {MANIFEST} has no 'kind'")
    return kind


def load_any(path: str | os.PathLike) -> Bundle | BaselineBundle:
    """Load a bundle of any kind: a transformer `Bundle` for "transformer", a BaselineBundle otherwise."""
    return load_baseline(path) if read_kind(path) in KINDS else load_bundle(path)


def verify_any(path: str | os.PathLike) -> list[str]:
    """verify_bundle or verify_baseline, whichever the manifest's kind calls for."""
    try:
        kind = read_kind(path)
    except BundleError as e:
        return [str(e)]
    return verify_baseline(path) if kind in KINDS else verify_bundle(path)


_BASELINE_FIELDS = {
    "format_version": int,
    "kind": str,
    "version": str,
    "created": str,
    "tokenizer": dict,
    "architecture": dict,
    "corpus": dict,
    "training": dict,
    "safe": bool,
    "generation": dict,
    "files": dict,
    "prompt_template": str,
}


def _inspect_baseline(path: Path) -> tuple[list[str], BaselineBundle | None]:
    try:
        return _inspect_baseline_files(path)
    except BundleError as e:
        return [str(e)], None
    except OSError as e:  # a file that cannot be read (permissions, I/O) is a refusal, not a crash
        return [f"{str(path)!r} could not be read ({type(e).__name__}: {e})"], None


def _inspect_baseline_files(path: Path) -> tuple[list[str], BaselineBundle | None]:
    if path.is_dir():
        problems = entry_problems(path)  # symbolic links, and no endless listing
        if problems:
            return problems, None
    if not (path / MANIFEST).is_file():
        return [f"{MANIFEST} is missing" if path.is_dir() else f"{str(path)!r} is not a directory"], None
    manifest = read_manifest(path / MANIFEST)  # a BundleError naming file and field (core.jsonfile)
    if not isinstance(manifest, dict):
        return [f"{MANIFEST} must hold a JSON object"], None
    problems = [
        f"{MANIFEST}: field {k!r} is missing or not {t.__name__}"
        for k, t in _BASELINE_FIELDS.items()
        if not (is_int(manifest.get(k)) if t is int else isinstance(manifest.get(k), t))
    ]
    if problems:
        return problems, None
    if manifest["format_version"] not in SUPPORTED_FORMAT_VERSIONS:
        return [f"{MANIFEST}: format_version {manifest['format_version']} is not supported"], None
    if manifest["kind"] not in KINDS:
        return [f"{MANIFEST}: kind {manifest['kind']!r} is not a baseline kind {KINDS}"], None
    files = manifest["files"]
    if set(files) != {COUNTS}:
        return [f"{MANIFEST}: files must list exactly {COUNTS!r}, got {sorted(files)}"], None
    if not (path / COUNTS).is_file():
        return [f"{COUNTS} is missing"], None
    if file_sha256(path / COUNTS) != files[COUNTS]:
        return [f"{COUNTS}: sha256 mismatch (the file was changed or truncated)"], None
    extra = sorted(p.name for p in path.iterdir() if p.name not in (MANIFEST, COUNTS))
    if extra:
        return [f"unexpected file {name!r} is not listed in {MANIFEST}" for name in extra], None
    if manifest_version(manifest) != manifest["version"]:
        return [
            f"{MANIFEST}: version {manifest['version']!r} does not match its content "
            f"({manifest_version(manifest)!r}); the manifest was edited after it was written"
        ], None
    try:
        tokenizer = CharTokenizer.from_dict({k: v for k, v in manifest["tokenizer"].items() if k != "content_hash"})
        if tokenizer.content_hash != manifest["tokenizer"].get("content_hash"):
            return [f"{MANIFEST}: tokenizer.content_hash does not match its vocabulary"], None
        counts = read_json_file(path / COUNTS, COUNTS, max_bytes=MAX_COUNTS_BYTES)
        arch = manifest["architecture"]
        predictor = _predictor_from_counts(manifest["kind"], tokenizer, counts, arch)
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
        return [f"{COUNTS} or {MANIFEST} describe an invalid {manifest['kind']} model ({type(e).__name__}: {e})"], None
    return [], BaselineBundle(predictor, manifest, path)


def _predictor_from_counts(kind: str, tokenizer: CharTokenizer, counts: dict, arch: dict) -> Baseline:
    if counts.get("format") != f"attention-lab/{kind}-counts":
        raise ValueError(f"counts format must be 'attention-lab/{kind}-counts', got {counts.get('format')!r}")
    alphabet = set(key_alphabet(tokenizer))

    def checked(table: dict, length: int | None, what: str) -> dict[str, int]:
        if not isinstance(table, dict):
            raise ValueError(f"{what} must be an object of counts")
        for key, c in table.items():
            if (length is not None and len(key) != length) or not set(key) <= alphabet:
                raise ValueError(f"{what}: key {key!r} is not a {length or 'n'}-token key of this vocabulary")
            if not is_int(c) or c < 1:
                raise ValueError(f"{what}: count of {key!r} must be a positive integer, got {c!r}")
        return table

    if kind == "ngram":
        ngrams = counts["ngrams"]
        if not isinstance(ngrams, list) or len(ngrams) != arch.get("order"):
            raise ValueError(f"ngrams must be a list of architecture.order={arch.get('order')} tables")
        return NGramModel(
            tokenizer, [checked(t, m + 1, f"ngrams[{m}]") for m, t in enumerate(ngrams)], add_k=arch["add_k"]
        )
    words = checked(counts["words"], None, "words")
    if any(not all(is_word_char(c) for c in w) or not w for w in words):
        raise ValueError("words must be non-empty runs of word characters")
    return RuleModel(tokenizer, words, checked(counts["unigram"], 1, "unigram"), add_k=arch["add_k"])
