"""The named fallbacks: a rule and an n-gram character model, behind the interface every model is
evaluated through.

The predictor interface (`Predictor`), shared by these baselines and the transformer
(`core.release.evaluation.TransformerPredictor`), works on token ids of the model's CharTokenizer, so every
predictor is scored over the same events (the corpus characters plus <eos> at each document end):

    log_probs(ids, positions) -> (P, V) float64   row p holds log P(next | ids[:t]) for t = positions[p],
                                                   1 <= t <= len(ids); every row is a proper distribution
    suggest(ids, max_chars)   -> list[int]         the completion offered after ids: word characters
                                                   only, so it ends at the next word boundary

A *word character* is a letter, a digit or "_" (`is_word_char`). The generic suggestion is greedy:
append the most likely next token (ties: the lowest id) while it is a word character, at most
`max_chars` of them (`greedy_completion`).

The two baselines, trained on the training documents of the same split as the transformer:

* `NGramModel` (kind "ngram"): interpolated Witten-Bell smoothing over contexts of 0..order-1 tokens,
  with add-k at the bottom, so every probability is positive and each row sums to one:

      P_0(w)   = (c(w) + k) / (N + k V)                              unigram, add-k over all V ids
      P_m(w|h) = (c(h w) + T(h) P_{m-1}(w|h')) / (c(h) + T(h))       h = the last m tokens, h' = last m-1
               = P_{m-1}(w|h')                                       when h was never seen

  c(h) counts the occurrences of h with a following token, T(h) the distinct tokens that followed it.
* `RuleModel` (kind "rule"): word completion from a dictionary of training words. With w the word
  being typed (the run of word characters just before the cursor), it suggests the rest of the most
  frequent training word that extends w (ties: the alphabetically first); before the first character
  of a word it suggests nothing. Its next-character distribution mixes the words' next letters with the
  add-k unigram ("the most frequent next character"):

      P(c|w) = lam n(w, c) / n(w) + (1 - lam) P_0(c),    lam = n(w) / (n(w) + e(w) + 1)

  n(w, c) = occurrences of training words that start with w + c, n(w) = their sum, e(w) = occurrences
  of w as a whole word (the word may end here). With no word being typed, or none extending w, P = P_0.

Both are stored as bundles (`save_baseline`, `load_baseline`) with the transformer's manifest shape:
kind "ngram" or "rule", the tokenizer, the corpus fingerprint, the split in training.config, and the
counts in `counts.json`, whose sha256 the manifest lists. Count keys are text: each token is written
as its character, the special tokens as the private-use characters U+E000 + id. No pickle anywhere.
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from core.model.bundle import (
    FORMAT_VERSION,
    MANIFEST,
    SUPPORTED_FORMAT_VERSIONS,
    BundleError,
    entry_problems,
    file_sha256,
    manifest_version,
    read_manifest_text,
    write_manifest,
)
from core.model.corpus import Corpus, Document, split_documents
from core.model.tokenizer import SPECIAL_TOKENS, CharTokenizer
from core.model.training import document_stream

COUNTS = "counts.json"
KINDS = ("ngram", "rule")
SPECIAL_BASE = 0xE000  # special token id i is written as chr(SPECIAL_BASE + i) in count keys
DEFAULT_ORDER = 5
DEFAULT_ADD_K = 0.5
MAX_WORD_CHARS = 40  # the rule looks at most this far back for the word being typed
SUGGESTION_MAX_CHARS = 16  # longest suggestion (a longer word is offered in part)


def is_word_char(c: str) -> bool:
    """Letters, digits and "_": the characters a suggestion may contain."""
    return c == "_" or c.isalnum()


class Predictor(Protocol):
    """What the evaluation needs from a model (see the module docstring)."""

    kind: str
    tokenizer: CharTokenizer

    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor: ...

    def suggest(self, ids: Sequence[int], max_chars: int = SUGGESTION_MAX_CHARS) -> list[int]: ...


def word_ids(tokenizer: CharTokenizer) -> frozenset[int]:
    """Ids of the vocabulary's word characters."""
    n = len(SPECIAL_TOKENS)
    return frozenset(i + n for i, c in enumerate(tokenizer.chars) if is_word_char(c))


