"""Training throughput of the `baby` preset at batch 12, its model FLOPs utilisation, and a plain
PyTorch reference of the same configuration.

    .venv/bin/python bench/bench_train.py [--steps 20] [--rounds 5] [--threads N] [--profile]

What is measured, per optimizer step (forward, cross-entropy, backward, clip, AdamW step):
  ours       core.model.training's own step: GPT from core.model.gpt (attention through core.attention, the
             function the lessons show), make_optimizer, the same loss and clipping
  reference  a nanoGPT-style model written below: the same sizes, RoPE, pre-norm, tied LM head, but
             attention by F.scaled_dot_product_attention(is_causal=True) (a fused kernel)
Both run the same batches and the same thread count, interleaved round by round (the machine is
shared, so a slow moment hits both); the table shows the median round.

FLOPs per token (PaLM appendix B, nanoGPT's estimate_mfu):
    6 N + 12 L T C     N parameters (tied embedding counted once: the LM head matmul),
                       L layers, T context, C model width; the second term is QK^T and weights @ V
                       forward and backward (causal masking is not subtracted).
MFU = achieved FLOP/s / ceiling, the ceiling being the best of two fp32 matmuls timed here with the
same thread count: 1024 x 1024 x 1024, and the model's own MLP shape (B*T x C) @ (C x 4C).
Both are given per wall second and per CPU second of this process: on a shared machine the wall
clock also counts time spent waiting for a core, the CPU clock does not (with one thread it is the
fairer figure; with several threads CPU seconds add up across threads).

What limits throughput (measured 2026-11-30, torch 2.13 CPU, a shared 2-core machine, 1 thread,
`--steps 15 --rounds 5`, load ~1-3; figures move by ~10% with the machine's load):
  * threads: with other work on the machine, torch's default of 2 threads is 10-25x slower than 1
    (the OpenMP workers spin-wait for a core another process holds); the CLI trains with --threads 1.
  * matmuls (the projections, the MLP, the LM head) are 50-60% of a step in every model here.
  * core.attention materialises scores and weights (B, H, T, S) and writes its softmax out step by
    step, as the lessons show it: ours 9,303 tokens/s (MFU 47%) against the reference's 10,269 (52%),
    0.91x. A fused torch.softmax inside core.attention changed nothing measurable (0.86x both ways
    before RoPE sharing): the cost is the materialised tensors and their backward, not the softmax.
  * RoPE cos/sin are computed once per forward pass and shared by every layer (they were computed
    for q and k in every layer: 0.86x -> 0.91x).
  * `--fast-attention` trains through PyTorch's fused kernel (held to parity with core.attention by
    tests/test_model.py; the app and generation never use it): 10,491 tokens/s, MFU 53%, 1.02x the
    reference. The remaining distance to the matmul ceiling is the elementwise work (norms, GELU,
    RoPE, AdamW) that no matmul kernel speeds up.

Benchmarks print figures; no test passes or fails on them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from core.model.gpt import GPT, PRESETS, ModelConfig  # noqa: E402
from core.model.training import TrainConfig, make_optimizer, sample_batch  # noqa: E402

BATCH = 12
VOCAB = 105  # the stdlib corpus's vocabulary (101 characters + 4 special tokens)


# ---- the plain reference -------------------------------------------------------------------------


def rope_tables(T: int, D: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = base ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)  # (D/2,)
    angles = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]  # (T, D/2)
    return angles.cos(), angles.sin()


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (B, H, T, D/2) each: adjacent pairs
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (B, H, T, D/2, 2)
    return out.flatten(-2)  # (B, H, T, D)


class RefBlock(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c = c
        self.ln1, self.ln2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model, bias=False)
        self.proj = nn.Linear(c.d_model, c.d_model, bias=False)
        self.fc = nn.Linear(c.d_model, c.mlp_ratio * c.d_model, bias=False)
        self.fc_proj = nn.Linear(c.mlp_ratio * c.d_model, c.d_model, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        H, D = self.c.n_head, C // self.c.n_head
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)  # (B, T, C) each
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D) each
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        x = x + self.proj(out.transpose(1, 2).reshape(B, T, C))  # (B, T, C)
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x))))  # (B, T, C)


class RefGPT(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.emb = nn.Embedding(c.vocab_size, c.d_model)
        self.blocks = nn.ModuleList(RefBlock(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.head.weight = self.emb.weight
        cos, sin = rope_tables(c.context_length, c.d_model // c.n_head, c.rope_base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.emb(idx)  # (B, T, C)
        for block in self.blocks:
            x = block(x, self.cos[:T], self.sin[:T])  # (B, T, C)
        return self.head(self.ln_f(x))  # (B, T, V)


# ---- timing --------------------------------------------------------------------------------------


def make_step(model: nn.Module, cfg: TrainConfig, logits_of):
    optimizer = make_optimizer(model, cfg) if isinstance(model, GPT) else _ref_optimizer(model, cfg)

    def step(x, y):
        logits = logits_of(model, x)  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        return loss.item()

    return step


def _ref_optimizer(model: nn.Module, cfg: TrainConfig):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": plain, "weight_decay": 0.0}],
        lr=1e-3,
        betas=(cfg.beta1, cfg.beta2),
    )


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
    flops = 2 * m * k * n
    return flops / wall, flops / max(cpu, 1e-9)


def profile(step, batches, rows: int = 12) -> str:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        time_steps(step, batches)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--profile", action="store_true", help="print the top ops of both models")
    parser.add_argument("--preset", default="baby", choices=sorted(PRESETS))
    parser.add_argument("--batch-size", type=int, default=BATCH)
    parser.add_argument("--train-check", action="store_true", help="also time core.model.training.train() itself")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()

    config = dataclasses.replace(PRESETS[args.preset], vocab_size=VOCAB)
    B, T, C, L = args.batch_size, config.context_length, config.d_model, config.n_layer
    cfg = TrainConfig(batch_size=B)
    torch.manual_seed(0)
    ours, ref = GPT(config), RefGPT(config)
    n_params = ours.num_parameters()
    assert n_params == sum(p.numel() for p in ref.parameters()), "the reference must have the same size"
    stream = torch.randint(4, VOCAB, (200_000,), generator=torch.Generator().manual_seed(0))  # (N,)
    g = torch.Generator().manual_seed(1)
    batches = [sample_batch(stream, B, T, g) for _ in range(args.steps)]
    ours_fast = GPT(config)
    ours_fast.load_state_dict(ours.state_dict())
    steps = {
        "ours (core.model.gpt)": make_step(ours, cfg, lambda m, x: m(x).logits),
        "ours --fast-attention": make_step(ours_fast, cfg, lambda m, x: m(x, fast_attention=True).logits),
        "reference (F.sdpa)": make_step(ref, cfg, lambda m, x: m(x)),
    }
    for step in steps.values():  # warm up allocators and kernels
        time_steps(step, batches[:3])
    wall = {name: [] for name in steps}
    cpu = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            w, c = time_steps(step, batches)
            wall[name].append(w)
            cpu[name].append(c)

    flops_per_token = 6 * n_params + 12 * L * T * C
    cube_wall, cube_cpu = matmul_flops(1024, 1024, 1024)
    mlp_wall, mlp_cpu = matmul_flops(B * T, C, 4 * C)
    ceiling, ceiling_cpu = max(cube_wall, mlp_wall), max(cube_cpu, mlp_cpu)
    tokens = args.steps * B * T
    print(
        f"{args.preset} preset: L={L} H={config.n_head} C={C} T={T} V={VOCAB}, batch {B}, "
        f"N={n_params:,} parameters, torch {torch.__version__}, {threads} thread(s)"
    )
    print(f"FLOPs/token = 6N + 12LTC = {6 * n_params:,} + {12 * L * T * C:,} = {flops_per_token:,}")
    print(
        f"matmul ceiling (best of 10, {threads} thread(s)), GFLOP per wall / per CPU second: "
        f"1024^3 {cube_wall / 1e9:.1f} / {cube_cpu / 1e9:.1f}, ({B * T}x{C})@({C}x{4 * C}) "
        f"{mlp_wall / 1e9:.1f} / {mlp_cpu / 1e9:.1f} -> using {ceiling / 1e9:.1f} / {ceiling_cpu / 1e9:.1f}"
    )
    print(
        "wall = median round by the clock (includes waiting for the shared CPU); "
        "cpu = tokens per CPU-second of this process (robust to other load, single-thread only)"
    )
    print(
        f"{'model':<20} {'ms/step':>8} {'tok/s wall':>11} {'MFU wall':>9} {'tok/cpu-s':>10} "
        f"{'MFU cpu':>8}   rounds (tok/s wall)"
    )
    for name in steps:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        tps_wall, tps_cpu = tokens / w, tokens / c
        mfu_wall = tps_wall * flops_per_token / ceiling
        mfu_cpu = tps_cpu * flops_per_token / ceiling_cpu
        per_round = ", ".join(f"{tokens / t:,.0f}" for t in wall[name])
        print(
            f"{name:<20} {1000 * w / args.steps:>8.1f} {tps_wall:>11,.0f} {mfu_wall:>9.1%} {tps_cpu:>10,.0f} "
            f"{mfu_cpu:>8.1%}   {per_round}"
        )
    *ours_names, ref_name = list(steps)
    for name in ours_names:
        for label, d in (("wall", wall), ("cpu", cpu)):
            ratio = statistics.median(d[ref_name]) / statistics.median(d[name])
            print(f"{name} / reference throughput ({label}): {ratio:.2f}x")
    if args.train_check:
        from core.model.corpus import load_corpus
        from core.model.training import train

        check = TrainConfig(batch_size=B, max_iters=args.steps, warmup_iters=0, eval_interval=args.steps, eval_iters=1)
        result = train(PRESETS["baby"], check, load_corpus("stdlib"))
        print(
            f"cross-check: core.model.training.train() on the stdlib corpus, {args.steps} steps: "
            f"{result.metrics['tokens_per_second']:,.0f} tokens/s (its own clock, evaluation excluded)"
        )
    if args.profile:
        for name, step in steps.items():
            print(f"\n== {name}: top ops by self CPU time over {args.steps} steps ==")
            print(profile(step, batches))
    return 0


if __name__ == "__main__":
    sys.exit(main())
