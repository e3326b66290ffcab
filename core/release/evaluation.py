"""Held-out evaluation of any predictor: loss, accuracy, decision utility, slice reliability, latency.

Every predictor (the transformer, the n-gram, the rule: see `core.release.baselines.Predictor`) is scored by
the same code on the same positions of the same held-out documents: the validation side of
`split_documents(corpus, val_fraction, seed)` with the split the bundle's manifest records in
training.config (defaults 0.1 / 0 when a manifest has none, with a warning). The documents become one
token stream, each followed by <eos>, exactly as in training.

Metrics (all on stream positions t >= 1, the token at t predicted from the tokens before it):
* loss: mean -ln P(token) in nats per character (<eos> counts as a character); bits per character =
  loss / ln 2. Interval: normal approximation, mean +- z sd / sqrt(n). Neighbouring positions are
  correlated, so it is narrower than the truth; the per-document slices show the spread between documents.
* top-1 / top-3 accuracy: the target is among the 1 / 3 most likely tokens (ties: lower id first).
  Interval: Wilson score interval.
* decision utility: a simulated user types stretches of the held-out text. At each position the
  predictor offers its suggestion (word characters up to the next word boundary, at most
  `max_suggestion_chars`); one of fewer than `min_suggestion_chars` characters is not shown (Tab costs one
  keystroke, so a one-character suggestion saves nothing). The user accepts exactly when the text
  continues with the suggestion: one keystroke (Tab) instead of len(s) characters, saving len(s) - 1.
  Otherwise the user types one character. Keystrokes saved per 100 characters =
  100 * sum(len(s) - 1 over accepted) / characters covered; acceptance rate = accepted / offered
  (Wilson interval).
* slices: char_class of the target (letter, digit, whitespace, punctuation, end of document), column
  (its position in the line, bucketed), indent (the depth of its line's indentation, 4 spaces or a tab
  per level) and document. Typing figures are attributed to the slice of the position where a
  suggestion was offered (savings, offers) and of each covered character (characters). The worst slice
  by top-1 accuracy and by loss is named among slices with at least `min_slice_positions` positions.
* latency: wall-clock time of one suggestion (the call from context to finished suggestion), p50 and p95
  (linear interpolation) over `latency_samples` seeded positions after one warm-up call, with and
  without the KV cache for the transformer; baselines have no cache ("cached" is None).

Caps keep a run to minutes on two cores: `max_positions` scored positions (seeded whole chunks of
`chunk` positions) and `typing_chars` simulated characters (seeded segments of `segment_chars`, rounded up
to whole segments; an accepted suggestion may run past a segment's end, so a little more is covered).
Shapes: P scored positions, V vocabulary size.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from core.model.corpus import Corpus, CorpusError, Document, load_corpus, split_documents
from core.model.gpt import GPT
from core.model.sampling import SampleConfig, generate
from core.model.tokenizer import EOS_ID, CharTokenizer
from core.model.training import document_stream
from core.release.baselines import SUGGESTION_MAX_CHARS, Predictor, check_positions, word_ids

MAX_CONTEXT = 1024  # tokens handed to suggest(): more than any model here looks at
COLUMN_BUCKETS = ((0, 0), (1, 3), (4, 7), (8, 15), (16, 31), (32, 63), (64, math.inf))
SLICE_FAMILIES = ("char_class", "column", "indent", "document")
CHAR_CLASSES = ("letter", "digit", "whitespace", "punctuation", "end of document")


@dataclass(frozen=True)
class EvalConfig:
    max_positions: int = 20_000  # next-character positions scored, in seeded chunks
    chunk: int = 64
    typing_chars: int = 2_000  # characters of simulated typing, in seeded segments
    segment_chars: int = 200
    max_suggestion_chars: int = SUGGESTION_MAX_CHARS
    min_suggestion_chars: int = 2
    latency_samples: int = 30
    min_slice_positions: int = 50
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self):
        for name in (
            "max_positions",
            "chunk",
            "typing_chars",
            "segment_chars",
            "max_suggestion_chars",
            "min_suggestion_chars",
            "latency_samples",
            "min_slice_positions",
            "seed",
        ):
            value = getattr(self, name)
            low = 0 if name in ("seed", "latency_samples", "typing_chars") else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must lie in (0, 1), got {self.confidence!r}")


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class MetricSet:
    positions: int  # scored next-character positions
    loss: float | None  # nats per character
    loss_ci: Interval | None  # normal approximation
    bits_per_char: float | None
    top1: float | None
    top1_ci: Interval | None  # Wilson
    top3: float | None
    top3_ci: Interval | None
    typed_chars: int  # characters covered by the typing simulation
    offered: int
    accepted: int
    acceptance_rate: float | None
    acceptance_ci: Interval | None  # Wilson
    keystrokes_saved_per_100: float | None


@dataclass(frozen=True)
class SliceMetrics:
    family: str  # one of SLICE_FAMILIES
    name: str
    metrics: MetricSet

    @property
    def label(self) -> str:
        return f"{self.family}={self.name}"


@dataclass(frozen=True)
class WorstSlice:
    metric: str  # "top1" or "loss"
    slice: str  # "family=name"
    value: float
    ci: Interval | None  # None for a loss over a single position
    positions: int


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    mean_ms: float
    samples: int


@dataclass(frozen=True)
class EvalReport:
    predictor: str  # kind: "transformer", "ngram", "rule"
    version: str | None
    held_out: dict  # corpus source and fingerprint, val_fraction, seed, recorded, documents, characters
    config: EvalConfig
    overall: MetricSet
    slices: tuple[SliceMetrics, ...]
    worst: tuple[WorstSlice, ...]
    latency: dict  # {"cached": Latency | None, "uncached": Latency | None}
    warnings: tuple[str, ...] = ()
    seconds: float = 0.0

    def to_dict(self) -> dict:
        """Plain JSON-ready values (intervals as {"low", "high"}, absent values as None)."""
        return dataclasses.asdict(self)

    def slice_table(self) -> list[dict]:
        """One row per slice: the figures a page shows in its table."""
        return [{"slice": s.label, **_flat(s.metrics)} for s in self.slices]


@dataclass(frozen=True)
class HeldOut:
    corpus: Corpus
    train: tuple[Document, ...]
    val: tuple[Document, ...]
    val_fraction: float
    seed: int
    recorded: bool  # the split came from the manifest's training config
    warnings: tuple[str, ...] = field(default=())

    def describe(self) -> dict:
        return {
            "source": self.corpus.source,
            "fingerprint": self.corpus.fingerprint,
            "val_fraction": self.val_fraction,
            "seed": self.seed,
            "split_recorded": self.recorded,
            "documents": [d.name for d in self.val],
            "characters": sum(len(d.text) for d in self.val),
        }


# ---- the transformer behind the predictor interface ------------------------------------------------


class TransformerPredictor:
    """A GPT and its tokenizer as a `Predictor`."""

    kind = "transformer"

    def __init__(self, model: GPT, tokenizer: CharTokenizer):
        if model.config.vocab_size != tokenizer.vocab_size:
            raise ValueError(f"model vocab_size {model.config.vocab_size} != tokenizer {tokenizer.vocab_size}")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.words = word_ids(tokenizer)

    @torch.no_grad()
    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor:
        """Rows for t in positions, computed in windows of at most L tokens; every row sees at least
        L // 2 + 1 tokens of context (or all of them near the start)."""
        check_positions(ids, positions)
        L = self.model.config.context_length
        step = max(1, L // 2)
        rows = []
        for c0 in range(positions.start, positions.stop, step):
            c1 = min(c0 + step, positions.stop)
            b = max(0, c1 - 1 - L)  # the window ids[b : c1 - 1] holds at most L tokens
            x = torch.tensor([list(ids[b : c1 - 1])], dtype=torch.long)  # (1, T)
            logits = self.model(x).logits[
                0, c0 - b - 1 : c1 - b - 1
            ]  # (P_chunk, V): logits at j predict ids[b + j + 1]
            rows.append(F.log_softmax(logits.double(), dim=-1))
        return torch.cat(rows) if rows else torch.empty(0, self.tokenizer.vocab_size, dtype=torch.float64)  # (P, V)

    def suggest(
        self, ids: Sequence[int], max_chars: int = SUGGESTION_MAX_CHARS, *, use_cache: bool = True
    ) -> list[int]:
        """Greedy word completion through core.model.sampling.generate. The prompt is the last L - max_chars
        tokens, so the window never slides while a suggestion is generated."""
        L = self.model.config.context_length
        if not 1 <= max_chars < L:
            raise ValueError(f"max_chars must lie in 1..context_length - 1 = {L - 1}, got {max_chars}")
        prompt = list(ids[-(L - max_chars) :])
        if not prompt:
            return []
        out = []
        greedy = SampleConfig(temperature=0.0, max_new_tokens=max_chars)
        for step in generate(self.model, prompt, greedy, use_cache=use_cache):
            if step.token not in self.words:
                break
            out.append(step.token)
        return out


def load_predictor(path) -> tuple[Predictor, dict]:
    """(predictor, manifest) for a bundle directory of any kind."""
    from core.release.baselines import BaselineBundle, load_any

    loaded = load_any(path)
    if isinstance(loaded, BaselineBundle):
        return loaded.model, loaded.manifest
    return TransformerPredictor(loaded.model, loaded.tokenizer), loaded.manifest


# ---- the held-out documents ------------------------------------------------------------------------


def held_out(manifest: dict, corpus: Corpus | str | None = None) -> HeldOut:
    """The split a bundle was trained with, on `corpus` (default: the source its manifest names)."""
    warnings = []
    source = manifest.get("corpus", {}).get("source")
    if corpus is None:
        if not isinstance(source, str) or source.startswith("upload:"):
            raise CorpusError(
                f"the bundle was trained on {source!r}, which cannot be read back; pass the same text with --corpus"
            )
        corpus = source
    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus)
    if corpus.fingerprint != manifest.get("corpus", {}).get("fingerprint"):
        warnings.append(
            "the corpus differs from the one the bundle was trained on (fingerprint mismatch): "
            "held-out documents may have been trained on, so the figures may be optimistic"
        )
    config = (manifest.get("training") or {}).get("config") or {}
    recorded = isinstance(config.get("val_fraction"), (int, float)) and isinstance(config.get("seed"), int)
    val_fraction, seed = (float(config["val_fraction"]), config["seed"]) if recorded else (0.1, 0)
    if not recorded:
        warnings.append("the manifest records no training split; assumed val_fraction=0.1, seed=0")
    train_docs, val_docs = split_documents(corpus, val_fraction, seed)
    return HeldOut(corpus, train_docs, val_docs, val_fraction, seed, recorded, tuple(warnings))


