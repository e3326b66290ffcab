"""Training throughput of the default `train` path against a plain PyTorch reference of the same
configuration: per optimizer step, and over a whole run to the same step count and validation loss.

    .venv/bin/python bench/bench_train.py [--steps 20] [--rounds 5] [--run-steps 2000] [--threads N] [--profile]
                                          [--compile] [--bf16]
    .venv/bin/python bench/bench_train.py --steps 0 --run-steps 0 --cli-steps 300 [--cli-rounds 1]

Both sides run with torch's default thread count (as `python -m core train` now does; --threads sets
another), the `baby` preset (4 layers, 4 heads, width 128, context 64), batch 12, V = 105 (the stdlib
corpus's vocabulary).

Part 1, optimizer steps (forward, cross-entropy, backward, clip, AdamW step) on identical random batches:
  ours (default)      core.model.training's step: GPT.forward without weights (RoPE from a table,
                      PyTorch's fused attention; held to parity with core.attention in logits and
                      gradients by tests/model/test_gpt.py) and make_optimizer's fused AdamW
  ours, core.attn     the same with return_weights=True (`train --core-attention`): the lessons' attention
  reference           bench/reference_gpt.py: a nanoGPT-style model of the same sizes (RoPE by strided slices
                      and a stack, F.scaled_dot_product_attention(is_causal=True)) and torch.optim.AdamW's
                      defaults
  ours, compiled      with --compile: ours under torch.compile (Inductor, C++ on the CPU), its compile time
                      (the warm-up steps less the same steps at its steady speed) printed apart; not a path of
                      `train`: it tells what fusing the elementwise work would give and what it costs first
  ours, bf16          with --bf16: ours with its forward under torch.autocast("cpu", bfloat16) (matrix products and
                      attention in bfloat16, weights and optimizer in float32, the loss on float32 logits); not a
                      path of `train`: it tells what mixed precision gives on a CPU whose capability line says
                      AVX512 (with AVX-512 BF16, bfloat16 matrix products run natively; without it they are emulated)
  Interleaved round by round (a slow moment of the shared machine hits them all); the median round.

Part 2, a whole run of --run-steps steps on the stdlib corpus:
  ours        core.model.training.train() with the CLI's configuration (train_config_for: evaluations every
              tenth of the run with their causality probes, warmup, cosine), the path `train` takes
  reference   reference_train: a plain loop with the same configuration, schedule, batches and evaluations
              (no probes), its model starting from ours' initial weights
  Reported: wall-clock seconds to the last step (evaluations included), and the validation loss of both
  final models on the same 100 held-out batches, with its standard error (std / sqrt(100)) as the noise.

Part 3 (--cli-steps N), the whole command against the plain script, each a process of its own, timed from its start:
  ours        `python -m core train --corpus stdlib --preset P --max-iters N --out TMP` (evaluations, probes,
              saving and tuning the bundle included); its loop's tokens/s from its JSON line
  reference   `python bench/reference_gpt.py --steps N --preset P` (the same configuration, no probes, nothing saved)
  Reported: both wall times and both loop throughputs, and the two ratios (issue 37 asks loop >= 1.2x, wall >= 0.8x).
  Interleaved round by round when --cli-rounds > 1; every round printed.

FLOPs per token (PaLM appendix B, nanoGPT's estimate_mfu): 6 N + 12 L T C, N parameters (the tied
embedding once), L layers, T context, C width. MFU = achieved FLOP/s / ceiling, the ceiling being the best
of two fp32 matmuls timed here with the same threads: 1024^3, and the MLP's (B*T x C) @ (C x 4C). Given per
wall second and per CPU second of this process (with several threads CPU seconds add up across them).

Benchmarks print figures; no test passes or fails on them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from reference_gpt import RefGPT, batch_losses, reference_optimizer, reference_train

from core.model.batches import document_stream, sample_batch
from core.model.corpus import load_corpus, split_documents
from core.model.gpt import GPT, PRESETS
from core.model.tokenizer import CharTokenizer
from core.model.train_config import TrainConfig, train_config_for
from core.model.training import make_optimizer, train

ROOT = Path(__file__).resolve().parent.parent
BATCH = 12
VOCAB = 105  # the stdlib corpus's vocabulary (101 characters + 4 special tokens)
FINAL_EVAL_BATCHES = 100


def make_step(model: nn.Module, optimizer, logits_of, grad_clip: float):
    def step(x, y):
        logits = logits_of(model, x)  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        return loss.item()

    return step


def time_steps(step, batches) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) for the given batches, one optimizer step each."""
    w0, c0 = time.perf_counter(), time.process_time()
    for x, y in batches:
        step(x, y)
    return time.perf_counter() - w0, time.process_time() - c0


