"""The latency of one suggestion as served, timed as a user waits for it. Timing is reported, never decides a test."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

import numpy as np

from core.model.tokenizer import EOS_ID
from core.numbers import percentile
from core.release.evaluation.eval_report import EvalConfig, Latency
from core.release.serving.policy import SuggestionPolicy, suggestion
from core.release.serving.predictor import MAX_CONTEXT, Predictor


def measure_suggestion_latency(
    predictor: Predictor,
    ids: Sequence[int],
    config: EvalConfig,
    policy: SuggestionPolicy,
    *,
    best_guess: bool = False,
) -> Latency | None:
    """p50 / p95 wall-clock ms per suggestion at seeded positions, as served (best_guess: as the Autocomplete page
    asks, the best guess not offered included); None with no position or no samples."""
    candidates = [t for t in range(1, len(ids)) if ids[t - 1] != EOS_ID]
    if not candidates or config.latency_samples == 0:
        return None
    rng = random.Random(config.seed + 1)
    sample = [rng.choice(candidates) for _ in range(config.latency_samples)]
    kept = min(MAX_CONTEXT, predictor.reads(policy.max_chars))  # the stream cut once, to the window it reads
    suggestion(predictor, ids[max(0, sample[0] - kept) : sample[0]], policy, best_guess=best_guess)  # warm-up
    times: list[float] = []
    for t in sample:
        context = ids[max(0, t - kept) : t]
        began = time.perf_counter()
        suggestion(predictor, context, policy, best_guess=best_guess)
        times.append((time.perf_counter() - began) * 1000)
    p50, p95 = percentile(times, 50), percentile(times, 95)
    assert p50 is not None and p95 is not None  # latency_samples >= 1, so times is not empty
    return Latency(p50, p95, float(np.mean(times)), len(times))
