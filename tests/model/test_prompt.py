"""core.model.prompt.encode_for_model against the plain rule written without it: encode the whole text with
the tokenizer, keep the last context_length ids."""

import random

import pytest

from core.model.prompt import encode_for_model
from core.model.tokenizer import UNK_ID, CharTokenizer

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
