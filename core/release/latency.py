"""The latency of one suggestion: the call from a context to a finished suggestion, timed as a user waits for it.

    measure_suggestion_latency(predictor, ids, config)   p50 / p95 (linear interpolation) and mean wall-clock
                                                         ms over `latency_samples` seeded positions after one
                                                         warm-up call, with and without the KV cache for the
                                                         transformer; baselines have no cache ("cached" is None)

Timing is reported, never decides a test (bench/ prints the same figures).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

import numpy as np

from core.model.tokenizer import EOS_ID
from core.release.eval_report import EvalConfig, Latency
from core.release.predictor import Predictor
from core.release.transformer_predictor import TransformerPredictor
from core.release.typing_sim import MAX_CONTEXT


def measure_suggestion_latency(
    predictor: Predictor, ids: Sequence[int], config: EvalConfig
) -> dict[str, Latency | None]:
    """p50 / p95 wall-clock ms per suggestion at seeded positions, with and without the cache."""
    candidates = [t for t in range(1, len(ids)) if ids[t - 1] != EOS_ID]
    if not candidates or config.latency_samples == 0:
        return {"cached": None, "uncached": None}
    rng = random.Random(config.seed + 1)
    sample = [rng.choice(candidates) for _ in range(config.latency_samples)]
    modes: dict[str, bool | None] = (
        {"cached": True, "uncached": False} if isinstance(predictor, TransformerPredictor) else {"uncached": None}
    )
    result: dict[str, Latency | None] = {"cached": None, "uncached": None}
    for mode, use_cache in modes.items():
        kwargs: dict[str, bool] = {} if use_cache is None else {"use_cache": use_cache}
        predictor.suggest(
            ids[max(0, sample[0] - MAX_CONTEXT) : sample[0]], config.max_suggestion_chars, **kwargs
        )  # warm-up
        times: list[float] = []
        for t in sample:
            context = ids[max(0, t - MAX_CONTEXT) : t]
            began = time.perf_counter()
            predictor.suggest(context, config.max_suggestion_chars, **kwargs)
            times.append((time.perf_counter() - began) * 1000)
        result[mode] = Latency(
            float(np.percentile(times, 50)), float(np.percentile(times, 95)), float(np.mean(times)), len(times)
        )
    return result
