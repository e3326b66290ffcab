"""Time per suggestion of a bundle and its baselines: p50 / p95, with and without the KV cache.

    .venv/bin/python bench/bench_latency.py [--bundle models/default] [--samples 50] [--threads 1]

How it is measured: the bundle's held-out documents (its recorded split), `--samples` seeded positions
inside them; at each, one call of the predictor's `suggest` (greedy word completion, at most 16
characters) from the text before it, timed with time.perf_counter after one warm-up call; p50 and p95
by linear interpolation (core.release.evaluation.measure_suggestion_latency, the code `evaluate` reports).
The n-gram and the rule are trained on the same split and timed the same way (they have no cache).
Figures depend on the machine and its load: they are printed, never asserted.
"""

from __future__ import annotations

import argparse

import torch

from core.model.training import document_stream  # noqa: E402
from core.release.baselines import train_ngram, train_rule  # noqa: E402
from core.release.evaluation import EvalConfig, held_out, load_predictor, measure_suggestion_latency  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default="models/default")
    parser.add_argument("--corpus", default=None)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    predictor, manifest = load_predictor(args.bundle)
    split = held_out(manifest, args.corpus)
    ids = document_stream(split.val, predictor.tokenizer).tolist()
    config = EvalConfig(latency_samples=args.samples)
    print(
        f"{args.bundle} ({manifest['kind']} {manifest['version']}), {args.samples} positions, "
        f"{torch.get_num_threads()} thread(s)"
    )
    print(f"{'predictor':<12} {'mode':<9} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    models = [predictor, train_ngram(split.train, predictor.tokenizer), train_rule(split.train, predictor.tokenizer)]
    for model in models:
        for mode, lat in measure_suggestion_latency(model, ids, config).items():
            if lat is not None:
                print(f"{model.kind:<12} {mode:<9} {lat.p50_ms:>8.2f} {lat.p95_ms:>8.2f} {lat.mean_ms:>8.2f}")


if __name__ == "__main__":
    main()
