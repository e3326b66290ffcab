"""The plain reference the benches race against: a nanoGPT-style model and its textbook sampler.

Written here, apart from core/, the way a minimal GPT is usually written: the same sizes as
core.model.gpt (RoPE on adjacent pairs, pre-norm, GELU MLP, tied LM head, no biases in the linear
layers), with attention by PyTorch's fused F.scaled_dot_product_attention(is_causal=True).
`load_from(ours)` copies a core.model.gpt.GPT's weights, so a bench can show both compute the same
function before it times them (`max_logit_difference`).

`recompute_generate` is the textbook sampling loop without a cache (nanoGPT's `generate`): crop the ids
to the context, run the full forward pass, take the last position's logits, append the argmax.

Run as a script it is the plain training script `train` is raced against (bench/bench_train.py --cli-steps):

    .venv/bin/python bench/reference_gpt.py --steps 300 --preset baby

trains the reference on the stdlib corpus with the CLI's configuration (train_config_for: the same schedule, batches
and evaluation interval; evaluations without probes) and prints one JSON line: seconds, the loop's tokens per second
of optimizer-step time (evaluation excluded, as `train` reports it) and the final validation loss. Nothing is saved.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from core.model.gpt import GPT, ModelConfig


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
        self.c = c
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

    def load_from(self, ours: GPT) -> RefGPT:
        """Copy ours' weights (same shapes, other names)."""
        names = {"token_embedding": "emb", "norm_final": "ln_f", "norm_attn": "ln1", "norm_mlp": "ln2"}
        names |= {"attn.qkv": "qkv", "attn.proj": "proj", "mlp.fc": "fc", "mlp.proj": "fc_proj"}
        state = {}
        for key, value in ours.state_dict().items():
            if key.startswith("lm_head"):
                continue  # tied to the embedding
            for old, new in names.items():
                key = key.replace(old, new)
            state[key] = value
        self.load_state_dict(state, strict=False)
        return self


@torch.no_grad()
def max_logit_difference(ours: GPT, ref: RefGPT, T: int) -> float:
    """max |logits ours - reference| on one random sequence of T ids: rounding-sized when both compute one function."""
    idx = torch.randint(0, ours.config.vocab_size, (1, T), generator=torch.Generator().manual_seed(0))  # (1, T)
    return float((ours(idx).logits - ref(idx)).abs().max())


@torch.no_grad()
def recompute_generate(model: RefGPT, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """nanoGPT's loop, greedy: every step runs the whole (cropped) window again. idx (1, T) -> (1, T + new)."""
    L = model.c.context_length
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= L else idx[:, -L:]  # (1, <= L)
        logits = model(idx_cond)[:, -1, :]  # (1, V)
        idx_next = logits.argmax(dim=-1, keepdim=True)  # (1, 1)
        idx = torch.cat((idx, idx_next), dim=1)  # (1, T + 1)
    return idx


def reference_optimizer(model: nn.Module, lr: float, betas: tuple[float, float], weight_decay: float):
    """torch.optim.AdamW with its defaults, weight decay on the matrices only (as nanoGPT's configure_optimizers)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas)


@torch.no_grad()
def batch_losses(model: nn.Module, stream: torch.Tensor, batch_size: int, T: int, iters: int, seed: int) -> list[float]:
    """Cross-entropy of `iters` seeded random windows of `stream`, one figure per batch (the same windows as
    core.model.batches.evaluate_loss for the same seed); model(x) may return logits or an object holding them."""
    from core.model.batches import sample_batch

    generator = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    losses = []
    for _ in range(iters):
        x, y = sample_batch(stream, batch_size, T, generator)  # (B, T), (B, T)
        out = model(x)
        logits = getattr(out, "logits", out)  # (B, T, V)
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item())
    model.train(was_training)
    return losses


def reference_train(model: RefGPT, train_stream: torch.Tensor, val_stream: torch.Tensor, cfg) -> list[float]:
    """A plain training loop with core.model.training's configuration `cfg` (a TrainConfig): the same seeded
    batches, warmup-cosine schedule, clipping and evaluations (cfg.eval_iters batches of each stream every
    cfg.eval_interval steps). Returns every step's loss; `reference_train.step_seconds` holds the time spent in
    optimizer steps (evaluation excluded)."""
    import time

    from core.model.batches import sample_batch
    from core.model.train_config import learning_rate_at

    T = model.c.context_length
    optimizer = reference_optimizer(model, cfg.learning_rate, (cfg.beta1, cfg.beta2), cfg.weight_decay)
    generator = torch.Generator().manual_seed(cfg.seed)
    losses = []
    step_seconds = 0.0
    model.train()
    for step in range(cfg.max_iters):
        if step % cfg.eval_interval == 0:
            batch_losses(model, train_stream, cfg.batch_size, T, cfg.eval_iters, cfg.seed + 1)
            batch_losses(model, val_stream, cfg.batch_size, T, cfg.eval_iters, cfg.seed + 2)
        t0 = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, cfg)
        x, y = sample_batch(train_stream, cfg.batch_size, T, generator)  # (B, T), (B, T)
        logits = model(x)  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        losses.append(loss.item())
        step_seconds += time.perf_counter() - t0
    batch_losses(model, val_stream, cfg.batch_size, T, cfg.eval_iters, cfg.seed + 2)  # the final evaluation
    reference_train.step_seconds = step_seconds  # type: ignore[attr-defined]
    return losses


def main(argv=None) -> int:
    """The plain training script (see the module docstring): one JSON line on stdout."""
    import argparse
    import dataclasses
    import json
    import time

    from core.model.batches import document_stream
    from core.model.corpus import load_corpus, split_documents
    from core.model.gpt import PRESETS
    from core.model.tokenizer import CharTokenizer
    from core.model.train_config import train_config_for

    began = time.perf_counter()
    parser = argparse.ArgumentParser(description="the plain reference training script")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--preset", default="baby", choices=sorted(PRESETS))
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = load_corpus("stdlib")
    cfg = train_config_for(args.steps, batch_size=args.batch_size)
    tokenizer = CharTokenizer.from_text(corpus.text)
    config = dataclasses.replace(PRESETS[args.preset], vocab_size=tokenizer.vocab_size)
    train_docs, val_docs = split_documents(corpus, cfg.val_fraction, cfg.seed)
    train_stream, val_stream = document_stream(train_docs, tokenizer), document_stream(val_docs, tokenizer)
    torch.manual_seed(cfg.seed)
    model = RefGPT(config)
    reference_train(model, train_stream, val_stream, cfg)
    step_seconds = reference_train.step_seconds  # type: ignore[attr-defined]
    tokens = args.steps * args.batch_size * config.context_length
    val = sum(batch_losses(model, val_stream, args.batch_size, config.context_length, cfg.eval_iters, cfg.seed + 2))
    line = {
        "seconds": round(time.perf_counter() - began, 3),
        "tokens_per_second": round(tokens / step_seconds, 1),
        "val_loss": val / cfg.eval_iters,
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