def matmul_flops(m: int, k: int, n: int, repeats: int = 10) -> tuple[float, float]:
    """(FLOP per wall second, FLOP per CPU second) of an fp32 (m x k) @ (k x n), best of `repeats`."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(3):
        a @ b
    wall = cpu = math.inf
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        a @ b
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return 2 * m * k * n / wall, 2 * m * k * n / max(cpu, 1e-9)


def profile(step, batches, rows: int = 12) -> str:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        time_steps(step, batches)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def steps_part(args, config, flops_per_token, ceiling, ceiling_cpu) -> None:
    cfg = TrainConfig(batch_size=args.batch_size)
    torch.manual_seed(0)
    ours, ours_core, ours_compiled, ours_bf16 = GPT(config), GPT(config), GPT(config), GPT(config)
    for copy in (ours_core, ours_compiled, ours_bf16):
        copy.load_state_dict(ours.state_dict())
    ref = RefGPT(config).load_from(ours)
    stream = torch.randint(4, VOCAB, (200_000,), generator=torch.Generator().manual_seed(0))  # (N,)
    g = torch.Generator().manual_seed(1)
    batches = [sample_batch(stream, args.batch_size, config.context_length, g) for _ in range(args.steps)]
    ref_opt = reference_optimizer(ref, cfg.learning_rate, (cfg.beta1, cfg.beta2), cfg.weight_decay)
    steps = {
        "ours (default)": make_step(ours, make_optimizer(ours, cfg), lambda m, x: m(x).logits, cfg.grad_clip),
        "ours, core.attn": make_step(
            ours_core, make_optimizer(ours_core, cfg), lambda m, x: m(x).logits, cfg.grad_clip
        ),
        "reference": make_step(ref, ref_opt, lambda m, x: m(x), cfg.grad_clip),
    }
    if args.compile:
        compiled = torch.compile(ours_compiled)
        steps["ours, compiled"] = make_step(
            ours_compiled, make_optimizer(ours_compiled, cfg), lambda m, x: compiled(x).logits, cfg.grad_clip
        )
    if args.bf16:

        def bf16_logits(m, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return m(x).logits.float()  # (B, T, V): the loss in float32

        steps["ours, bf16"] = make_step(ours_bf16, make_optimizer(ours_bf16, cfg), bf16_logits, cfg.grad_clip)
    warmup = {name: time_steps(step, batches[:3])[0] for name, step in steps.items()}  # allocators, kernels, compile
    wall: dict[str, list[float]] = {name: [] for name in steps}
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            w, c = time_steps(step, batches)
            wall[name].append(w)
            cpu[name].append(c)
    tokens = args.steps * args.batch_size * config.context_length
    print(f"\nPart 1: {args.steps} optimizer steps per round, {args.rounds} interleaved rounds, the median round")
    print(f"{'model':<16} {'ms/step':>8} {'tok/s wall':>11} {'MFU wall':>9} {'tok/cpu-s':>10} {'MFU cpu':>8}   rounds")
    for name in steps:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        per_round = ", ".join(f"{tokens / t:,.0f}" for t in wall[name])
        mfu_wall, mfu_cpu = tokens / w * flops_per_token / ceiling, tokens / c * flops_per_token / ceiling_cpu
        print(
            f"{name:<16} {1000 * w / args.steps:>8.1f} {tokens / w:>11,.0f} {mfu_wall:>9.1%} "
            f"{tokens / c:>10,.0f} {mfu_cpu:>8.1%}   {per_round}"
        )
    if args.compile:
        steady = statistics.median(wall["ours, compiled"]) / args.steps
        first = warmup["ours, compiled"] - 3 * steady
        print(f"ours, compiled: {first:.1f} s to compile (its 3 warm-up steps less 3 at its steady speed)")
    for name in [n for n in steps if n != "reference"]:
        ratio_wall = statistics.median(wall["reference"]) / statistics.median(wall[name])
        ratio_cpu = statistics.median(cpu["reference"]) / statistics.median(cpu[name])
        print(f"{name} / reference throughput: {ratio_wall:.2f}x (wall), {ratio_cpu:.2f}x (cpu)")
    if args.profile:
        for name, step in steps.items():
            print(f"\n== {name}: top ops by self CPU time over {args.steps} steps ==")
            print(profile(step, batches))


def run_part(args, preset_config, flops_per_token, ceiling) -> None:
    corpus = load_corpus("stdlib")
    cfg = train_config_for(args.run_steps, batch_size=args.batch_size, num_threads=args.threads)
    tokenizer = CharTokenizer.from_text(corpus.text)
    config = dataclasses.replace(preset_config, vocab_size=tokenizer.vocab_size)
    train_docs, val_docs = split_documents(corpus, cfg.val_fraction, cfg.seed)
    train_stream, val_stream = document_stream(train_docs, tokenizer), document_stream(val_docs, tokenizer)
    T = config.context_length

    began = time.perf_counter()
    result = train(preset_config, cfg, corpus)  # builds its model under torch.manual_seed(cfg.seed)
    ours_s = time.perf_counter() - began
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        initial = GPT(config)  # ours' initial weights, built as train() builds them
    ref = RefGPT(config).load_from(initial)
    began = time.perf_counter()
    reference_train(ref, train_stream, val_stream, cfg)
    ref_s = time.perf_counter() - began

    tokens = args.run_steps * args.batch_size * T
    print(
        f"\nPart 2: {args.run_steps} steps on the stdlib corpus ({cfg.eval_interval}-step evaluations of "
        f"{cfg.eval_iters} batches), the same initial weights and batches"
    )
    print(f"{'run':<10} {'seconds':>8} {'tok/s':>8} {'MFU':>6}  final val loss on {FINAL_EVAL_BATCHES} batches")
    for name, seconds, model in (("ours", ours_s, result.model), ("reference", ref_s, ref)):
        losses = batch_losses(model, val_stream, args.batch_size, T, FINAL_EVAL_BATCHES, seed=12345)
        noise = statistics.stdev(losses) / math.sqrt(len(losses))
        mfu = tokens / seconds * flops_per_token / ceiling
        print(
            f"{name:<10} {seconds:>8.1f} {tokens / seconds:>8,.0f} {mfu:>6.1%}  "
            f"{statistics.fmean(losses):.4f} +- {noise:.4f} (standard error)"
        )
    print(f"ours / reference, wall-clock to step {args.run_steps}: {ref_s / ours_s:.2f}x")


def timed_process(argv: list[str]) -> tuple[float, dict]:
    """(wall seconds from the process's start to its end, its last stdout line read as JSON); the checkout's own
    `core` first on the path (an editable install may point at another checkout)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    began = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])