def greedy_completion(predictor: Predictor, ids: Sequence[int], max_chars: int = SUGGESTION_MAX_CHARS) -> list[int]:
    """The generic suggestion: argmax tokens (lowest id on ties) while they are word characters."""
    words = word_ids(predictor.tokenizer)
    context, out = list(ids), []
    for _ in range(max_chars):
        row = predictor.log_probs(context, range(len(context), len(context) + 1))[0]  # (V,)
        token = int(row.argmax())
        if token not in words:
            break
        out.append(token)
        context.append(token)
    return out


def check_positions(ids: Sequence[int], positions: range) -> None:
    if not isinstance(positions, range) or positions.step != 1:
        raise ValueError(f"positions must be a range with step 1, got {positions!r}")
    if len(positions) and (positions.start < 1 or positions.stop > len(ids) + 1):
        raise ValueError(
            f"positions must lie in 1..len(ids)={len(ids)} (a prediction needs a context), "
            f"got {positions.start}..{positions.stop - 1}"
        )


class _Keyed:
    """Shared by both baselines: the token <-> key-character mapping and the add-k unigram."""

    kind = ""

    def __init__(self, tokenizer: CharTokenizer, unigram: dict[str, int], add_k: float):
        if not (isinstance(add_k, (int, float)) and math.isfinite(add_k) and add_k > 0):
            raise ValueError(f"add_k must be a finite number > 0, got {add_k!r}")
        self.tokenizer, self.add_k = tokenizer, float(add_k)
        self.V = tokenizer.vocab_size
        self.key_chars = key_alphabet(tokenizer)  # id -> key character
        self.key_id = {c: i for i, c in enumerate(self.key_chars)}
        self.word_id_set = word_ids(tokenizer)
        counts = np.zeros(self.V)  # (V,)
        for key, c in unigram.items():
            counts[self.key_id[key]] = c
        self.unigram_counts = unigram
        self.p0 = (counts + self.add_k) / (counts.sum() + self.add_k * self.V)  # (V,) sums to 1

    def text(self, ids: Sequence[int]) -> str:
        return "".join(self.key_chars[i] for i in ids)


def key_alphabet(tokenizer: CharTokenizer) -> tuple[str, ...]:
    """id -> the character a count key writes it as: specials as U+E000 + id, the rest as themselves."""
    specials = tuple(chr(SPECIAL_BASE + i) for i in range(len(SPECIAL_TOKENS)))
    clash = sorted(set(specials) & set(tokenizer.chars))
    if clash:
        raise ValueError(
            f"the corpus uses the private-use characters {clash!r}, which baseline count files "
            f"reserve for special tokens; remove them from the corpus"
        )
    return specials + tokenizer.chars


# ---- the n-gram model ----------------------------------------------------------------------------