# ---- evaluation ----------------------------------------------------------------------------------


def evaluate_predictor(
    predictor: Predictor,
    documents: Sequence[Document],
    config: EvalConfig = EvalConfig(),
    *,
    measure_latency: bool = True,
    version: str | None = None,
    held_out_info: dict | None = None,
    warnings: Sequence[str] = (),
) -> EvalReport:
    """Every metric of the module docstring for `predictor` on `documents` (the held-out side)."""
    if not documents:
        raise ValueError("evaluation needs at least one held-out document")
    began = time.perf_counter()
    ids = document_stream(documents, predictor.tokenizer).tolist()  # N tokens
    labels = slice_labels(documents)  # family -> N labels
    N = len(ids)
    positions = _sample_blocks([(1, N)], config.chunk, config.max_positions, config.seed)
    scored, nll, top1, top3 = [], [], [], []
    for a, b in positions:
        lp = predictor.log_probs(ids, range(a, b))  # (P, V)
        target = torch.tensor(ids[a:b])  # (P,)
        order = torch.argsort(-lp, dim=-1, stable=True)[:, :3]  # (P, 3) most likely first, lower id on ties
        nll.append(-lp.gather(1, target[:, None])[:, 0])
        top1.append(order[:, 0] == target)
        top3.append((order == target[:, None]).any(dim=1))
        scored.extend(range(a, b))
    token = {
        "pos": np.array(scored, dtype=np.int64),
        "nll": torch.cat(nll).numpy(),
        "top1": torch.cat(top1).numpy(),
        "top3": torch.cat(top3).numpy(),
    }
    typing = simulate_typing(predictor, ids, _typing_segments(documents, config), config)
    z = statistics.NormalDist().inv_cdf(0.5 + config.confidence / 2)
    overall = _metrics(token, typing, np.ones(N, dtype=bool), z)
    slices = tuple(
        SliceMetrics(family, name, _metrics(token, typing, labels[family] == name, z))
        for family in SLICE_FAMILIES
        for name in _slice_names(family, labels[family][1:])
    )
    latency = (
        measure_suggestion_latency(predictor, ids, config) if measure_latency else {"cached": None, "uncached": None}
    )
    info = held_out_info or {
        "documents": [d.name for d in documents],
        "characters": sum(len(d.text) for d in documents),
    }
    return EvalReport(
        predictor.kind,
        version,
        info,
        config,
        overall,
        slices,
        worst_slices(slices, config),
        latency,
        tuple(warnings),
        round(time.perf_counter() - began, 3),
    )


