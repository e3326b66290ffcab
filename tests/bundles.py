"""Tiny models and bundles shared by the test files: built in seconds, seeded, never the shipped model.

`tiny_model` is an untrained tiny GPT with large weights (its attention is far from uniform), for the core
tests and the RoPE page; `train_tiny_bundle` trains one for a few steps and saves it as a bundle, for the
model pages (conftest.py shares one per session as the `trained_bundle_path` fixture).
"""

import dataclasses

import torch

from core.model.bundle import save_bundle
from core.model.corpus import corpus_from_text
from core.model.gpt import GPT, PRESETS
from core.model.tokenizer import CharTokenizer
from core.model.train_config import TrainConfig
from core.model.training import train

TEXT = "def add(a, b):\n    return a + b\n"


def tiny_model(seed=0, spread=20.0):
    """A seeded, untrained tiny GPT (vocabulary of TEXT) whose matrices are scaled by `spread`, so its
    scores are far from zero and its attention far from uniform. Returns (model in eval mode, tokenizer)."""
    tok = CharTokenizer.from_text(TEXT)
    torch.manual_seed(seed)
    model = GPT(dataclasses.replace(PRESETS["tiny"], vocab_size=tok.vocab_size))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(spread)
    return model.eval(), tok


def train_tiny_bundle(path, iters=12, context_length=None):
    """A tiny model trained for a few steps on a small Python text, saved as a bundle at `path` (for page tests);
    `context_length` replaces the tiny preset's (32), e.g. by the shipped model's 128 for the context-window tests."""
    corpus = corpus_from_text("toy.py", "\n\n".join(f"def add{i}(a, b):\n    return a + b * {i}\n" for i in range(60)))
    config = TrainConfig(
        batch_size=4, max_iters=iters, warmup_iters=1, eval_interval=iters, eval_iters=1, num_threads=1
    )
    preset = (
        PRESETS["tiny"]
        if context_length is None
        else dataclasses.replace(PRESETS["tiny"], context_length=context_length)
    )
    result = train(preset, config, corpus)
    return save_bundle(
        path,
        result.model,
        result.tokenizer,
        metrics=result.metrics,
        command=["tests", "train_tiny_bundle"],
        corpus=corpus,
        train_config=config,
    )