class NGramModel(_Keyed):
    kind = "ngram"

    def __init__(self, tokenizer: CharTokenizer, ngrams: list[dict[str, int]], *, add_k: float = DEFAULT_ADD_K):
        """`ngrams[m]` maps each (m+1)-token key string to its count in the training stream."""
        if not ngrams:
            raise ValueError("an n-gram model needs at least the unigram counts (order >= 1)")
        super().__init__(tokenizer, ngrams[0], add_k)
        self.order = len(ngrams)
        self.ngrams = ngrams
        # contexts[m]: key of an m-token context -> (next ids, their counts, c(h), T(h))
        self.contexts: list[dict[str, tuple[np.ndarray, np.ndarray, float, int]]] = [{}]
        for m in range(1, self.order):
            grouped: dict[str, list[tuple[int, int]]] = {}
            for gram, c in ngrams[m].items():
                grouped.setdefault(gram[:-1], []).append((self.key_id[gram[-1]], c))
            self.contexts.append(
                {
                    h: (
                        np.array([i for i, _ in nxt]),
                        np.array([c for _, c in nxt], dtype=float),
                        float(sum(c for _, c in nxt)),
                        len(nxt),
                    )
                    for h, nxt in grouped.items()
                }
            )

    def distribution(self, context: str) -> np.ndarray:
        """P(next | context) over all V ids, (V,) float64; `context` is a key string."""
        p = self.p0.copy()  # (V,)
        for m in range(1, self.order):
            if len(context) < m:
                break
            entry = self.contexts[m].get(context[-m:])
            if entry is None:  # a context never seen has no longer seen context either
                break
            ids, counts, total, types = entry
            p *= types
            p[ids] += counts
            p /= total + types
        return p

    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor:
        check_positions(ids, positions)
        n = self.order - 1  # context tokens used
        start = max(0, positions.start - n)
        key = self.text(ids[start : positions.stop - 1])  # every context the rows need, as one key string
        rows = [self.distribution(key[max(0, t - n) - start : t - start]) for t in positions]  # P x (V,)
        return _stack_log(rows, self.V)

    def suggest(self, ids: Sequence[int], max_chars: int = SUGGESTION_MAX_CHARS) -> list[int]:
        if not ids:
            return []
        return greedy_completion(self, list(ids[-max(1, self.order - 1) :]), max_chars)


def train_ngram(
    documents: Sequence[Document], tokenizer: CharTokenizer, *, order: int = DEFAULT_ORDER, add_k: float = DEFAULT_ADD_K
) -> NGramModel:
    """Count every 1..order-gram of the documents' token stream (documents joined by <eos>)."""
    if not isinstance(order, int) or isinstance(order, bool) or not 1 <= order <= 12:
        raise ValueError(f"order must be an integer in 1..12, got {order!r}")
    keys = key_alphabet(tokenizer)
    s = "".join(keys[i] for i in document_stream(documents, tokenizer).tolist())
    ngrams = [dict(Counter(s[i : i + m + 1] for i in range(len(s) - m))) for m in range(order)]
    return NGramModel(tokenizer, ngrams, add_k=add_k)


# ---- the rule ------------------------------------------------------------------------------------


class RuleModel(_Keyed):
    kind = "rule"

    def __init__(
        self, tokenizer: CharTokenizer, words: dict[str, int], unigram: dict[str, int], *, add_k: float = DEFAULT_ADD_K
    ):
        super().__init__(tokenizer, unigram, add_k)
        self.words = words
        self.next_counts: dict[str, Counter] = {}  # prefix -> Counter(next id) over word occurrences
        self.ends: Counter = Counter()  # word -> occurrences as a whole word
        best: dict[str, tuple[int, str]] = {}  # prefix -> (count, word) of the most frequent extension
        for word, c in words.items():
            self.ends[word] += c
            for i in range(len(word)):
                prefix = word[:i]
                self.next_counts.setdefault(prefix, Counter())[self.key_id[word[i]]] += c
                if prefix not in best or (c, _neg(word)) > (best[prefix][0], _neg(best[prefix][1])):
                    best[prefix] = (c, word)
        self.best = {prefix: word for prefix, (_, word) in best.items()}

    def current_word(self, ids: Sequence[int]) -> str:
        """The run of word characters just before the cursor (at most MAX_WORD_CHARS of them)."""
        tail = list(ids[-MAX_WORD_CHARS:])
        n = 0
        while n < len(tail) and tail[len(tail) - 1 - n] in self.word_id_set:
            n += 1
        return self.text(tail[len(tail) - n :])

    def distribution(self, word: str) -> np.ndarray:
        """P(next | the word being typed) over all V ids, (V,) float64."""
        nxt = self.next_counts.get(word) if word else None
        if not nxt:
            return self.p0.copy()
        n = sum(nxt.values())
        lam = n / (n + self.ends.get(word, 0) + 1)
        p = (1.0 - lam) * self.p0  # (V,)
        for i, c in nxt.items():
            p[i] += lam * c / n
        return p

    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor:
        check_positions(ids, positions)
        rows = [self.distribution(self.current_word(ids[max(0, t - MAX_WORD_CHARS) : t])) for t in positions]
        return _stack_log(rows, self.V)

    def suggest(self, ids: Sequence[int], max_chars: int = SUGGESTION_MAX_CHARS) -> list[int]:
        word = self.current_word(ids)
        if not word or word not in self.best:
            return []
        rest = self.best[word][len(word) :][:max_chars]
        return [self.key_id[c] for c in rest]


