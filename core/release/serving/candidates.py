"""The next token as a sampler sees it: the top k of the sampler's next_token_distribution.

    next_token_candidates(model, ids, sample, k)   the k most likely next tokens, most likely first: exactly
                                                   what a sampler draws from (temperature, then top-k, then top-p)
    code_point(tokenizer, id)                      'U+0020' for a character, the special token's name otherwise

Shapes use the legend of `core/__init__.py`: V vocabulary size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from core.model.engine import next_token_logits
from core.model.gpt import GPT
from core.model.sampling import NEVER_SAMPLED, SampleConfig, next_token_distribution
from core.model.tokenizer import EOS_ID, SPECIAL_TOKENS, CharTokenizer
from core.numbers import is_int


def code_point(tokenizer: CharTokenizer, token_id: int) -> str:
    """'U+0020' for a character token, the special token's name for the others: unambiguous in any font."""
    piece = tokenizer.pieces[token_id]
    return piece if token_id < len(SPECIAL_TOKENS) else f"U+{ord(piece):04X}"


class Candidate(NamedTuple):
    id: int
    piece: str  # visible piece (tokenizer.display_piece), or 'id N' without a tokenizer
    prob: float  # probability under the sampling distribution


def next_token_candidates(
    model: GPT,
    ids: Sequence[int],
    sample: SampleConfig,
    k: int | None = 10,
    *,
    tokenizer: CharTokenizer | None = None,
) -> list[Candidate]:
    """The k most likely next tokens under core.model.sampling.next_token_distribution, most likely first.

    k=None (or k >= V) lists every token that can follow, whose probabilities sum to one. Ties are listed
    in id order. <pad>, <bos> and <unk> have probability 0, as in generation (core.model.sampling.NEVER_SAMPLED),
    and are never listed; nor is <eos> when top-k or top-p removed it.
    sample.max_new_tokens is not used.
    """
    if not isinstance(sample, SampleConfig):
        raise ValueError(f"sample must be a SampleConfig, got {type(sample).__name__}")
    V = model.config.vocab_size
    if k is not None and (not is_int(k) or k < 1):
        raise ValueError(f"k must be None or an integer >= 1, got {k!r}")
    logits = next_token_logits(model, ids)  # (V,)
    probs: list[float] = next_token_distribution(
        logits, sample.temperature, sample.top_k, sample.top_p, suppress=NEVER_SAMPLED
    ).tolist()  # V floats
    listed = [i for i in range(V) if i not in NEVER_SAMPLED and (i != EOS_ID or probs[i] > 0)]  # never text
    order = sorted(listed, key=lambda i: (-probs[i], i))[: len(listed) if k is None else min(k, len(listed))]
    piece: Callable[[int], str] = tokenizer.display_piece if tokenizer is not None else (lambda i: f"id {i}")
    return [Candidate(i, piece(i), probs[i]) for i in order]
