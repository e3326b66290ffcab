"""Slices of the held-out stream (the target's character class, column, indent, document) and the intervals of
their figures. Shapes: N stream positions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from core.model.corpus import Document
from core.release.evaluation.bootstrap import document_interval
from core.release.evaluation.eval_report import (
    SLICE_FAMILIES,
    EvalConfig,
    Interval,
    MetricSet,
    SliceMetrics,
    WorstSlice,
)

COLUMN_BUCKETS = ((0, 0), (1, 3), (4, 7), (8, 15), (16, 31), (32, 63), (64, math.inf))
CHAR_CLASSES = ("letter", "digit", "whitespace", "punctuation", "end of document")


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


def slice_names(family: str, values: np.ndarray) -> list[str]:
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


def worst_slices(slices: Sequence[SliceMetrics], config: EvalConfig) -> tuple[WorstSlice, ...]:
    """The slice with the lowest top-1 accuracy and the one with the highest loss (enough positions)."""
    # A slice with positions has a top-1 and a loss (min_slice_positions >= 1): the filter only tells mypy so.
    big = [
        (s.metrics.top1, s.metrics.loss, s)
        for s in slices
        if s.metrics.positions >= config.min_slice_positions
        and s.metrics.top1 is not None
        and s.metrics.loss is not None
    ]
    if not big:
        return ()
    top1, _, low = min(big, key=lambda b: (b[0], b[2].label))
    _, loss, high = max(big, key=lambda b: (b[1], b[2].label))
    return (
        WorstSlice("top1", low.label, top1, low.metrics.top1_ci, low.metrics.positions),
        WorstSlice("loss", high.label, loss, high.metrics.loss_ci, high.metrics.positions),
    )


def metrics(token: dict, typing: dict, mask: np.ndarray, document: np.ndarray, config: EvalConfig) -> MetricSet:
    """The figures of the positions in `mask` (N,) bool; `document` (N,) int is each position's document,
    the unit every interval resamples (the bootstrap)."""
    sel = mask[token["pos"]]
    nll, c1, c3 = token["nll"][sel], token["top1"][sel], token["top3"][sel]
    n = int(sel.sum())
    D = int(document.max()) + 1 if len(document) else 0
    scored_docs = document[token["pos"][sel]]  # (n,)

    def per_doc(values: np.ndarray, docs: np.ndarray) -> np.ndarray:
        return np.bincount(docs, weights=values.astype(np.float64), minlength=D)  # (D,)

    def interval(num: np.ndarray, den: np.ndarray, scale: float = 1.0) -> Interval | None:
        return document_interval(num, den, scale=scale, confidence=config.confidence, seed=config.seed)

    ones = per_doc(np.ones(n), scored_docs)
    typed_docs = document[mask]
    t = {k: typing[k][mask] for k in ("offered", "accepted", "saved", "covered", "net")}
    offered, accepted = int(t["offered"].sum()), int(t["accepted"].sum())
    covered, saved, net = int(t["covered"].sum()), int(t["saved"].sum()), float(t["net"].sum())
    doc = {k: per_doc(v, typed_docs) for k, v in t.items()}
    loss = float(nll.mean()) if n else None
    return MetricSet(
        positions=n,
        loss=loss,
        loss_ci=interval(per_doc(nll, scored_docs), ones),
        bits_per_char=loss / math.log(2) if loss is not None else None,
        top1=float(c1.mean()) if n else None,
        top1_ci=interval(per_doc(c1, scored_docs), ones),
        top3=float(c3.mean()) if n else None,
        top3_ci=interval(per_doc(c3, scored_docs), ones),
        typed_chars=covered,
        offered=offered,
        accepted=accepted,
        acceptance_rate=accepted / offered if offered else None,
        acceptance_ci=interval(doc["accepted"], doc["offered"]),
        keystrokes_saved_per_100=100.0 * saved / covered if covered else None,
        keystrokes_saved_ci=interval(doc["saved"], doc["covered"], 100.0),
        shown_per_100=100.0 * offered / covered if covered else None,
        net_keystrokes_saved_per_100=100.0 * net / covered if covered else None,
        net_keystrokes_saved_ci=interval(doc["net"], doc["covered"], 100.0),
        documents=int(((ones > 0) | (doc["covered"] > 0)).sum()),
    )


def _bucket(col: int) -> str:
    for lo, hi in COLUMN_BUCKETS:
        if lo <= col <= hi:
            return f"{lo}" if lo == hi else (f"{lo}+" if hi == math.inf else f"{lo}-{hi}")
    raise AssertionError(col)
