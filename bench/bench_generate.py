"""Generation speed with and without the KV cache, and the cached cost per token against its position.

    .venv/bin/python bench/bench_generate.py [--threads 1] [--repeats 3] [--vocab 96]

How it is measured:
- Untrained models (timing does not depend on the weights), seeded with torch.manual_seed(0); greedy
  decoding (temperature 0) through core.model.sampling.generate, the same code path the app uses.
- "Context C": start from a one-token prompt (<bos>) and generate C - 1 tokens, so the window grows from
  1 to C tokens and never slides. tokens/s = (C - 1) / wall-clock seconds of the whole loop
  (time.perf_counter), the median of --repeats runs after one warm-up run per model and mode.
- C = 16 and 64 use the `baby` preset (context 64), C = 256 the `large` preset (context 256).
- Per-position table: the per-step wall clock reported by each GenerationStep of the C = 256 runs,
  averaged over buckets of 32 positions (median run). Cached steps should be nearly flat; uncached
  steps grow with the prefix they re-encode.
- torch.set_num_threads(--threads), default 1: the machine is shared, and one thread gives steadier
  figures than two threads competing with other jobs. Figures are for comparison, not pass/fail.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from core.model.gpt import GPT, preset  # noqa: E402
from core.model.sampling import SampleConfig, generate  # noqa: E402
from core.model.tokenizer import BOS_ID  # noqa: E402

CASES = [(16, "baby"), (64, "baby"), (256, "large")]
BUCKET = 32


def run_once(model: GPT, n_new: int, use_cache: bool) -> tuple[float, list[float]]:
    """Wall-clock seconds of one generation of n_new tokens from <bos>, and each step's seconds."""
    greedy = SampleConfig(temperature=0.0, max_new_tokens=n_new)
    began = time.perf_counter()
    steps = [step.seconds for step in generate(model, [BOS_ID], greedy, use_cache=use_cache)]
    return time.perf_counter() - began, steps


def measure(model: GPT, n_new: int, use_cache: bool, repeats: int) -> tuple[float, list[float]]:
    run_once(model, min(n_new, 16), use_cache)  # warm-up: allocator, kernels, first-call overheads
    runs = sorted((run_once(model, n_new, use_cache) for _ in range(repeats)), key=lambda run: run[0])
    return runs[len(runs) // 2]  # the median run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=96, help="vocabulary size (a typical character set)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    models: dict[str, GPT] = {}
    rows, per_step = [], {}
    for context, name in CASES:
        if name not in models:
            torch.manual_seed(0)
            models[name] = GPT(preset(name, args.vocab)).eval()
        model = models[name]
        n_new = context - 1
        cached_s, cached_steps = measure(model, n_new, True, args.repeats)
        uncached_s, uncached_steps = measure(model, n_new, False, args.repeats)
        rows.append(
            (context, name, model.num_parameters(), n_new / cached_s, n_new / uncached_s, uncached_s / cached_s)
        )
        per_step[context] = (cached_steps, uncached_steps)

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), V={args.vocab}, "
        f"median of {args.repeats} runs after 1 warm-up, greedy, wall clock (time.perf_counter)"
    )
    print()
    print(f"{'context':>7}  {'preset':<6} {'params':>9}  {'cached tok/s':>12}  {'uncached tok/s':>14}  {'speed-up':>8}")
    for context, name, params, cached, uncached, speedup in rows:
        print(f"{context:>7}  {name:<6} {params:>9,}  {cached:>12.1f}  {uncached:>14.1f}  {speedup:>7.2f}x")

    cached_steps, uncached_steps = per_step[256]
    print()
    print("per-token time against position, context 256 (`large`), mean ms per step in each bucket")
    print(f"{'positions':>10}  {'cached ms':>9}  {'uncached ms':>11}")
    for low in range(0, len(cached_steps), BUCKET):
        high = min(low + BUCKET, len(cached_steps))
        cached_ms = 1000 * statistics.fmean(cached_steps[low:high])
        uncached_ms = 1000 * statistics.fmean(uncached_steps[low:high])
        # step i predicts the token at position i + 1 from a window of i + 1 tokens
        print(f"{low + 1:>4}-{high:<5}  {cached_ms:>9.2f}  {uncached_ms:>11.2f}")
    first = statistics.fmean(cached_steps[1:BUCKET])  # step 0 is the prefill; here a single token
    last = statistics.fmean(cached_steps[-BUCKET:])
    print(f"cached: last bucket / first bucket = {last / first:.2f} (1.00 = perfectly flat)")


if __name__ == "__main__":
    main()
