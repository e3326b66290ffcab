"""Turning logits into tokens: temperature, top-k, top-p, and streaming generation.

The distribution a token is drawn from is computed in one place, `next_token_distribution`, in this
order (the order Hugging Face's samplers use):

    1. temperature   probs ∝ exp(logits / temperature); temperature 0 means argmax (a one-hot row)
    2. top-k         keep exactly the k most likely tokens (ties broken by torch.topk), k clamped to V
    3. top-p         keep the smallest prefix of tokens, most likely first, whose mass reaches p
    4. renormalise   softmax over the kept tokens only (core.attention.softmax with a mask)

`sample_next_token` draws from exactly that distribution, so the app's bars are what sampling uses.
Randomness is explicit: a `torch.Generator` or a seed.

`generate` streams one `GenerationStep` per new token. Past the context length it slides the window
the way `core.kv_cache` documents (reset and re-encode the last `keep` tokens), with or without the
cache, so both paths produce the same tokens. An empty prompt starts from <eos> (see start_ids). Generation does not
stop at <eos> by itself: the caller sees each token and stops the loop when it wants.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch
from torch import Tensor

from core.attention import softmax
from core.kv_cache import default_keep, next_window_start
from core.tokenizer import EOS_ID


@dataclass(frozen=True)
class SampleConfig:
    temperature: float = 1.0  # 0 = greedy (argmax)
    top_k: int | None = None  # None = no top-k; values above V are clamped to V
    top_p: float | None = None  # None = no nucleus filtering; else in (0, 1]
    max_new_tokens: int = 64

    def __post_init__(self):
        _check_filters(self.temperature, self.top_k, self.top_p)
        if not isinstance(self.max_new_tokens, int) or isinstance(self.max_new_tokens, bool) or self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be an integer >= 0, got {self.max_new_tokens!r}")


def _check_filters(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}")


def _check_logits(logits: Tensor) -> None:
    if not isinstance(logits, Tensor) or logits.dim() not in (1, 2) or not logits.is_floating_point():
        got = f"{tuple(logits.shape)} {logits.dtype}" if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a floating-point tensor (V,) or (B, V), got {got}")
    if logits.shape[-1] < 1:
        raise ValueError(f"logits need at least one vocabulary entry, got shape {tuple(logits.shape)}")
    if torch.isnan(logits).any():
        raise ValueError("logits contain NaN")


def next_token_distribution(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """The exact distribution sampling draws from: probs with the shape of logits, (V,) or (B, V)."""
    _check_logits(logits)
    _check_filters(temperature, top_k, top_p)
    V = logits.shape[-1]
    if temperature == 0:
        greedy = logits.argmax(dim=-1, keepdim=True)  # (..., 1) first index of the maximum
        return torch.zeros_like(logits).scatter_(-1, greedy, 1.0)  # (..., V) one-hot
    keep = torch.ones_like(logits, dtype=torch.bool)  # (..., V)
    if top_k is not None and top_k < V:
        top = logits.topk(top_k, dim=-1).indices  # (..., k)
        keep = torch.zeros_like(keep).scatter_(-1, top, True)  # (..., V) exactly k True per row
    probs = softmax(logits, dim=-1, temperature=temperature, mask=keep)  # (..., V)
    if top_p is not None and top_p < 1.0:
        sorted_probs, order = probs.double().sort(dim=-1, descending=True, stable=True)  # (..., V) each
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (..., V) mass of the more likely tokens
        keep_sorted = mass_before < top_p  # (..., V): the prefix stops at the first token reaching p
        keep = keep & torch.zeros_like(keep).scatter_(-1, order, keep_sorted)  # (..., V) back to id order
        probs = softmax(logits, dim=-1, temperature=temperature, mask=keep)  # (..., V) renormalised
    return probs


def _draw(probs: Tensor, generator: torch.Generator | None, greedy: bool) -> Tensor:
    if greedy:
        return probs.argmax(dim=-1)  # (...,)
    flat = probs.reshape(-1, probs.shape[-1])  # (B, V)
    tokens = torch.multinomial(flat, 1, generator=generator)  # (B, 1)
    return tokens.reshape(probs.shape[:-1])  # (...,)


def sample_next_token(
    logits: Tensor,
    generator: torch.Generator | None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Tensor:
    """Draw one token id per row of logits (V,) -> () or (B, V) -> (B,), long.

    temperature 0 is argmax and uses no randomness (generator may be None); otherwise pass a
    torch.Generator, which makes the draw reproducible.
    """
    probs = next_token_distribution(logits, temperature, top_k, top_p)  # (..., V)
    if temperature > 0 and not isinstance(generator, torch.Generator):
        raise ValueError(f"sampling with temperature {temperature} needs a torch.Generator, got {generator!r}")
    return _draw(probs, generator, greedy=temperature == 0)


# Training joins documents as "doc <eos> doc <eos> ...", so <eos> is what the model has seen right before
# the start of a document. An empty prompt starts there; <bos> never occurs in training data.
EMPTY_PROMPT_ID = EOS_ID


def start_ids(prompt_ids: Sequence[int]) -> list[int]:
    """The ids generation starts from: the prompt's, or [<eos>] (a document start) when it is empty."""
    return [int(i) for i in prompt_ids] or [EMPTY_PROMPT_ID]


