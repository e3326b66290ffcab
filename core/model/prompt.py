"""How a text becomes the ids the model reads: the one rule every caller uses.

    text (N characters) -> the last `window` characters -> ids (T,), T = min(N, window)

where window = core.model.kv_cache.prompt_window(context_length, room): the whole context for one next-token read,
less the room a cached continuation needs (a suggestion of up to `room` characters never slides the window).

- A text longer than the window keeps its LAST `window` tokens: the ones nearest the next
  prediction, the ones generation, the inspector, the training snapshot and autocomplete all feed.
- A character the vocabulary lacks becomes <unk> (`core.model.tokenizer.UNK_ID`); the result names
  those characters and the positions that hold them, so a page can say what the model did not see.
- What was dropped is counted (`dropped`, `truncated`), never silently lost.

A character tokenizer maps one character to one token, so the cut is made on the text before encoding
(the last N tokens are the last N characters): the work is bounded by context_length, not by the text.
An empty text gives no ids (T = 0); a caller that must feed the model something (generation, the next-token
read, autocomplete) starts from <eos> with `start_ids`, a document start.

Shapes use the legend of `core/__init__.py`: T positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.model.kv_cache import prompt_window, window_start
from core.model.tokenizer import EOS_ID, UNK_ID, CharTokenizer

# Training joins documents as "doc <eos> doc <eos> ...", so <eos> is what the model has seen right before
# the start of a document. An empty prompt starts there; <bos> never occurs in training data.
EMPTY_PROMPT_ID = EOS_ID


def start_ids(prompt_ids: Sequence[int]) -> list[int]:
    """The ids the model starts from: the prompt's, or [<eos>] (a document start) when it is empty."""
    return [int(i) for i in prompt_ids] or [EMPTY_PROMPT_ID]


@dataclass(frozen=True)
class EncodedText:
    """The ids the model reads for a text, made visible, and what was lost on the way."""

    text: str  # the characters those ids encode: the end of a text longer than the context
    ids: tuple[int, ...]  # (T,) at most context_length ids: the END of the text
    pieces: tuple[str, ...]  # (T,) display_piece of each id ('␣' for a space, '<unk>' for an unseen char)
    unknown_chars: tuple[str, ...]  # distinct characters of the kept text outside the vocabulary (now <unk>)
    unknown_positions: tuple[int, ...]  # positions t (in ids) that hold <unk>
    truncated: bool  # True when the text had more tokens than the model reads (`window`)
    original_length: int  # tokens in the whole text, before the cut
    context_length: int
    window: int  # tokens the model reads of it: core.model.kv_cache.prompt_window(context_length, room)

    @property
    def T(self) -> int:
        return len(self.ids)

    @property
    def empty(self) -> bool:
        """No ids at all: the text was empty."""
        return not self.ids

    @property
    def dropped(self) -> int:
        """How many tokens were cut from the start of the text."""
        return self.original_length - len(self.ids)

    def labels(self) -> list[str]:
        """One unique axis label per position: 'position piece', e.g. '3 ␣'."""
        return [f"{t} {piece}" for t, piece in enumerate(self.pieces)]


def encode_for_model(tokenizer: CharTokenizer, text: str, context_length: int, room: int = 0) -> EncodedText:
    """Encode `text` as the model would see it: unseen characters become <unk>, and a text longer than
    the window keeps only its last `window` tokens (the ones nearest the next prediction), where window =
    core.model.kv_cache.prompt_window(context_length, room): the whole context for one next-token read (room 0),
    less the `room` a cached continuation of that many tokens needs (a suggestion).

    An empty text gives an EncodedText with no ids (T = 0). Raises ValueError for a tokenizer that is
    not a CharTokenizer, a text that is not a str, or a context_length that is not an integer >= 1.
    """
    if not isinstance(tokenizer, CharTokenizer):
        raise ValueError(f"encode_for_model needs a CharTokenizer, got {type(tokenizer).__name__}")
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    window = prompt_window(context_length, room)  # raises ValueError for a bad context_length or room
    kept_text = text[window_start(len(text), context_length, room) :]  # one character per token: the last T of each
    ids = tokenizer.encode(kept_text)  # (T,) T = min(N, window)
    return EncodedText(
        text=kept_text,
        ids=tuple(ids),
        pieces=tuple(tokenizer.display_piece(i) for i in ids),
        unknown_chars=tuple(tokenizer.unknown_chars(kept_text)),
        unknown_positions=tuple(t for t, i in enumerate(ids) if i == UNK_ID),
        truncated=len(text) > window,
        original_length=len(text),
        context_length=context_length,
        window=window,
    )
