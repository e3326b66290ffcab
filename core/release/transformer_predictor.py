"""The transformer behind the predictor interface of core.release.predictor, and loading any bundle as one.

    TransformerPredictor(model, tokenizer)   log_probs in windows of at most context_length tokens; suggest by
                                             greedy generation (core.model.sampling.generate) while the tokens
                                             are word characters
    load_predictor(path)                     (predictor, manifest) for a bundle directory of any kind

Shapes: P positions, T window tokens, V vocabulary size.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from core.model.gpt import GPT
from core.model.sampling import SampleConfig, generate
from core.model.tokenizer import CharTokenizer
from core.release.baseline_bundle import BaselineBundle, load_any
from core.release.predictor import SUGGESTION_MAX_CHARS, Predictor, check_positions, word_ids


class TransformerPredictor:
    """A GPT and its tokenizer as a `Predictor`."""

    kind = "transformer"

    def __init__(self, model: GPT, tokenizer: CharTokenizer):
        if model.config.vocab_size != tokenizer.vocab_size:
            raise ValueError(f"model vocab_size {model.config.vocab_size} != tokenizer {tokenizer.vocab_size}")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.words = word_ids(tokenizer)

    @torch.no_grad()
    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor:
        """Rows for t in positions, computed in windows of at most L tokens; every row sees at least
        L // 2 + 1 tokens of context (or all of them near the start)."""
        check_positions(ids, positions)
        L = self.model.config.context_length
        step = max(1, L // 2)
        rows: list[Tensor] = []
        for c0 in range(positions.start, positions.stop, step):
            c1 = min(c0 + step, positions.stop)
            b = max(0, c1 - 1 - L)  # the window ids[b : c1 - 1] holds at most L tokens
            x = torch.tensor([list(ids[b : c1 - 1])], dtype=torch.long)  # (1, T)
            logits = self.model(x).logits[
                0, c0 - b - 1 : c1 - b - 1
            ]  # (P_chunk, V): logits at j predict ids[b + j + 1]
            rows.append(F.log_softmax(logits.double(), dim=-1))
        return torch.cat(rows) if rows else torch.empty(0, self.tokenizer.vocab_size, dtype=torch.float64)  # (P, V)

    def suggest(
        self, ids: Sequence[int], max_chars: int = SUGGESTION_MAX_CHARS, *, use_cache: bool = True
    ) -> list[int]:
        """Greedy word completion through core.model.sampling.generate. The prompt is the last L - max_chars
        tokens, so the window never slides while a suggestion is generated."""
        L = self.model.config.context_length
        if not 1 <= max_chars < L:
            raise ValueError(f"max_chars must lie in 1..context_length - 1 = {L - 1}, got {max_chars}")
        prompt = list(ids[-(L - max_chars) :])
        if not prompt:
            return []
        out: list[int] = []
        greedy = SampleConfig(temperature=0.0, max_new_tokens=max_chars)
        for step in generate(self.model, prompt, greedy, use_cache=use_cache):
            if step.token not in self.words:
                break
            out.append(step.token)
        return out


def load_predictor(path: str | os.PathLike) -> tuple[Predictor, dict]:
    """(predictor, manifest) for a bundle directory of any kind."""
    loaded = load_any(path)
    if isinstance(loaded, BaselineBundle):
        return loaded.predictor, loaded.manifest
    return TransformerPredictor(loaded.model, loaded.tokenizer), loaded.manifest
