"""The prompt: the ids the model reads for a text, made visible, and what was lost on the way. One type, one
constructor (`encode_for_model`), and the context window written once.

    text -> template applied (N characters) -> the last `window` characters -> ids (T,), T = min(N, window)

The window is the whole context for one next-token read, less the `room` a cached continuation needs, so a
suggestion of up to `room` characters never slides it; never less than half the context (`prompt_window`).
Every cut of a prompt's ids (this one, generation's first window, the next-token read) begins at `window_start`.

- A text longer than the window keeps its LAST `window` tokens: the ones nearest the next prediction.
- A character the vocabulary lacks becomes <unk>; the prompt names those characters and the positions that hold
  them, so a page can say what the model did not see. What was dropped is counted, never silently lost.
- An empty text reads <eos>, a document start (`start_ids`): training joins documents as "doc <eos> doc", so <eos>
  is what the model has seen right before a document begins; <bos> never occurs in training data.

A character tokenizer maps one character to one token, so the cut is made on the text before encoding: the work
is bounded by the window, not by the text. Shapes use the legend of `core/__init__.py`: T positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.model.tokenizer import EOS_ID, UNK_ID, CharTokenizer
from core.numbers import integer

EMPTY_PROMPT_ID = EOS_ID  # what an empty prompt reads: a document start


def prompt_window(context_length: int, room: int = 0) -> int:
    """How many of a prompt's last tokens the model reads when `room` more tokens will be appended through the cache
    without the window sliding (0 for one next-token read, the suggestion's longest for a suggestion):
    context_length - room, but never less than half the context (and at least one token)."""
    integer("context_length", context_length, 1)
    integer("room", room, 0)
    return max(context_length - room, context_length // 2, 1)


def window_start(n_tokens: int, context_length: int, room: int = 0) -> int:
    """Where the window begins in a prompt of `n_tokens` tokens: ids[window_start(...):] are the last
    prompt_window(context_length, room) of them (all of them when the prompt is shorter)."""
    integer("n_tokens", n_tokens, 0)
    return max(0, n_tokens - prompt_window(context_length, room))


def start_ids(prompt_ids: Sequence[int]) -> list[int]:
    """The ids the model starts from: the prompt's, or [<eos>] (a document start) when it is empty."""
    return [int(i) for i in prompt_ids] or [EMPTY_PROMPT_ID]


@dataclass(frozen=True)
class Prompt:
    """The ids the model reads for a text, made visible, and what was lost on the way (built by encode_for_model)."""

    text: str  # the text as given (what a user typed)
    model_text: str  # after the template: what is encoded
    ids: tuple[int, ...]  # (T,) what the model reads: the last `window` tokens of model_text, (<eos>,) if it is empty
    pieces: tuple[str, ...]  # (T,) each id made visible: '␣' for a space, '↵' for a newline, '<unk>', '<eos>'
    unknown_chars: tuple[str, ...]  # distinct characters of the kept text outside the vocabulary (now <unk>)
    unknown_positions: tuple[int, ...]  # positions t (in ids) that hold <unk>
    n_tokens: int  # tokens of model_text before the cut
    context_length: int  # the model's context (a baseline: what it is handed)
    window: int  # tokens the model reads of it: prompt_window(context_length, room)

    @property
    def T(self) -> int:
        return len(self.ids)

    @property
    def empty(self) -> bool:
        """Nothing to encode: the model reads <eos>, a document start."""
        return self.n_tokens == 0

    @property
    def truncated(self) -> bool:
        """More tokens than the window: the model does not read the start of the text."""
        return self.n_tokens > self.window

    @property
    def dropped(self) -> int:
        """Tokens (= characters) cut from the front of the templated text."""
        return max(0, self.n_tokens - self.window)

    @property
    def kept_text(self) -> str:
        """The characters the ids encode: the end of a text longer than the window ("" for an empty text)."""
        return self.model_text[self.dropped :]

    @property
    def unseen(self) -> int:
        """Positions the model reads as <unk> (each unseen character, counted where it occurs)."""
        return len(self.unknown_positions)

    def labels(self) -> list[str]:
        """One unique axis label per position: 'position piece', e.g. '3 ␣'."""
        return [f"{t} {piece}" for t, piece in enumerate(self.pieces)]


def encode_for_model(
    tokenizer: CharTokenizer, text: str, context_length: int, *, room: int = 0, template: str = "{prompt}"
) -> Prompt:
    """The prompt the model reads for `text`: `template` applied (a bundle's prompt_template; "{prompt}" is the text
    itself), cut to its last prompt_window(context_length, room)
    characters, encoded (unseen characters become <unk>); an empty result reads <eos>. The one constructor of a
    Prompt. Raises ValueError for a tokenizer that is not a CharTokenizer, a text that is not a str, a template
    without '{prompt}', or a context_length or room that is not an integer (>= 1, >= 0)."""
    if not isinstance(tokenizer, CharTokenizer):
        raise ValueError(f"encode_for_model needs a CharTokenizer, got {type(tokenizer).__name__}")
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if not isinstance(template, str) or "{prompt}" not in template:
        raise ValueError(f"template must be a str containing '{{prompt}}', got {template!r}")
    model_text = template.replace("{prompt}", text)
    window = prompt_window(context_length, room)  # raises ValueError for a bad context_length or room
    kept_text = model_text[window_start(len(model_text), context_length, room) :]  # one character per token
    ids = tokenizer.encode(kept_text)  # (T,) T = min(N, window)
    read = tuple(start_ids(ids))  # (T,) or (<eos>,) when nothing is left
    return Prompt(
        text=text,
        model_text=model_text,
        ids=read,
        pieces=tuple(tokenizer.display_piece(i) for i in read),
        unknown_chars=tuple(tokenizer.unknown_chars(kept_text)),
        unknown_positions=tuple(t for t, i in enumerate(ids) if i == UNK_ID),
        n_tokens=len(model_text),
        context_length=context_length,
        window=window,
    )