@dataclass(frozen=True)
class GenerationStep:
    token: int  # the new token id
    logits: Tensor  # (V,) the model's logits for this step
    probs: Tensor  # (V,) the distribution the token was drawn from
    seconds: float  # wall-clock time of this step (forward pass + sampling)
    reencoded: bool  # the window slid this step: cache reset and the last `keep` tokens encoded again
    position: int  # index of the new token in prompt + generated tokens
    context: int  # tokens the model saw to predict it (the window length)


def generate(
    model: torch.nn.Module,
    prompt_ids: Sequence[int],
    sample: SampleConfig,
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    keep: int | None = None,
) -> Iterator[GenerationStep]:
    """Stream up to sample.max_new_tokens new tokens after prompt_ids, one GenerationStep each.

    A prompt longer than the context keeps its last context_length tokens; an empty prompt starts
    from <eos>, a document start (start_ids). `keep` is the number of tokens re-encoded when the window slides (default
    context_length // 2, see core.kv_cache). Stochastic sampling needs a seed or a generator.
    The model is put in eval mode for the duration and restored afterwards.
    """
    if not isinstance(sample, SampleConfig):
        raise ValueError(f"sample must be a SampleConfig, got {type(sample).__name__}")
    if seed is not None and generator is not None:
        raise ValueError("pass either seed or generator, not both")
    if seed is not None:
        generator = torch.Generator().manual_seed(seed)
    if sample.temperature > 0 and generator is None:
        raise ValueError(f"sampling at temperature {sample.temperature} needs a seed or a torch.Generator")
    config = model.config
    L = config.context_length
    keep = default_keep(L) if keep is None else keep
    if isinstance(keep, bool) or not isinstance(keep, int) or not 1 <= keep <= L:
        raise ValueError(f"keep must be an integer in 1..context_length={L}, got {keep!r}")
    ids = start_ids(prompt_ids)
    if min(ids) < 0 or max(ids) >= config.vocab_size:
        raise ValueError(f"prompt ids must lie in 0..{config.vocab_size - 1}, got min {min(ids)}, max {max(ids)}")
    return _generate(model, ids, sample, generator, use_cache, keep)


def _generate(model, ids, sample, generator, use_cache, keep) -> Iterator[GenerationStep]:
    L = model.config.context_length
    device = next(model.parameters()).device
    cache = model.new_cache(batch_size=1) if use_cache else None
    start = max(0, len(ids) - L)  # the window the model sees is ids[start:]
    was_training = model.training
    model.eval()
    try:
        for step in range(sample.max_new_tokens):
            began = time.perf_counter()
            new_start = next_window_start(len(ids), start, L, keep)
            reencoded = new_start != start
            start = new_start
            if cache is None:
                feed = ids[start:]  # the whole window, every step
            elif step == 0 or reencoded:
                cache.reset()
                feed = ids[start:]  # prefill, or re-encode after the window slid
            else:
                feed = ids[-1:]  # only the newest token; the rest is in the cache
            logits = _last_logits(model, torch.tensor([feed], device=device), cache)  # (V,)
            probs = next_token_distribution(logits, sample.temperature, sample.top_k, sample.top_p)  # (V,)
            token = int(_draw(probs, generator, greedy=sample.temperature == 0))  # () -> Python int
            seconds = time.perf_counter() - began
            ids.append(token)
            yield GenerationStep(
                token=token,
                logits=logits,
                probs=probs,
                seconds=seconds,
                reencoded=reencoded,
                position=len(ids) - 1,
                context=len(ids) - 1 - start,
            )
    finally:
        model.train(was_training)


@torch.no_grad()
def _last_logits(model, idx: Tensor, cache) -> Tensor:
    # no_grad wraps each forward pass, never a yield: a generator suspended inside `with no_grad()`
    # would leave gradients disabled in the caller's code.
    return model(idx, cache=cache).logits[0, -1]  # (V,)
