"""What both baselines share: count keys written as text, and the add-k unigram at the bottom of each.

Each token is written as its character, the special tokens as private-use characters U+E000 + id, so a count file
is plain JSON. Shapes: P positions, V vocabulary size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from core.model.tokenizer import SPECIAL_TOKENS, CharTokenizer
from core.release.serving.predictor import MAX_CONTEXT, word_ids

SPECIAL_BASE = 0xE000  # special token id i is written as chr(SPECIAL_BASE + i) in count keys
DEFAULT_ADD_K = 0.5


class KeyedCounts:
    """Shared by both baselines: the token <-> key-character mapping and the add-k unigram."""

    kind = ""

    def reads(self, max_new: int) -> int:
        """A baseline reads what it needs of the last MAX_CONTEXT tokens (its order, or the word being typed)."""
        return MAX_CONTEXT

    def __init__(self, tokenizer: CharTokenizer, unigram: dict[str, int], add_k: float):
        if not (isinstance(add_k, (int, float)) and math.isfinite(add_k) and add_k > 0):
            raise ValueError(f"add_k must be a finite number > 0, got {add_k!r}")
        self.tokenizer, self.add_k = tokenizer, float(add_k)
        self.V = tokenizer.vocab_size
        self.key_chars = key_alphabet(tokenizer)  # id -> key character
        self.key_id = {c: i for i, c in enumerate(self.key_chars)}
        self.word_id_set = word_ids(tokenizer)
        counts = np.zeros(self.V)  # (V,)
        for key, c in unigram.items():
            counts[self.key_id[key]] = c
        self.unigram_counts = unigram
        self.p0 = (counts + self.add_k) / (counts.sum() + self.add_k * self.V)  # (V,) sums to 1

    def text(self, ids: Sequence[int]) -> str:
        return "".join(self.key_chars[i] for i in ids)


def key_alphabet(tokenizer: CharTokenizer) -> tuple[str, ...]:
    """id -> the character a count key writes it as: specials as U+E000 + id, the rest as themselves."""
    specials = tuple(chr(SPECIAL_BASE + i) for i in range(len(SPECIAL_TOKENS)))
    clash = sorted(set(specials) & set(tokenizer.chars))
    if clash:
        raise ValueError(
            f"the corpus uses the private-use characters {clash!r}, which baseline count files "
            f"reserve for special tokens; remove them from the corpus"
        )
    return specials + tokenizer.chars


def stack_log(rows: list[np.ndarray], V: int) -> Tensor:
    if not rows:
        return torch.empty(0, V, dtype=torch.float64)
    return torch.from_numpy(np.log(np.stack(rows)))  # (P, V)