def simulate_typing(
    predictor: Predictor, ids: Sequence[int], segments: Sequence[tuple[int, int]], config: EvalConfig = EvalConfig()
) -> dict[str, np.ndarray]:
    """Per stream position: offered / accepted (0 or 1), saved keystrokes, covered characters."""
    N = len(ids)
    out = {k: np.zeros(N, dtype=np.int64) for k in ("offered", "accepted", "saved", "covered")}
    for a, b in segments:
        i = a
        while i < b:
            s = predictor.suggest(ids[max(0, i - MAX_CONTEXT) : i], config.max_suggestion_chars)
            if len(s) >= config.min_suggestion_chars:
                out["offered"][i] = 1
                if list(ids[i : i + len(s)]) == list(s):
                    out["accepted"][i] = 1
                    out["saved"][i] = len(s) - 1  # one Tab instead of len(s) characters
                    out["covered"][i : i + len(s)] += 1
                    i += len(s)
                    continue
            out["covered"][i] += 1
            i += 1
    return out


def measure_suggestion_latency(predictor: Predictor, ids: Sequence[int], config: EvalConfig) -> dict:
    """p50 / p95 wall-clock ms per suggestion at seeded positions, with and without the cache."""
    candidates = [t for t in range(1, len(ids)) if ids[t - 1] != EOS_ID]
    if not candidates or config.latency_samples == 0:
        return {"cached": None, "uncached": None}
    rng = random.Random(config.seed + 1)
    sample = [rng.choice(candidates) for _ in range(config.latency_samples)]
    modes = {"cached": True, "uncached": False} if isinstance(predictor, TransformerPredictor) else {"uncached": None}
    result = {"cached": None, "uncached": None}
    for mode, use_cache in modes.items():
        kwargs = {} if use_cache is None else {"use_cache": use_cache}
        predictor.suggest(
            ids[max(0, sample[0] - MAX_CONTEXT) : sample[0]], config.max_suggestion_chars, **kwargs
        )  # warm-up
        times = []
        for t in sample:
            context = ids[max(0, t - MAX_CONTEXT) : t]
            began = time.perf_counter()
            predictor.suggest(context, config.max_suggestion_chars, **kwargs)
            times.append((time.perf_counter() - began) * 1000)
        result[mode] = Latency(
            float(np.percentile(times, 50)), float(np.percentile(times, 95)), float(np.mean(times)), len(times)
        )
    return result