def _stack_log(rows: list[np.ndarray], V: int) -> Tensor:
    if not rows:
        return torch.empty(0, V, dtype=torch.float64)
    return torch.from_numpy(np.log(np.stack(rows)))  # (P, V)


def _neg(word: str) -> tuple[int, ...]:
    """An ordering key under which the alphabetically first word is the largest."""
    return tuple(-ord(c) for c in word) + (0,)


def train_rule(documents: Sequence[Document], tokenizer: CharTokenizer, *, add_k: float = DEFAULT_ADD_K) -> RuleModel:
    """Count the training words (runs of word characters) and the token unigram."""
    keys = key_alphabet(tokenizer)
    stream = document_stream(documents, tokenizer).tolist()
    unigram = dict(Counter(keys[i] for i in stream))
    words: Counter = Counter()
    for doc in documents:
        for is_word, run in itertools.groupby(doc.text, key=is_word_char):
            if is_word:
                words["".join(run)] += 1
    known = set(tokenizer.chars)
    words = Counter({w: c for w, c in words.items() if set(w) <= known})  # a word with <unk> cannot be typed back
    return RuleModel(tokenizer, dict(words), unigram, add_k=add_k)


# ---- baseline bundles ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineBundle:
    """A loaded baseline bundle: the model behind the predictor interface, its manifest and path."""

    model: NGramModel | RuleModel
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
        return self.model.tokenizer


