"""Held-out evaluation of any predictor: loss, top-1 and top-3 accuracy, keystrokes saved as served (gross and net),
slice reliability and latency, each with its bootstrap interval over documents.

Every predictor (the transformer, the n-gram, the rule) is scored by the same code on the same positions of the
same held-out documents, the split its manifest records, made one token stream as in training. Shapes: P scored
positions, V vocabulary size, N stream positions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import numpy as np
import torch

from core.model.batches import document_stream
from core.model.corpus import Corpus, Document
from core.progress import Progress, steps, within
from core.release.baselines.ngram import train_ngram
from core.release.baselines.rule import train_rule
from core.release.evaluation.comparison import Evaluation, comparison_table
from core.release.evaluation.eval_report import (
    DEFAULT_EVAL,
    SLICE_FAMILIES,
    EvalConfig,
    EvalReport,
    SliceMetrics,
)
from core.release.evaluation.held_out import held_out
from core.release.evaluation.latency import measure_suggestion_latency
from core.release.evaluation.slices import (
    metrics,
    slice_labels,
    slice_names,
    worst_slices,
)
from core.release.evaluation.tuning import tune_policy
from core.release.evaluation.typing_sim import sample_blocks, simulate_typing, typing_segments, typing_trace
from core.release.serving.policy import DEFAULT_POLICY, SuggestionPolicy, policy_from_manifest
from core.release.serving.predictor import Predictor
from core.release.serving.transformer_predictor import load_predictor

# ---- evaluation ----------------------------------------------------------------------------------


def evaluate_predictor(
    predictor: Predictor,
    documents: Sequence[Document],
    config: EvalConfig = DEFAULT_EVAL,
    *,
    policy: SuggestionPolicy = DEFAULT_POLICY,
    measure_latency: bool = True,
    version: str | None = None,
    held_out_info: dict | None = None,
    warnings: Sequence[str] = (),
    tuning: Sequence[dict] = (),
    progress: Progress | None = None,
) -> EvalReport:
    """Every metric of the module docstring for `predictor` on `documents` (the held-out side), the typist
    shown suggestions at `policy`'s threshold. `progress` hears of each chunk of positions
    scored and each batch the typist is shown: the two loops that take the time."""
    if not documents:
        raise ValueError("evaluation needs at least one held-out document")
    began = time.perf_counter()
    ids = document_stream(documents, predictor.tokenizer).tolist()  # N tokens
    labels = slice_labels(documents)  # family -> N labels
    N = len(ids)
    document = np.repeat(np.arange(len(documents)), [len(d.text) + 1 for d in documents])  # (N,) each one's document
    # Caps keep a run to minutes on two cores: at most max_positions scored positions, in seeded whole chunks of the
    # stream positions t >= 1 (each predicted from the tokens before it; <eos> counts as a character), and typing_chars
    # simulated characters in seeded segments, rounded up to whole segments (an accepted suggestion may run past a
    # segment's end, so a little more is covered).
    positions = sample_blocks([(1, N)], config.chunk, config.max_positions, config.seed)
    scored: list[int] = []
    nll: list[torch.Tensor] = []
    top1: list[torch.Tensor] = []
    top3: list[torch.Tensor] = []
    for a, b in steps(positions, progress, "scoring held-out positions"):
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
    segments = typing_segments(documents, config)
    trace = typing_trace(predictor, ids, segments, policy, progress)
    typing = simulate_typing(trace, N, segments, policy.threshold, policy.attention_cost)
    overall = metrics(token, typing, np.ones(N, dtype=bool), document, config)
    # Typing figures go to the slice of the position where a suggestion was shown (savings, offers) and of each covered
    # character (characters).
    slices = tuple(
        SliceMetrics(family, name, metrics(token, typing, labels[family] == name, document, config))
        for family in SLICE_FAMILIES
        for name in slice_names(family, labels[family][1:])
    )
    latency = measure_suggestion_latency(predictor, ids, config, policy) if measure_latency else None
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
        policy.to_dict(),
        tuple(tuning),
        tuple(warnings),
        round(time.perf_counter() - began, 3),
    )


def untuned_warning(policy: SuggestionPolicy) -> tuple[str, ...]:
    if policy.tuned:
        return ()
    return (
        f"the bundle records no tuned suggestion threshold; suggestions are shown at the default {policy.threshold}: "
        "run `python -m core tune --bundle DIR` to choose one on the validation documents",
    )


def evaluate_bundle(
    path: str | os.PathLike,
    *,
    corpus: Corpus | str | None = None,
    config: EvalConfig = DEFAULT_EVAL,
    with_baselines: bool = False,
    measure_latency: bool = True,
    attention_cost: float | None = None,
    progress: Progress | None = None,
) -> Evaluation:
    """Evaluate the bundle at `path` (any kind) on its held-out documents, at the threshold it records;
    with_baselines also trains the rule and the n-gram on the same training documents (with the bundle's
    tokenizer), tunes each one's threshold on the validation documents the same way, and evaluates them
    with the same code and positions. The net figure is taken at `attention_cost` (default: the price the
    bundle records; another price keeps the bundle's threshold, says so, and tunes the baselines at it).
    `progress` hears each stage, named by the predictor."""
    predictor, manifest = load_predictor(path)
    policy = policy_from_manifest(manifest)
    priced: tuple[str, ...] = ()
    if attention_cost is not None and attention_cost != policy.attention_cost:
        priced = (
            f"the bundle's threshold {policy.threshold} was chosen at an attention cost of {policy.attention_cost}; "
            f"measured here at {attention_cost}: run `python -m core tune --attention-cost {attention_cost}` to "
            "choose one for this price",
        )
        policy = policy.with_attention_cost(attention_cost)
    split = held_out(manifest, corpus)
    info = split.describe()
    report = evaluate_predictor(
        predictor,
        split.val,
        config,
        policy=policy,
        measure_latency=measure_latency,
        version=manifest["version"],
        held_out_info=info,
        warnings=split.warnings + untuned_warning(policy) + priced,
        progress=within(progress, f"evaluating the {predictor.kind}"),
    )
    baselines: list[EvalReport] = []
    if with_baselines:
        for train in (train_rule, train_ngram):
            if train.__name__ == f"train_{predictor.kind}":
                continue
            baseline = train(split.train, predictor.tokenizer)
            tuned, grid = tune_policy(
                baseline, split.val, config, policy, progress=within(progress, f"tuning the {baseline.kind}")
            )
            baselines.append(
                evaluate_predictor(
                    baseline,
                    split.val,
                    config,
                    policy=tuned,
                    measure_latency=measure_latency,
                    held_out_info=info,
                    tuning=grid,
                    progress=within(progress, f"evaluating the {baseline.kind}"),
                )
            )
    return Evaluation(report, tuple(baselines), tuple(comparison_table((*baselines, report))))