def slice_labels(documents: Sequence[Document]) -> dict[str, np.ndarray]:
    """family -> the slice name of every stream position (document characters, then <eos>)."""
    labels: dict[str, list[str]] = {f: [] for f in SLICE_FAMILIES}
    for doc in documents:
        lines = doc.text.split("\n")
        for i, line in enumerate(lines):
            line = line + "\n" if i < len(lines) - 1 else line
            stripped = line.lstrip(" \t")
            width = sum(4 if c == "\t" else 1 for c in line[: len(line) - len(stripped)])
            depth = "4+" if width // 4 >= 4 else str(width // 4)
            for col, c in enumerate(line):
                labels["char_class"].append(char_class(c))
                labels["column"].append(_bucket(col))
                labels["indent"].append(depth)
                labels["document"].append(doc.name)
        for family, value in (
            ("char_class", "end of document"),
            ("column", "end of document"),
            ("indent", "end of document"),
            ("document", doc.name),
        ):
            labels[family].append(value)
    return {f: np.array(v, dtype=object) for f, v in labels.items()}


def _slice_names(family: str, values: np.ndarray) -> list[str]:
    """The slice names present, in reading order: classes and buckets in their fixed order, indentation
    depths increasing, documents in corpus order."""
    present = list(dict.fromkeys(values.tolist()))
    fixed = {
        "char_class": CHAR_CLASSES,
        "column": [_bucket(lo) for lo, _ in COLUMN_BUCKETS] + ["end of document"],
        "indent": ["0", "1", "2", "3", "4+", "end of document"],
    }.get(family)
    return present if fixed is None else [n for n in fixed if n in present]


