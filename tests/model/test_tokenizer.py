"""core.model.tokenizer: special ids, round trips (hypothesis), unknown characters, persistence."""

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.model.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, CharTokenizer

CORPUS = "def add(a, b):\n\treturn a + b  # sum\nÉté: 42 €\n"
COVERED = sorted(set(CORPUS))


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_text(CORPUS)


def test_special_tokens_come_first_then_sorted_corpus_characters(tok):
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert tok.pieces[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert tok.pieces[4:] == sorted(set(CORPUS), key=ord)
    assert tok.vocab_size == 4 + len(set(CORPUS))


def test_encode_by_hand():
    tok = CharTokenizer.from_text("cab")  # ids: a=4, b=5, c=6
    assert tok.encode("abc") == [4, 5, 6]
    assert tok.encode("cab", add_bos=True) == [1, 6, 4, 5]
    assert tok.encode("b", add_bos=True, add_eos=True) == [1, 5, 2]
    assert tok.encode("axb") == [4, 3, 5]  # 'x' is unseen -> <unk> (3)
    assert tok.encode("") == []


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=COVERED, max_size=80))
def test_decode_encode_round_trips_covered_text(s):
    tok = CharTokenizer.from_text(CORPUS)
    assert tok.decode(tok.encode(s)) == s
    assert tok.decode(tok.encode(s, add_bos=True, add_eos=True)) == s
    assert tok.unknown_chars(s) == []


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_unicode_string_encodes_and_unseen_chars_become_unk(s):
    tok = CharTokenizer.from_text(CORPUS)
    ids = tok.encode(s)
    assert len(ids) == len(s)
    assert all(0 <= i < tok.vocab_size for i in ids)
    covered = set(CORPUS)
    assert [i == UNK_ID for i in ids] == [c not in covered for c in s]
    expected_unknown = []
    for c in s:
        if c not in covered and c not in expected_unknown:
            expected_unknown.append(c)
    assert tok.unknown_chars(s) == expected_unknown


def test_decode_special_tokens(tok):
    h, i = tok.encode("de")
    ids = [BOS_ID, h, UNK_ID, i, EOS_ID, PAD_ID]
    assert tok.decode(ids) == "d\ufffde"
    assert tok.decode(ids, skip_special=False) == "<bos>d<unk>e<eos><pad>"


def test_decode_rejects_ids_outside_the_vocabulary(tok):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([-1])
    with pytest.raises(ValueError, match="integers"):
        tok.decode([1.0])


def test_encode_rejects_non_strings(tok):
    with pytest.raises(TypeError):
        tok.encode(b"bytes")


def test_display_piece_makes_whitespace_and_specials_visible():
    tok = CharTokenizer.from_text("a \n\t\u00a0")
    shown = {tok.pieces[i]: tok.display_piece(i) for i in range(4, tok.vocab_size)}
    assert shown == {"\t": "→", "\n": "↵", " ": "␣", "\u00a0": "U+00A0", "a": "a"}
    assert [tok.display_piece(i) for i in range(4)] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert tok.pieces[tok.encode(" ")[0]] == " "  # the piece itself stays the real character


def test_to_dict_from_dict_round_trip_through_json(tok):
    rebuilt = CharTokenizer.from_dict(json.loads(json.dumps(tok.to_dict())))
    assert rebuilt == tok
    assert rebuilt.pieces == tok.pieces
    assert rebuilt.encode(CORPUS) == tok.encode(CORPUS)
    assert rebuilt.content_hash == tok.content_hash


def test_content_hash_is_sha256_of_the_canonical_vocabulary():
    tok = CharTokenizer.from_text("ba")
    canonical = (
        '{"chars":["a","b"],"format":"attention-lab/char-tokenizer",'
        '"special_tokens":["<pad>","<bos>","<eos>","<unk>"],"version":1}'
    )
    assert tok.content_hash == hashlib.sha256(canonical.encode()).hexdigest()
    assert CharTokenizer.from_text("abab").content_hash == tok.content_hash  # same character set
    assert CharTokenizer.from_text("abc").content_hash != tok.content_hash


def _valid():
    return CharTokenizer.from_text("ab").to_dict()


@pytest.mark.parametrize(
    "broken",
    [
        "not a dict",
        {k: v for k, v in _valid().items() if k != "chars"},
        {**_valid(), "extra": 1},
        {**_valid(), "format": "bpe"},
        {**_valid(), "version": 2},
        {**_valid(), "special_tokens": ["<bos>", "<pad>", "<eos>", "<unk>"]},
        {**_valid(), "chars": "ab"},
        {**_valid(), "chars": ["b", "a"]},
        {**_valid(), "chars": ["a", "a"]},
        {**_valid(), "chars": ["ab"]},
        {**_valid(), "chars": [1, 2]},
        {**_valid(), "chars": []},
    ],
)
def test_from_dict_rejects_malformed_descriptions(broken):
    with pytest.raises(ValueError):
        CharTokenizer.from_dict(broken)


def test_from_text_rejects_an_empty_corpus():
    with pytest.raises(ValueError, match="empty"):
        CharTokenizer.from_text("")
