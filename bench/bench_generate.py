"""Cached generation against the textbook recompute sampler, at context 64 and 256, and the cached cost per
token against its position.

    .venv/bin/python bench/bench_generate.py [--threads 1] [--repeats 5] [--vocab 96]

What is measured, in one run, on one shape: 4 layers, 4 heads, width 128 (the `baby` preset) with its
context set to 64 and to 256; untrained weights (timing does not depend on them), torch.manual_seed(0):
  ours cached   the engine's generate(use_cache=True), the path the app, the CLI and the typist use:
                greedy, every GenerationStep with its logits and distribution; its forward pass is the
                model's one forward pass with a KV cache and PyTorch's fused attention, held to parity with the
                lessons' kernel by tests/model/test_gpt.py
  recompute     bench/reference_gpt.py: a nanoGPT-style model holding the same weights (the bench prints
                the largest logit difference first) and nanoGPT's sampler, no cache: crop to the context,
                full forward, last logits, argmax, append
  ours uncached the engine's generate(use_cache=False): the teaching forward pass over the whole
                window every step (for reference)
Each generates C - 1 tokens from a one-token prompt, so the window grows from 1 to C tokens and never
slides; tokens/s = (C - 1) / wall-clock seconds of the whole loop (time.perf_counter). The three run
interleaved round by round (the machine is shared: a slow moment hits all), after one warm-up each;
the table shows each one's median round. torch.set_num_threads(--threads), default 1, as the server runs.

Per-position table (context 256): the per-step wall clock each GenerationStep reports, averaged over
buckets of 32 positions in the median run. A cached step reads S keys, so it grows only with those dot
products; a recompute step re-encodes the whole prefix.

Benchmarks print figures; no test passes or fails on them.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import time

import torch
from reference_gpt import RefGPT, max_logit_difference, recompute_generate

from core.model.engine import generate
from core.model.gpt import GPT, PRESETS
from core.model.sampling import SampleConfig
from core.model.tokenizer import BOS_ID

CONTEXTS = (64, 256)
BUCKET = 32


def ours(model: GPT, n_new: int, use_cache: bool) -> tuple[float, float, list[int], list[float]]:
    """(wall s, CPU s, tokens, each step's wall s) of one greedy generation of n_new tokens after <bos>."""
    greedy = SampleConfig(temperature=0.0, max_new_tokens=n_new)
    wall, cpu = time.perf_counter(), time.process_time()
    steps = list(generate(model, [BOS_ID], greedy, use_cache=use_cache, suppress=()))  # argmax over all ids, as nanoGPT
    return time.perf_counter() - wall, time.process_time() - cpu, [s.token for s in steps], [s.seconds for s in steps]


def reference(model: RefGPT, n_new: int) -> tuple[float, float, list[int], list[float]]:
    wall, cpu = time.perf_counter(), time.process_time()
    idx = recompute_generate(model, torch.tensor([[BOS_ID]]), n_new)  # (1, 1 + n_new)
    return time.perf_counter() - wall, time.process_time() - cpu, idx[0, 1:].tolist(), []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--vocab", type=int, default=96, help="vocabulary size (a typical character set)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), V={args.vocab}, shape L=4 H=4 C=128, "
        f"median of {args.repeats} interleaved rounds after 1 warm-up, greedy, wall clock (time.perf_counter)"
    )
    rows, per_step = [], {}
    for context in CONTEXTS:
        config = dataclasses.replace(PRESETS["baby"], vocab_size=args.vocab, context_length=context)
        torch.manual_seed(0)
        model = GPT(config).eval()
        ref = RefGPT(config).load_from(model).eval()
        print(f"context {context}: max |logits ours - reference| = {max_logit_difference(model, ref, context):.1e}")
        n_new = context - 1
        runs = {
            "cached": functools.partial(ours, model, n_new, True),
            "recompute": functools.partial(reference, ref, n_new),
            "uncached": functools.partial(ours, model, n_new, False),
        }
        for run in runs.values():
            run()  # warm-up: allocator, kernels, first-call overheads
        results: dict[str, list] = {name: [] for name in runs}
        for _ in range(args.repeats):
            for name, run in runs.items():
                results[name].append(run())
        median = {name: sorted(r, key=lambda x: x[0])[len(r) // 2] for name, r in results.items()}
        cpu = {name: statistics.median(x[1] for x in r) for name, r in results.items()}
        same = sum(a == b for a, b in zip(median["cached"][2], median["recompute"][2]))
        rows.append(
            (context, {name: n_new / median[name][0] for name in runs}, {n: n_new / cpu[n] for n in runs}, same)
        )
        per_step[context] = median["cached"][3]

    print()
    print("tokens/s by the wall clock, and per CPU-second of this process (one thread: robust to other load)")
    header = f"{'ours cached':>11}  {'recompute':>9}  {'ratio':>6}  {'ours uncached':>13}  same tokens"
    print(f"{'context':>7}  {'clock':<5}  {header}")
    for context, wall, cpu, same in rows:
        for clock, tps in (("wall", wall), ("cpu", cpu)):
            ratio = tps["cached"] / tps["recompute"]
            print(
                f"{context:>7}  {clock:<5}  {tps['cached']:>7.0f} t/s  {tps['recompute']:>5.0f} t/s  {ratio:>5.2f}x  "
                f"{tps['uncached']:>9.0f} t/s  {same}/{context - 1}"
            )
    steps = per_step[CONTEXTS[-1]]
    print()
    print(f"cached per-token time against position, context {CONTEXTS[-1]}, mean ms per step in each bucket")
    for low in range(0, len(steps), BUCKET):
        high = min(low + BUCKET, len(steps))
        # step i predicts the token at position i + 1 from a window of i + 1 tokens
        print(f"{low + 1:>4}-{high:<5}  {1000 * statistics.fmean(steps[low:high]):>6.3f} ms")
    first, last = statistics.fmean(steps[1:BUCKET]), statistics.fmean(steps[-BUCKET:])  # step 0 is the prefill
    print(f"last bucket / first bucket = {last / first:.2f} (1.00 = flat)")


if __name__ == "__main__":
    main()