def char_class(c: str) -> str:
    if c.isalpha():
        return "letter"
    if c.isdigit():
        return "digit"
    if c.isspace():
        return "whitespace"
    return "punctuation"


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> Interval | None:
    """Wilson score interval for a proportion; None for n = 0."""
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(max(0.0, centre - half), min(1.0, centre + half))


def worst_slices(slices: Sequence[SliceMetrics], config: EvalConfig) -> tuple[WorstSlice, ...]:
    """The slice with the lowest top-1 accuracy and the one with the highest loss (enough positions)."""
    big = [s for s in slices if s.metrics.positions >= config.min_slice_positions]
    if not big:
        return ()
    low = min(big, key=lambda s: (s.metrics.top1, s.label))
    high = max(big, key=lambda s: (s.metrics.loss, s.label))
    return (
        WorstSlice("top1", low.label, low.metrics.top1, low.metrics.top1_ci, low.metrics.positions),
        WorstSlice("loss", high.label, high.metrics.loss, high.metrics.loss_ci, high.metrics.positions),
    )


def _metrics(token: dict, typing: dict, mask: np.ndarray, z: float) -> MetricSet:
    """mask: (N,) bool over stream positions."""
    sel = mask[token["pos"]]
    nll, c1, c3 = token["nll"][sel], token["top1"][sel], token["top3"][sel]
    n = int(sel.sum())
    loss = float(nll.mean()) if n else None
    loss_ci = None
    if n >= 2:
        half = z * float(nll.std(ddof=1)) / math.sqrt(n)
        loss_ci = Interval(loss - half, loss + half)
    offered, accepted = int(typing["offered"][mask].sum()), int(typing["accepted"][mask].sum())
    covered, saved = int(typing["covered"][mask].sum()), int(typing["saved"][mask].sum())
    return MetricSet(
        positions=n,
        loss=loss,
        loss_ci=loss_ci,
        bits_per_char=loss / math.log(2) if n else None,
        top1=float(c1.mean()) if n else None,
        top1_ci=wilson(int(c1.sum()), n, z),
        top3=float(c3.mean()) if n else None,
        top3_ci=wilson(int(c3.sum()), n, z),
        typed_chars=covered,
        offered=offered,
        accepted=accepted,
        acceptance_rate=accepted / offered if offered else None,
        acceptance_ci=wilson(accepted, offered, z),
        keystrokes_saved_per_100=100.0 * saved / covered if covered else None,
    )


def _bucket(col: int) -> str:
    for lo, hi in COLUMN_BUCKETS:
        if lo <= col <= hi:
            return f"{lo}" if lo == hi else (f"{lo}+" if hi == math.inf else f"{lo}-{hi}")
    raise AssertionError(col)


def _sample_blocks(ranges: Sequence[tuple[int, int]], size: int, cap: int, seed: int) -> list[tuple[int, int]]:
    """Cut each [a, b) into blocks of `size`; keep all if they hold <= cap positions, else a seeded
    sample of ceil(cap / size) blocks. Returned in stream order."""
    blocks = [(s, min(s + size, b)) for a, b in ranges for s in range(a, b, size)]
    if sum(b - a for a, b in blocks) <= cap:
        return blocks
    return sorted(random.Random(seed).sample(blocks, min(len(blocks), math.ceil(cap / size))))


def _typing_segments(documents: Sequence[Document], config: EvalConfig) -> list[tuple[int, int]]:
    """The character ranges of each document in the stream (position 0 has no context)."""
    ranges, start = [], 0
    for doc in documents:
        ranges.append((max(1, start), start + len(doc.text)))
        start += len(doc.text) + 1  # the document's <eos>
    ranges = [(a, b) for a, b in ranges if a < b]
    if config.typing_chars == 0:
        return []
    return _sample_blocks(ranges, config.segment_chars, config.typing_chars, config.seed)


