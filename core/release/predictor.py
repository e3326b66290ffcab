"""The interface every predictor is evaluated through: the baselines and the transformer alike.

It works on token ids of the model's CharTokenizer, so every predictor is scored over the same events
(the corpus characters plus <eos> at each document end):

    log_probs(ids, positions) -> (P, V) float64   row p holds log P(next | ids[:t]) for t = positions[p],
                                                   1 <= t <= len(ids); every row is a proper distribution
    suggest(ids, max_chars)   -> list[int]         the completion offered after ids: word characters
                                                   only, so it ends at the next word boundary

A *word character* is a letter, a digit or "_" (`is_word_char`). The generic suggestion is greedy:
append the most likely next token (ties: the lowest id) while it is a word character, at most
`max_chars` of them (`greedy_completion`). Shapes: P positions, V vocabulary size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from torch import Tensor

from core.model.tokenizer import SPECIAL_TOKENS, CharTokenizer

SUGGESTION_MAX_CHARS = 16  # longest suggestion (a longer word is offered in part)


def is_word_char(c: str) -> bool:
    """Letters, digits and "_": the characters a suggestion may contain."""
    return c == "_" or c.isalnum()


class Predictor(Protocol):
    """What the evaluation needs from a model (see the module docstring)."""

    kind: str
    tokenizer: CharTokenizer

    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor: ...

    def suggest(self, ids: Sequence[int], max_chars: int = SUGGESTION_MAX_CHARS) -> list[int]: ...


def word_ids(tokenizer: CharTokenizer) -> frozenset[int]:
    """Ids of the vocabulary's word characters."""
    n = len(SPECIAL_TOKENS)
    return frozenset(i + n for i, c in enumerate(tokenizer.chars) if is_word_char(c))


def greedy_completion(predictor: Predictor, ids: Sequence[int], max_chars: int = SUGGESTION_MAX_CHARS) -> list[int]:
    """The generic suggestion: argmax tokens (lowest id on ties) while they are word characters."""
    words = word_ids(predictor.tokenizer)
    context, out = list(ids), []
    for _ in range(max_chars):
        row = predictor.log_probs(context, range(len(context), len(context) + 1))[0]  # (V,)
        token = int(row.argmax())
        if token not in words:
            break
        out.append(token)
        context.append(token)
    return out


def check_positions(ids: Sequence[int], positions: range) -> None:
    if not isinstance(positions, range) or positions.step != 1:
        raise ValueError(f"positions must be a range with step 1, got {positions!r}")
    if len(positions) and (positions.start < 1 or positions.stop > len(ids) + 1):
        raise ValueError(
            f"positions must lie in 1..len(ids)={len(ids)} (a prediction needs a context), "
            f"got {positions.start}..{positions.stop - 1}"
        )
