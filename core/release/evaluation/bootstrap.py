"""Intervals by bootstrap over documents, the unit that is independent of its neighbours.

Neighbouring characters of one document are strongly correlated (a file is about one thing), so an interval that
treats positions as independent is far too narrow. Every figure is a ratio of per-document sums, and its interval is
the percentile bootstrap over seeded resamples of the documents. Shapes: D documents, R resamples.
"""

from __future__ import annotations

import numpy as np

from core.release.evaluation.eval_report import Interval

RESAMPLES = 2000
MIN_DOCUMENTS = 2  # one document resampled is itself: no interval


def document_interval(
    numerator: np.ndarray,
    denominator: np.ndarray,
    *,
    scale: float = 1.0,
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> Interval | None:
    """Percentile bootstrap interval of scale * sum(numerator) / sum(denominator), documents resampled."""
    num = np.asarray(numerator, dtype=np.float64)  # (D,)
    den = np.asarray(denominator, dtype=np.float64)  # (D,)
    keep = den > 0
    num, den = num[keep], den[keep]
    D = len(den)
    if D < MIN_DOCUMENTS:
        return None
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(D, np.full(D, 1.0 / D), size=resamples).astype(np.float64)  # (R, D) times drawn
    ratios = scale * (weights @ num) / (weights @ den)  # (R,) every resample has den > 0: each draws documents
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha])
    return Interval(float(low), float(high))
