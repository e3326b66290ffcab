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

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from core.model.corpus import Corpus, CorpusError, Document, load_corpus, split_documents
from core.model.training import document_stream
from core.release.comparison import COMPARISON_ROWS, Evaluation, comparison_table
from core.release.eval_report import (
    DEFAULT_EVAL,
    SLICE_FAMILIES,
    EvalConfig,
    EvalReport,
    Interval,
    Latency,
    MetricSet,
    SliceMetrics,
    WorstSlice,
)
from core.release.latency import measure_suggestion_latency
from core.release.ngram import train_ngram
from core.release.predictor import Predictor
from core.release.rule import train_rule
from core.release.slices import (
    CHAR_CLASSES,
    COLUMN_BUCKETS,
    char_class,
    metrics,
    slice_labels,
    slice_names,
    wilson,
    worst_slices,
)
from core.release.transformer_predictor import TransformerPredictor, load_predictor
from core.release.typing_sim import MAX_CONTEXT, sample_blocks, simulate_typing, typing_segments

__all__ = [
    "CHAR_CLASSES",
    "COLUMN_BUCKETS",
    "COMPARISON_ROWS",
    "MAX_CONTEXT",
    "SLICE_FAMILIES",
    "EvalConfig",
    "EvalReport",
    "Evaluation",
    "HeldOut",
    "Interval",
    "Latency",
    "MetricSet",
    "SliceMetrics",
    "TransformerPredictor",
    "WorstSlice",
    "char_class",
    "comparison_table",
    "evaluate_bundle",
    "evaluate_predictor",
    "held_out",
    "load_predictor",
    "measure_suggestion_latency",
    "simulate_typing",
    "slice_labels",
    "wilson",
    "worst_slices",
]


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


# ---- the held-out documents ------------------------------------------------------------------------


def held_out(manifest: dict, corpus: Corpus | str | None = None) -> HeldOut:
    """The split a bundle was trained with, on `corpus` (default: the source its manifest names)."""
    warnings: list[str] = []
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
    config: EvalConfig = DEFAULT_EVAL,
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
    positions = sample_blocks([(1, N)], config.chunk, config.max_positions, config.seed)
    scored: list[int] = []
    nll: list[torch.Tensor] = []
    top1: list[torch.Tensor] = []
    top3: list[torch.Tensor] = []
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
    typing = simulate_typing(predictor, ids, typing_segments(documents, config), config)
    z = statistics.NormalDist().inv_cdf(0.5 + config.confidence / 2)
    overall = metrics(token, typing, np.ones(N, dtype=bool), z)
    slices = tuple(
        SliceMetrics(family, name, metrics(token, typing, labels[family] == name, z))
        for family in SLICE_FAMILIES
        for name in slice_names(family, labels[family][1:])
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


def evaluate_bundle(
    path: str | os.PathLike,
    *,
    corpus: Corpus | str | None = None,
    config: EvalConfig = DEFAULT_EVAL,
    with_baselines: bool = False,
    measure_latency: bool = True,
) -> Evaluation:
    """Evaluate the bundle at `path` (any kind) on its held-out documents; with_baselines also trains
    the rule and the n-gram on the same training documents (with the bundle's tokenizer) and
    evaluates them with the same code and positions."""
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
    baselines: tuple[EvalReport, ...] = ()
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
