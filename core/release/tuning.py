"""Choosing the suggestion threshold: the one that saves the most keystrokes on the validation documents.

    THRESHOLDS                                the grid: MIN_THRESHOLD, 0.10, ..., 0.95
    tune_threshold(trace, n, segments)        (best threshold, one row per threshold of the grid)
    tune_policy(predictor, documents, ...)    the policy with the tuned threshold, for a bundle to record
    tune_bundle(path, corpus=None)            tune a bundle's threshold on its validation documents and record it
                                              in its manifest (generation["suggestion"]); a new version

Every predictor is tuned the same way on the same documents (the transformer when it is trained, each
baseline when it is compared), so a comparison is fair. The tuning typist types other seeded stretches of the
validation documents than the evaluation's (seed + 1), from the same trace code. Ties go to the higher
threshold: of two thresholds that save the same, the one that shows fewer suggestions costs less attention.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from core.files import write_json_atomic
from core.model.bundle import MANIFEST, BundleError, manifest_version
from core.model.corpus import Corpus, Document
from core.model.training import document_stream
from core.progress import Progress, steps
from core.release.eval_report import DEFAULT_EVAL, EvalConfig
from core.release.held_out import held_out
from core.release.policy import DEFAULT_POLICY, MIN_THRESHOLD, SuggestionPolicy, policy_from_manifest
from core.release.predictor import Predictor
from core.release.transformer_predictor import load_predictor
from core.release.typing_sim import Segment, TraceCut, simulate_typing, typing_segments, typing_trace

THRESHOLDS: tuple[float, ...] = (MIN_THRESHOLD,) + tuple(round(0.05 * k, 2) for k in range(2, 20))


def tune_threshold(
    trace: dict[int, tuple[TraceCut, ...]],
    n_positions: int,
    segments: Sequence[Segment],
    progress: Progress | None = None,
) -> tuple[float, list[dict]]:
    """The grid threshold with the most keystrokes saved per 100 characters, and every threshold's figures."""
    rows: list[dict] = []
    for threshold in steps(THRESHOLDS, progress, "trying each threshold of the grid"):
        typing = simulate_typing(trace, n_positions, segments, threshold)
        covered, saved, offered = (int(typing[k].sum()) for k in ("covered", "saved", "offered"))
        accepted = int(typing["accepted"].sum())
        rows.append(
            {
                "threshold": threshold,
                "keystrokes_saved_per_100": 100.0 * saved / covered if covered else 0.0,
                "shown_per_100": 100.0 * offered / covered if covered else 0.0,
                "acceptance_rate": accepted / offered if offered else None,
            }
        )
    best = max(rows, key=lambda r: (r["keystrokes_saved_per_100"], r["threshold"]))
    return float(best["threshold"]), rows


def tune_policy(
    predictor: Predictor,
    documents: Sequence[Document],
    config: EvalConfig = DEFAULT_EVAL,
    policy: SuggestionPolicy = DEFAULT_POLICY,
    *,
    progress: Progress | None = None,
) -> tuple[SuggestionPolicy, list[dict]]:
    """`policy` with the threshold tuned on `documents` (the validation side), and the grid's figures; `progress`
    hears the typist's batches, then the grid (core.progress)."""
    if not documents:
        raise ValueError("tuning the threshold needs at least one validation document")
    config = dataclasses.replace(config, seed=config.seed + 1)  # other stretches than the evaluation types
    ids = document_stream(documents, predictor.tokenizer).tolist()
    segments = typing_segments(documents, config)
    trace = typing_trace(predictor, ids, segments, policy, progress)
    threshold, rows = tune_threshold(trace, len(ids), segments, progress)
    return policy.with_threshold(threshold), rows


def record_policy(path: str | os.PathLike, policy: SuggestionPolicy) -> dict:
    """Write `policy` into the bundle's manifest as generation["suggestion"], with the new version it gives
    the bundle; the bundle is loaded back, and the old manifest restored if it would not load."""
    manifest_path = Path(path) / MANIFEST
    predictor, manifest = load_predictor(path)
    old = dict(manifest)
    manifest = {**manifest, "generation": {**manifest["generation"], "suggestion": policy.to_dict()}}
    manifest["version"] = manifest_version(manifest)
    write_json_atomic(manifest_path, manifest)
    try:
        load_predictor(path)
    except (BundleError, ValueError):
        write_json_atomic(manifest_path, old)
        raise
    return manifest


def tune_bundle(
    path: str | os.PathLike,
    *,
    corpus: Corpus | str | None = None,
    config: EvalConfig = DEFAULT_EVAL,
    progress: Progress | None = None,
) -> tuple[SuggestionPolicy, list[dict], dict]:
    """(the tuned policy, the grid's figures, the new manifest) for the bundle at `path`."""
    predictor, manifest = load_predictor(path)
    split = held_out(manifest, corpus)
    policy, rows = tune_policy(predictor, split.val, config, policy_from_manifest(manifest), progress=progress)
    return policy, rows, record_policy(path, policy)
