"""core.model.prompt: the context window by hand (prompt_window, window_start), and the one constructor of a Prompt,
encode_for_model, against the plain rule written without it: apply the template, encode the whole text with the
tokenizer, keep the last context_length ids (or the last prompt_window(L, room) with room for a continuation); an
empty text reads <eos>."""

import random

import pytest

from core.model.prompt import encode_for_model, prompt_window, start_ids, window_start
from core.model.tokenizer import EOS_ID, UNK_ID, CharTokenizer

TOKENIZER = CharTokenizer.from_text("abc def\n")


@pytest.mark.parametrize("seed", range(20))
def test_the_ids_are_the_last_context_length_of_the_whole_texts_ids(seed):
    rng = random.Random(seed)
    L = rng.randint(1, 12)
    text = "".join(rng.choice("abc def\nz€") for _ in range(rng.randint(0, 30)))  # 'z', '€' are unseen
    enc = encode_for_model(TOKENIZER, text, L)
    reference = TOKENIZER.encode(text)[-L:] if text else []
    assert list(enc.ids) == (reference or [EOS_ID])  # an empty text reads <eos>, a document start
    assert enc.n_tokens == len(TOKENIZER.encode(text)) and enc.dropped == max(0, len(text) - L)
    assert enc.truncated == (len(text) > L) and enc.empty == (not text)
    assert TOKENIZER.decode(reference) == enc.kept_text.replace("z", "\ufffd").replace("€", "\ufffd")
    assert enc.unknown_positions == tuple(t for t, i in enumerate(reference) if i == UNK_ID)
    assert enc.unseen == len(enc.unknown_positions) and enc.T == len(enc.ids) == len(enc.pieces)


def test_a_text_longer_than_the_context_keeps_its_end_not_its_start():
    enc = encode_for_model(TOKENIZER, "aaaa" + "bcd", 3)
    assert enc.kept_text == "bcd" and enc.pieces == ("b", "c", "d") and enc.dropped == 4
    assert enc.text == enc.model_text == "aaaabcd"  # the text as given, before the cut


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
    assert enc.truncated == (n > window) and enc.dropped == max(0, n - window) and enc.n_tokens == n
    assert enc.kept_text == text[max(0, n - window) :]


def test_bad_room_or_context_is_refused():
    for L, room in ((0, 0), (True, 0), (128, -1), (128, 1.5)):
        with pytest.raises(ValueError, match="context_length|room"):
            encode_for_model(TOKENIZER, "abc", L, room=room)


def test_an_empty_prompt_starts_from_eos():
    assert start_ids([]) == [EOS_ID] and start_ids((5, 6)) == [5, 6] and start_ids([True]) == [1]
    enc = encode_for_model(TOKENIZER, "", 32)
    assert enc.empty and enc.ids == (EOS_ID,) and enc.pieces == ("<eos>",) and enc.kept_text == ""
    assert not enc.truncated and enc.dropped == 0 and enc.unknown_chars == ()


# ---- what the serving path reads: the template, cut and unseen characters (from tests/release/test_autocomplete) --

TEXT = "def main(x):\n    return x + 1\n\nimport os\nclass Point:\n    pass\n"
TOK = CharTokenizer.from_text(TEXT)


def test_long_prompts_are_cut_to_the_context_and_unknown_characters_reported():
    L = 32
    text = "é" + "x + 1 " * 8 + "€"  # 50 characters; é falls in the cut part, € stays
    prompt = encode_for_model(TOK, text, L)
    assert prompt.truncated and prompt.n_tokens == len(text) and prompt.dropped == len(text) - L
    assert list(prompt.ids) == TOK.encode(text)[-L:]
    assert prompt.unknown_chars == ("€",)  # what the model sees; the é was cut before it
    assert prompt.ids[-1] == UNK_ID and prompt.pieces[-1] == "<unk>"
    assert prompt.pieces == tuple("␣" if c == " " else "<unk>" if c == "€" else c for c in text[-L:])

    short = encode_for_model(TOK, "x€s€", L)
    assert not short.truncated and short.dropped == 0 and short.unknown_chars == ("€",) and short.unseen == 2
    assert list(short.ids) == [TOK.encode("x")[0], UNK_ID, TOK.encode("s")[0], UNK_ID]


def test_the_template_is_applied_before_the_cut():
    """The template's own characters count as the model reads them: the cut is made on the templated text."""
    prompt = encode_for_model(TOK, "main", 32, template="# {prompt}")
    assert prompt.text == "main" and prompt.model_text == "# main" and list(prompt.ids) == TOK.encode("# main")
    long = encode_for_model(TOK, "x" * 40, 32, template="# {prompt}")
    assert long.n_tokens == 42 and long.dropped == 10 and long.kept_text == "x" * 32
    assert encode_for_model(TOK, "", 32, template="# {prompt}").ids == tuple(TOK.encode("# "))  # not empty
    for template in ("# no slot", None, 3):
        with pytest.raises(ValueError, match="template must be a str containing"):
            encode_for_model(TOK, "def", 32, template=template)
    with pytest.raises(ValueError, match="text must be a str"):
        encode_for_model(TOK, None, 32)


# ---- the context window ---------------------------------------------------------------------


def test_prompt_window_by_hand():
    """The context window: context_length - room, never below half the context, at least one token."""
    assert prompt_window(128, 24) == 104  # the shipped model before a suggestion of up to 24 characters
    assert prompt_window(128, 100) == 64  # half the context, not 28
    assert prompt_window(128) == prompt_window(128, 0) == 128  # one next-token read: the whole context
    assert prompt_window(1) == prompt_window(1, 5) == 1
    assert prompt_window(3, 2) == 1 and prompt_window(32, 24) == 16
    for L, room in ((0, 0), (True, 0), (1.5, 0), ("128", 0), (128, -1), (128, True), (128, 2.0), (128, None)):
        with pytest.raises(ValueError, match="context_length|room"):
            prompt_window(L, room)


def test_window_start_cuts_to_the_last_window_tokens():
    assert window_start(200, 128) == 72 and window_start(128, 128) == 0 and window_start(0, 128) == 0
    assert window_start(110, 128, 24) == 6 and window_start(104, 128, 24) == 0 and window_start(200, 128, 100) == 136
    ids = list(range(200))
    for n in (0, 1, 64, 104, 105, 128, 129, 200):
        for room in (0, 24, 100):
            kept = ids[:n][window_start(n, 128, room) :]
            assert kept == ids[:n][len(ids[:n]) - min(n, prompt_window(128, room)) :]  # the last min(n, window)
    for bad in (-1, True, 2.5):
        with pytest.raises(ValueError, match="n_tokens"):
            window_start(bad, 128)
