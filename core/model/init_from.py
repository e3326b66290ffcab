"""Start a run from a trained model: its weights and architecture, its vocabulary grown by the new text's characters.

The new vocabulary is the base's characters plus the text's unseen ones, sorted by code point as CharTokenizer
requires, so a character's id can shift: rows are mapped by character, never by id (the special tokens keep ids
0-3). The LM head is tied to the token embedding (core/model/gpt.py), so one (V, C) table is both.
"""

from __future__ import annotations

import dataclasses

import torch

from core.model.bundle import Bundle
from core.model.bundle_checks import BundleError
from core.model.gpt import GPT, ModelConfig
from core.model.tokenizer import SPECIAL_TOKENS, CharTokenizer


def check_base(bundle: Bundle) -> Bundle:
    """`bundle` (loaded and verified by the bundle loader), fit to start a run from; BundleError (one line) when it
    was trained without the causal mask or is marked unsafe: a run must not inherit a leak."""
    where = f"bundle {str(bundle.path)!r} (version {bundle.version})"
    if not bundle.config.causal:
        raise BundleError(f"{where} was trained without the causal mask; start from a causal model")
    if not bundle.safe:
        raise BundleError(f"{where} is marked unsafe ({bundle.manifest['unsafe_reason']}); start from a safe model")
    return bundle


def extended_tokenizer(tokenizer: CharTokenizer, text: str) -> CharTokenizer:
    """The base's characters plus the unseen characters of `text`, sorted by code point (ids can shift)."""
    return CharTokenizer(sorted(set(tokenizer.chars) | set(text)))


def rebuilt(model: GPT, config: ModelConfig, state: dict[str, torch.Tensor]) -> GPT:
    """A new GPT of `config` holding `state` (every weight; strict), in `model`'s dtype, device and mode."""
    weight = model.token_embedding.weight
    with torch.random.fork_rng(devices=[]):  # every weight is overwritten: the caller's RNG must not move
        new = GPT(config)
    new.to(dtype=weight.dtype, device=weight.device)  # the base's dtype: a float64 base stays float64
    new.load_state_dict(state, strict=True)
    new.train(model.training)
    return new


def extend_vocabulary(model: GPT, tokenizer: CharTokenizer, text: str) -> tuple[GPT, CharTokenizer]:
    """A copy of `model` whose vocabulary also holds every character of `text`, and its tokenizer.

    A character the base never saw gets a new row (embedding and, tied, output) equal to the mean of the base's
    character rows (Hewitt 2021, "Initializing new word embeddings for pretrained language models"): its logit
    starts as the average of the base characters' logits, h . mean(rows), not an arbitrary one that a random row
    could make the most likely next character. Every other weight is the base's; the base is left unchanged.
    """
    if not isinstance(model, GPT) or not isinstance(tokenizer, CharTokenizer):
        raise ValueError(
            f"extend_vocabulary needs a GPT and its CharTokenizer, got {type(model).__name__} and "
            f"{type(tokenizer).__name__}"
        )
    if tokenizer.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"the tokenizer's vocabulary ({tokenizer.vocab_size}) is not the model's vocab_size "
            f"({model.config.vocab_size}); pass the tokenizer the model was trained with"
        )
    if not isinstance(text, str):
        raise ValueError(f"extend_vocabulary needs the new text as a str, got {type(text).__name__}")
    if model.lm_head.weight is not model.token_embedding.weight:
        raise ValueError("extend_vocabulary expects the LM head tied to the token embedding (core/model/gpt.py)")
    extended = extended_tokenizer(tokenizer, text)
    N = len(SPECIAL_TOKENS)
    V_base = tokenizer.vocab_size
    base_ids = {c: N + i for i, c in enumerate(tokenizer.chars)}
    table = model.token_embedding.weight.detach()  # (V_base, C)
    mean_row = table[N:].mean(dim=0, keepdim=True)  # (1, C): the mean of the base's character rows
    rows = torch.cat([table, mean_row])  # (V_base + 1, C): row V_base is the new characters' start
    index = list(range(N)) + [base_ids.get(c, V_base) for c in extended.chars]  # new id -> row, by character
    new_table = rows[torch.tensor(index)]  # (V, C)
    state = model.state_dict()
    state["token_embedding.weight"] = state["lm_head.weight"] = new_table  # one tied table
    return rebuilt(model, dataclasses.replace(model.config, vocab_size=extended.vocab_size), state), extended


def with_context_length(bundle: Bundle, context_length: int) -> Bundle:
    """A copy of `bundle` whose model reads `context_length` tokens, every weight the base's.

    RoPE has no position weights: attention between positions m and n depends on m - n only, so the same weights
    are a model of any context; only the cos/sin table, computed from the config, grows. Distances past the base's
    context were never trained on, so a longer context is for a run that continues the base (`train --init-from
    ... --context-length N`), not for serving the base as it is. The base is left unchanged.
    """
    config = dataclasses.replace(bundle.config, context_length=context_length)  # type and bounds: ModelConfig's
    return dataclasses.replace(bundle, model=rebuilt(bundle.model, config, bundle.model.state_dict()))
