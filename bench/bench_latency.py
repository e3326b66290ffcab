"""Time per suggestion as served, for a bundle and its baselines: p50 / p95 on one thread.

    .venv/bin/python bench/bench_latency.py [--bundle models/default] [--samples 200] [--threads 1]

How it is measured: the bundle's held-out documents (its recorded split), `--samples` seeded positions
inside them; at each, one call of core.release.serving.policy.suggestion (the one suggestion policy at the bundle's
recorded threshold: greedy completion through the KV cache to a natural boundary, then the choice) from the
text before it, timed with time.perf_counter after one warm-up call; p50 and p95 by linear interpolation
(core.release.evaluation.latency.measure_suggestion_latency, the code `evaluate` reports). Each predictor is timed
twice at the same positions: as served (the completion extended while what is offered may still grow) and as the
Autocomplete page asks ("best guess": extended to MIN_THRESHOLD, so a guess not offered is shown too). The n-gram
and the rule are trained on the same split and timed at the same positions with the same policy and threshold.
Figures depend on the machine and its load: they are printed, never asserted.
"""

from __future__ import annotations

import argparse

import torch

from core.model.batches import document_stream
from core.release.baselines.ngram import train_ngram
from core.release.baselines.rule import train_rule
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.held_out import held_out
from core.release.evaluation.latency import measure_suggestion_latency
from core.release.serving.policy import policy_from_manifest
from core.release.serving.transformer_predictor import load_predictor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default="models/default")
    parser.add_argument("--corpus", default=None)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    predictor, manifest = load_predictor(args.bundle)
    policy = policy_from_manifest(manifest)
    split = held_out(manifest, args.corpus)
    ids = document_stream(split.val, predictor.tokenizer).tolist()
    config = EvalConfig(latency_samples=args.samples)
    print(
        f"{args.bundle} ({manifest['kind']} {manifest['version']}), {args.samples} positions, "
        f"{torch.get_num_threads()} thread(s), max {policy.max_chars} characters per suggestion"
    )
    print(f"{'predictor':<12} {'served as':<11} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    models = [predictor, train_ngram(split.train, predictor.tokenizer), train_rule(split.train, predictor.tokenizer)]
    for model in models:
        for best_guess in (False, True):
            lat = measure_suggestion_latency(model, ids, config, policy, best_guess=best_guess)
            if lat is not None:
                how = "best guess" if best_guess else "offered"
                print(f"{model.kind:<12} {how:<11} {lat.p50_ms:>8.2f} {lat.p95_ms:>8.2f} {lat.mean_ms:>8.2f}")


if __name__ == "__main__":
    main()