def _flat(m: MetricSet) -> dict:
    row = {}
    for k, v in dataclasses.asdict(m).items():
        if isinstance(v, dict):
            row[f"{k}_low"], row[f"{k}_high"] = v["low"], v["high"]
        elif v is None and k.endswith("_ci"):
            row[f"{k}_low"] = row[f"{k}_high"] = None
        else:
            row[k] = v
    return row


# ---- a bundle against its baselines ----------------------------------------------------------------

# (field of MetricSet or latency key, label, which way is better)
COMPARISON_ROWS = (
    ("loss", "held-out loss (nats/char)", "lower"),
    ("bits_per_char", "bits per character", "lower"),
    ("top1", "top-1 accuracy", "higher"),
    ("top3", "top-3 accuracy", "higher"),
    ("keystrokes_saved_per_100", "keystrokes saved per 100 chars", "higher"),
    ("acceptance_rate", "acceptance rate", "higher"),
    ("offered_per_100", "suggestions offered per 100 chars", ""),
    ("worst_top1", "worst slice by top-1 (accuracy)", "higher"),
    ("cached.p50_ms", "latency p50 ms (cached)", "lower"),
    ("cached.p95_ms", "latency p95 ms (cached)", "lower"),
    ("uncached.p50_ms", "latency p50 ms (uncached)", "lower"),
    ("uncached.p95_ms", "latency p95 ms (uncached)", "lower"),
)


@dataclass(frozen=True)
class Evaluation:
    report: EvalReport  # the bundle's
    baselines: tuple[EvalReport, ...]  # rule and n-gram on the same split, when asked for
    comparison: tuple[dict, ...]  # comparison_table(baselines + (report,))

    def to_dict(self) -> dict:
        return {
            **self.report.to_dict(),
            "baselines": [r.to_dict() for r in self.baselines],
            "comparison": list(self.comparison),
        }


def comparison_table(reports: Sequence[EvalReport]) -> list[dict]:
    """One row per metric: {"metric", "better", <predictor kind>: value, ...} (None where absent)."""
    rows = []
    for key, label, better in COMPARISON_ROWS:
        row = {"metric": label, "better": better}
        for r in reports:
            row[r.predictor] = _figure(r, key)
        if key == "worst_top1":
            row["slice"] = {r.predictor: next((w.slice for w in r.worst if w.metric == "top1"), None) for r in reports}
        rows.append(row)
    return rows


def _figure(report: EvalReport, key: str) -> float | None:
    m = report.overall
    if key == "offered_per_100":
        return 100.0 * m.offered / m.typed_chars if m.typed_chars else None
    if key == "worst_top1":
        return next((w.value for w in report.worst if w.metric == "top1"), None)
    if "." in key:
        mode, name = key.split(".")
        lat = report.latency.get(mode)
        return None if lat is None else getattr(lat, name)
    return getattr(m, key)


def evaluate_bundle(
    path,
    *,
    corpus: Corpus | str | None = None,
    config: EvalConfig = EvalConfig(),
    with_baselines: bool = False,
    measure_latency: bool = True,
) -> Evaluation:
    """Evaluate the bundle at `path` (any kind) on its held-out documents; with_baselines also trains
    the rule and the n-gram on the same training documents (with the bundle's tokenizer) and
    evaluates them with the same code and positions."""
    from core.release.baselines import train_ngram, train_rule

    predictor, manifest = load_predictor(path)
    split = held_out(manifest, corpus)
    info = split.describe()
    report = evaluate_predictor(
        predictor,
        split.val,
        config,
        measure_latency=measure_latency,
        version=manifest["version"],
        held_out_info=info,
        warnings=split.warnings,
    )
    baselines = ()
    if with_baselines:
        baselines = tuple(
            evaluate_predictor(
                train(split.train, predictor.tokenizer),
                split.val,
                config,
                measure_latency=measure_latency,
                held_out_info=info,
            )
            for train in (train_rule, train_ngram)
            if train.__name__ != f"train_{predictor.kind}"
        )
    return Evaluation(report, baselines, tuple(comparison_table(baselines + (report,))))