def train_baseline(
    kind: str,
    corpus: Corpus,
    *,
    val_fraction: float = 0.1,
    seed: int = 0,
    tokenizer: CharTokenizer | None = None,
    order: int = DEFAULT_ORDER,
    add_k: float = DEFAULT_ADD_K,
) -> NGramModel | RuleModel:
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
    model: NGramModel | RuleModel,
    *,
    corpus: Corpus,
    val_fraction: float,
    seed: int,
    command: Sequence[str] = (),
) -> Path:
    """Write a baseline bundle atomically (temp sibling, loaded back, renamed) and return its path.

    An existing bundle at out_dir is replaced; any other non-empty directory is refused."""
    if not isinstance(model, (NGramModel, RuleModel)):
        raise BundleError(f"save_baseline needs an NGramModel or a RuleModel, got {type(model).__name__}")
    if model.kind == "ngram":
        architecture = {
            "family": "ngram",
            "order": model.order,
            "add_k": model.add_k,
            "smoothing": "interpolated Witten-Bell, add-k unigram",
        }
        counts = {"ngrams": model.ngrams}
        metrics = {"train_tokens": sum(model.ngrams[0].values()), "distinct_ngrams": sum(map(len, model.ngrams))}
    else:
        architecture = {
            "family": "rule",
            "add_k": model.add_k,
            "max_word_chars": MAX_WORD_CHARS,
            "rule": "complete the most frequent training word extending the word being typed",
        }
        counts = {"words": model.words, "unigram": model.unigram_counts}
        metrics = {"train_tokens": sum(model.unigram_counts.values()), "distinct_words": len(model.words)}
    tok = model.tokenizer
    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": model.kind,
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
            "max_new_tokens": SUGGESTION_MAX_CHARS,
            "use_cache": False,
            "keep": max(1, model.order - 1) if model.kind == "ngram" else MAX_WORD_CHARS,
        },
        "files": {},
    }
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST).is_file())):
        raise BundleError(f"{str(out)!r} exists and is not a bundle directory; choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        with open(tmp / COUNTS, "w", encoding="ascii") as f:
            json.dump(
                {"format": f"attention-lab/{model.kind}-counts", **counts},
                f,
                sort_keys=True,
                ensure_ascii=True,
                separators=(",", ":"),
            )
        manifest["files"] = {COUNTS: file_sha256(tmp / COUNTS)}
        manifest["version"] = manifest_version(manifest)
        write_manifest(tmp, manifest)
        load_baseline(tmp)  # never install a bundle the loader would refuse
        os.chmod(tmp, 0o755)
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def load_baseline(path: str | os.PathLike) -> BaselineBundle:
    """Verify and load an "ngram" or "rule" bundle; raises BundleError naming what failed."""
    problems, loaded = _inspect_baseline(Path(path))
    if problems:
        raise BundleError(f"bundle {str(path)!r} refused: " + "; ".join(problems))
    return loaded


def verify_baseline(path: str | os.PathLike) -> list[str]:
    """Every problem of a baseline bundle (empty: it loads)."""
    return _inspect_baseline(Path(path))[0]


def read_kind(path: str | os.PathLike) -> str:
    """The `kind` a bundle directory's manifest declares; raises BundleError if it has none."""
    try:
        kind = json.loads(read_manifest_text(Path(path) / MANIFEST)).get("kind")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as e:
        raise BundleError(f"{str(path)!r} has no readable {MANIFEST} ({type(e).__name__}: {e})") from None
    if not isinstance(kind, str):
        raise BundleError(f"{str(path)!r}: {MANIFEST} has no 'kind'")
    return kind


def load_any(path: str | os.PathLike):
    """Load a bundle of any kind: a core.model.bundle.Bundle for "transformer", a BaselineBundle otherwise."""
    from core.model.bundle import load_bundle

    return load_baseline(path) if read_kind(path) in KINDS else load_bundle(path)


def verify_any(path: str | os.PathLike) -> list[str]:
    """verify_bundle or verify_baseline, whichever the manifest's kind calls for."""
    from core.model.bundle import verify_bundle

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
    try:
        manifest = json.loads(read_manifest_text(path / MANIFEST))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return [f"{MANIFEST} is not valid JSON ({e})"], None
    if not isinstance(manifest, dict):
        return [f"{MANIFEST} must hold a JSON object"], None
    problems = [
        f"{MANIFEST}: field {k!r} is missing or not {t.__name__}"
        for k, t in _BASELINE_FIELDS.items()
        if not isinstance(manifest.get(k), t) or (t is int and isinstance(manifest.get(k), bool))
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
        counts = json.loads((path / COUNTS).read_text(encoding="ascii"))
        arch = manifest["architecture"]
        model = _model_from_counts(manifest["kind"], tokenizer, counts, arch)
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
        return [f"{COUNTS} or {MANIFEST} describe an invalid {manifest['kind']} model ({type(e).__name__}: {e})"], None
    return [], BaselineBundle(model, manifest, path)


def _model_from_counts(kind: str, tokenizer: CharTokenizer, counts: dict, arch: dict) -> NGramModel | RuleModel:
    if counts.get("format") != f"attention-lab/{kind}-counts":
        raise ValueError(f"counts format must be 'attention-lab/{kind}-counts', got {counts.get('format')!r}")
    alphabet = set(key_alphabet(tokenizer))

    def checked(table: dict, length: int | None, what: str) -> dict[str, int]:
        if not isinstance(table, dict):
            raise ValueError(f"{what} must be an object of counts")
        for key, c in table.items():
            if (length is not None and len(key) != length) or not set(key) <= alphabet:
                raise ValueError(f"{what}: key {key!r} is not a {length or 'n'}-token key of this vocabulary")
            if not isinstance(c, int) or isinstance(c, bool) or c < 1:
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