def cli_part(args) -> None:
    threads = ["--threads", str(args.threads)] if args.threads else []
    steps = str(args.cli_steps)
    rows: dict[str, list[tuple[float, float]]] = {"ours": [], "reference": []}
    print(
        f"\nPart 3: `train --preset {args.preset} --max-iters {steps}` against the plain script, "
        f"{args.cli_rounds} round(s)"
    )
    print(f"{'round':<6} {'run':<10} {'wall s':>7} {'loop tok/s':>11}")
    for r in range(args.cli_rounds):
        with tempfile.TemporaryDirectory() as tmp:
            ours = ["-m", "core", "train", "--corpus", "stdlib", "--out", str(Path(tmp) / "bundle")]
            ours += ["--preset", args.preset, "--max-iters", steps, "--batch-size", str(args.batch_size), *threads]
            reference = [str(ROOT / "bench" / "reference_gpt.py"), "--steps", steps, "--preset", args.preset]
            reference += ["--batch-size", str(args.batch_size), *threads]
            for name, argv in (("ours", ours), ("reference", reference)):
                seconds, line = timed_process(argv)
                rows[name].append((seconds, line["tokens_per_second"]))
                print(f"{r:<6} {name:<10} {seconds:>7.1f} {line['tokens_per_second']:>11,.0f}")
    wall = {name: statistics.median(s for s, _ in v) for name, v in rows.items()}
    loop = {name: statistics.median(t for _, t in v) for name, v in rows.items()}
    print(
        f"loop tokens/s, ours / reference: {loop['ours']:,.0f} / {loop['reference']:,.0f} = "
        f"{loop['ours'] / loop['reference']:.2f}x (asked: >= 1.2x)"
    )
    print(
        f"whole run, reference wall / ours wall: {wall['reference']:.1f} s / {wall['ours']:.1f} s = "
        f"{wall['reference'] / wall['ours']:.2f}x (asked: >= 0.8x, i.e. ours <= 1.25x the script's time)"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps per round (part 1)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--run-steps", type=int, default=2000, help="steps of the whole run (part 2; the CLI's default); 0 skips it"
    )
    parser.add_argument("--cli-steps", type=int, default=0, help="part 3: the whole `train` command, N steps")
    parser.add_argument("--cli-rounds", type=int, default=1, help="part 3: interleaved rounds (the median is used)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--profile", action="store_true", help="print the top ops of every model (part 1)")
    parser.add_argument("--compile", action="store_true", help="part 1 also times ours under torch.compile")
    parser.add_argument("--bf16", action="store_true", help="part 1 also times ours under bfloat16 autocast")
    parser.add_argument("--preset", default="baby", choices=sorted(PRESETS))
    parser.add_argument("--batch-size", type=int, default=BATCH)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    config = dataclasses.replace(PRESETS[args.preset], vocab_size=VOCAB)
    B, T, C, L = args.batch_size, config.context_length, config.d_model, config.n_layer
    n_params = GPT(config).num_parameters()
    assert n_params == sum(p.numel() for p in RefGPT(config).parameters()), "the reference must have the same size"
    flops_per_token = 6 * n_params + 12 * L * T * C
    cube_wall, cube_cpu = matmul_flops(1024, 1024, 1024)
    mlp_wall, mlp_cpu = matmul_flops(B * T, C, 4 * C)
    ceiling, ceiling_cpu = max(cube_wall, mlp_wall), max(cube_cpu, mlp_cpu)
    print(
        f"{args.preset} preset: L={L} H={config.n_head} C={C} T={T} V={VOCAB}, batch {B}, "
        f"N={n_params:,} parameters, torch {torch.__version__}, {threads} thread(s), "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    print(f"FLOPs/token = 6N + 12LTC = {6 * n_params:,} + {12 * L * T * C:,} = {flops_per_token:,}")
    print(
        f"matmul ceiling (best of 10), GFLOP per wall / per CPU second: 1024^3 {cube_wall / 1e9:.1f} / "
        f"{cube_cpu / 1e9:.1f}, ({B * T}x{C})@({C}x{4 * C}) {mlp_wall / 1e9:.1f} / {mlp_cpu / 1e9:.1f} "
        f"-> using {ceiling / 1e9:.1f} / {ceiling_cpu / 1e9:.1f}"
    )
    if args.steps:
        steps_part(args, config, flops_per_token, ceiling, ceiling_cpu)
    if args.run_steps:
        run_part(args, PRESETS[args.preset], flops_per_token, ceiling)
    if args.cli_steps:
        cli_part(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
