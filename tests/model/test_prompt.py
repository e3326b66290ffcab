"""core.model.prompt.encode_for_model against the plain rule written without it: encode the whole text with
the tokenizer, keep the last context_length ids (or the last prompt_window(L, room) with room for a continuation)."""

import random

import pytest

from core.model.prompt import encode_for_model, start_ids
from core.model.tokenizer import EOS_ID, UNK_ID, CharTokenizer

TOKENIZER = CharTokenizer.from_text("abc def\n")


@pytest.mark.parametrize("seed", range(20))
def test_the_ids_are_the_last_context_length_of_the_whole_texts_ids(seed):
    rng = random.Random(seed)
    L = rng.randint(1, 12)
    text = "".join(rng.choice("abc def\nz€") for _ in range(rng.randint(0, 30)))  # 'z', '€' are unseen
    enc = encode_for_model(TOKENIZER, text, L)
    reference = TOKENIZER.encode(text)[-L:] if text else []
    assert list(enc.ids) == reference
    assert enc.original_length == len(TOKENIZER.encode(text)) and enc.dropped == max(0, len(text) - L)
    assert enc.truncated == (len(text) > L) and enc.empty == (not text)
    assert TOKENIZER.decode(enc.ids) == TOKENIZER.decode(reference)
    assert enc.unknown_positions == tuple(t for t, i in enumerate(reference) if i == UNK_ID)


def test_a_text_longer_than_the_context_keeps_its_end_not_its_start():
    enc = encode_for_model(TOKENIZER, "aaaa" + "bcd", 3)
    assert enc.text == "bcd" and enc.pieces == ("b", "c", "d") and enc.dropped == 4


@pytest.mark.parametrize(
    "n, room, window",
    [(110, 24, 104), (104, 24, 104), (128, 24, 104), (200, 24, 104), (200, 0, 128), (200, 100, 64), (50, 100, 64)],
)
def test_room_cuts_to_the_context_window(n, room, window):
    """With room for a continuation the model reads prompt_window(L, room) tokens (hand values for L = 128): the ids,
    `window`, `truncated` and `dropped` all describe that cut, not the whole context."""
    text = "".join("abc def\n"[i % 8] for i in range(n))
    enc = encode_for_model(TOKENIZER, text, 128, room=room)
    assert enc.window == window and enc.context_length == 128
    assert list(enc.ids) == TOKENIZER.encode(text)[-window:] and enc.T == min(n, window)
    assert enc.truncated == (n > window) and enc.dropped == max(0, n - window) and enc.original_length == n
    assert enc.text == text[max(0, n - window) :]


def test_bad_room_or_context_is_refused():
    for L, room in ((0, 0), (True, 0), (128, -1), (128, 1.5)):
        with pytest.raises(ValueError, match="context_length|room"):
            encode_for_model(TOKENIZER, "abc", L, room=room)


def test_an_empty_prompt_starts_from_eos():
    assert start_ids([]) == [EOS_ID] and start_ids((5, 6)) == [5, 6] and start_ids([True]) == [1]
