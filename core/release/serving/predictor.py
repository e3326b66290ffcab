"""The interface every predictor is evaluated and served through: the baselines and the transformer alike.

It works on token ids of the model's CharTokenizer, so every predictor is scored over the same events
(the corpus characters plus <eos> at each document end):

    log_probs(ids, positions) -> (P, V) float64    row p holds log P(next | ids[:t]) for t = positions[p],
                                                    1 <= t <= len(ids); every row is a proper distribution
    continuations(contexts, max_new) -> generator   for B contexts at once: yields (B, V) float64 rows, row b
                                                    P(next | contexts[b]); the (B,) tokens sent in are appended
                                                    and the next rows yielded, at most max_new times (fewer
                                                    when a model's context leaves less room: the caller stops);
                                                    a token -1 finishes its row: its later rows are not computed
                                                    (what they hold is unspecified)
    reads(max_new) -> int                           how many of a context's last tokens continuations reads (the
                                                    transformer: the prompt's window rule, and it refuses a longer
                                                    context rather than cut it again: the caller cuts once)

What is suggested from those rows is the one suggestion policy (policy.py). A *word character*
is a letter, a digit or "_" (`is_word_char`). Shapes: P positions, V vocabulary size.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Protocol

import torch
from torch import Tensor

from core.model.tokenizer import SPECIAL_TOKENS, CharTokenizer

MAX_CONTEXT = 1024  # tokens of context handed to a predictor: more than any model here looks at


def is_word_char(c: str) -> bool:
    """Letters, digits and "_" make words and identifiers; every other character is a boundary."""
    return c == "_" or c.isalnum()


class Predictor(Protocol):
    """What the evaluation and the suggestion policy need from a model (see the module docstring)."""

    kind: str
    tokenizer: CharTokenizer

    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor: ...

    def continuations(self, contexts: Sequence[Sequence[int]], max_new: int) -> Generator[Tensor, Tensor, None]: ...

    def reads(self, max_new: int) -> int: ...


def word_ids(tokenizer: CharTokenizer) -> frozenset[int]:
    """Ids of the vocabulary's word characters."""
    n = len(SPECIAL_TOKENS)
    return frozenset(i + n for i, c in enumerate(tokenizer.chars) if is_word_char(c))


def continuations_by_log_probs(
    predictor: Predictor, contexts: Sequence[Sequence[int]], max_new: int, keep: int | None = None
) -> Generator[Tensor, Tensor, None]:
    """The generic `continuations`: one log_probs row per context and step (for predictors with no state to
    carry); `keep` = how many trailing tokens the predictor reads (None: all)."""
    lists: list[list[int] | None] = [list(c[-keep:] if keep else c) for c in contexts]
    rows = torch.empty(0)
    for _ in range(max_new):
        fresh = [None if c is None else predictor.log_probs(c, range(len(c), len(c) + 1))[0].exp() for c in lists]
        rows = torch.stack([r if r is not None else rows[b] for b, r in enumerate(fresh)])  # (B, V): finished kept
        tokens = yield rows
        for b, t in enumerate(tokens.tolist()):
            c = lists[b]
            if c is not None and t < 0:
                lists[b] = None  # -1: the row is finished
            elif c is not None:
                c.append(int(t))


def check_positions(ids: Sequence[int], positions: range) -> None:
    if not isinstance(positions, range) or positions.step != 1:
        raise ValueError(f"positions must be a range with step 1, got {positions!r}")
    if len(positions) and (positions.start < 1 or positions.stop > len(ids) + 1):
        raise ValueError(
            f"positions must lie in 1..len(ids)={len(ids)} (a prediction needs a context), "
            f"got {positions.start}..{positions.stop - 1}"
        )
