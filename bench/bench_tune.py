"""Tuning the suggestion threshold of a bundle as the Training page does after Stop: the simulated typist over
PAGE_TUNING's stretches of the validation documents, then the grid, before and after the typist's finished rows drop
out of the batch. One torch thread (the page's run process trains and tunes on one).

    PYTHONPATH=. .venv/bin/python bench/bench_tune.py [--bundle models/default] [--chars 1500] [--rounds 1]

  before    the typist of issue 36: every row of a batch of BATCH positions runs the greedy continuation until the
            batch's longest one ends (kept here as a wrapper that hands the model a token for every finished row)
  after     core.release.evaluation.tuning as it is: a finished row (its probability under MIN_THRESHOLD, <eos>
            likelier, or max_chars) drops out of the KV cache, so each step computes only the rows still going
  windows   the first row of every position alone: one forward pass over each position's whole window, what any
            typist that reads the window the Autocomplete page reads must compute (the floor of this design)

Printed: seconds of each (median of --rounds, interleaved), the ratio, and whether both chose the same threshold with
the same figures. Benchmarks print figures; no test passes or fails on them.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Generator, Sequence
from pathlib import Path

import torch
from torch import Tensor

from core.model.batches import document_stream
from core.release.evaluation.held_out import held_out
from core.release.evaluation.tuning import tune_threshold
from core.release.evaluation.typing_sim import BATCH, typing_segments, typing_trace
from core.release.serving.policy import policy_from_manifest
from core.release.serving.predictor import MAX_CONTEXT
from core.release.serving.transformer_predictor import load_predictor
from core.runs.job import PAGE_TUNING

ROOT = Path(__file__).resolve().parent.parent


class EveryRow:
    """The predictor with the old cost: a finished row (-1) is handed to the model as token 0 and computed on."""

    def __init__(self, predictor):
        self.predictor, self.kind, self.tokenizer = predictor, predictor.kind, predictor.tokenizer

    def reads(self, max_new: int) -> int:
        return self.predictor.reads(max_new)

    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor:
        return self.predictor.log_probs(ids, positions)

    def continuations(self, contexts: Sequence[Sequence[int]], max_new: int) -> Generator[Tensor, Tensor, None]:
        steps = self.predictor.continuations(contexts, max_new)
        tokens = yield next(steps)
        while True:
            try:
                tokens = yield steps.send(tokens.clamp(min=0))  # (B,): every row goes on, as before
            except StopIteration:
                return


def windows_only(predictor, ids: list[int], positions: list[int], max_chars: int) -> None:
    kept = min(MAX_CONTEXT, predictor.reads(max_chars))
    for c0 in range(0, len(positions), BATCH):
        contexts = [ids[max(0, i - kept) : i] for i in positions[c0 : c0 + BATCH]]
        steps = predictor.continuations(contexts, max_chars)
        next(steps)
        steps.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default=str(ROOT / "models" / "default"))
    parser.add_argument("--chars", type=int, default=PAGE_TUNING.typing_chars)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    predictor, manifest = load_predictor(args.bundle)
    split = held_out(manifest, None)
    policy = policy_from_manifest(manifest)
    config = dataclasses.replace(PAGE_TUNING, typing_chars=args.chars, seed=PAGE_TUNING.seed + 1)  # as tune_policy
    ids = document_stream(split.val, predictor.tokenizer).tolist()
    segments = typing_segments(split.val, config)
    positions = [i for seg in segments for i in range(seg.start, seg.stop)]
    L = predictor.model.config.context_length
    print(
        f"{args.bundle}: context {L}, window {predictor.reads(policy.max_chars)} tokens, {len(positions):,} typed "
        f"positions, batches of {BATCH}, torch {torch.__version__}, 1 thread"
    )
    seconds: dict[str, list[float]] = {"before": [], "after": [], "windows": []}
    chosen = {}
    for _ in range(args.rounds):
        for name, p in (("before", EveryRow(predictor)), ("after", predictor)):
            began = time.perf_counter()
            trace = typing_trace(p, ids, segments, policy)
            chosen[name] = tune_threshold(trace, len(ids), segments, attention_cost=policy.attention_cost)
            seconds[name].append(time.perf_counter() - began)
        began = time.perf_counter()
        windows_only(predictor, ids, positions, policy.max_chars)
        seconds["windows"].append(time.perf_counter() - began)
    median = {k: statistics.median(v) for k, v in seconds.items()}
    for name, values in seconds.items():
        print(f"{name:<8} {median[name]:7.2f} s   rounds: {', '.join(f'{v:.2f}' for v in values)}")
    print(
        f"before / after: {median['before']:.2f} s / {median['after']:.2f} s = "
        f"{median['before'] / median['after']:.2f}x"
    )
    print(f"after, beyond the windows' forward passes: {median['after'] - median['windows']:.2f} s")
    same = chosen["before"][0] == chosen["after"][0] and chosen["before"][1] == chosen["after"][1]
    print(f"threshold before {chosen['before'][0]}, after {chosen['after'][0]}; every figure the same: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
