"""core.model.corpus: the pinned stdlib corpus, text files cut into documents, the split, and every refusal."""

import hashlib
import json
import lzma
import platform
import sysconfig
from pathlib import Path

import pytest

from core.model import corpus as corpus_mod
from core.model.corpus import (
    MAX_BYTES,
    MAX_CHARACTERS,
    STDLIB_MODULES,
    Corpus,
    CorpusError,
    Document,
    check_split_size,
    corpus_from_text,
    fingerprint,
    load_corpus,
    split_documents,
    split_text,
)

ROOT = Path(__file__).resolve().parents[2]
PARAGRAPHS = "\n\n".join(f"paragraph {i}: " + "word " * (20 + i % 7) for i in range(60))


@pytest.fixture(scope="module")
def stdlib():
    return load_corpus("stdlib")


def test_pinned_modules_are_sorted_unique_and_exist_on_every_supported_python():
    assert list(STDLIB_MODULES) == sorted(set(STDLIB_MODULES))
    assert 180 <= len(STDLIB_MODULES) <= 240  # "about two hundred modules"
    assert "shlex.py" not in STDLIB_MODULES  # left out for its Latin-1 table (the comment above the list)
    root = Path(sysconfig.get_paths()["stdlib"])
    missing = [m for m in STDLIB_MODULES if not (root / m).is_file()]
    assert missing == []  # so the snapshot can be taken again on 3.11, 3.12 or 3.13


def test_stdlib_corpus_is_one_document_per_module(stdlib):
    assert [d.name for d in stdlib.documents] == list(STDLIB_MODULES)
    assert stdlib.source == "stdlib"
    assert 4_500_000 <= stdlib.num_chars <= 7_500_000  # "about 6 MB"
    assert "def " in stdlib.text and "import " in stdlib.text


@pytest.mark.skipif(platform.python_version() != "3.11.7", reason="the snapshots hold CPython 3.11.7's text")
@pytest.mark.parametrize("source", ["stdlib", "pydoc"])
def test_the_snapshots_hold_exactly_the_text_of_the_interpreter_they_were_taken_from(source):
    assert load_corpus(source) == corpus_mod.interpreter_corpus(source)


@pytest.mark.parametrize("bundle, source", [("default", "stdlib"), ("prose", "pydoc")])
def test_the_shipped_bundles_were_trained_on_the_shipped_snapshots_on_every_python(bundle, source):
    manifest = json.loads((ROOT / "models" / bundle / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["corpus"] == {"source": source, "fingerprint": load_corpus(source).fingerprint}


def test_a_damaged_or_missing_snapshot_is_refused_with_a_message(tmp_path):
    good = load_corpus("pydoc")
    moved = Corpus(good.documents[:-1], corpus_mod.fingerprint(good.documents[:-1]), "pydoc")
    corpus_mod.write_snapshot(moved, tmp_path)
    assert corpus_mod.load_snapshot("pydoc", tmp_path) == moved  # a consistent snapshot loads
    path = tmp_path / "pydoc.json.xz"
    with lzma.open(path) as f:
        data = json.loads(f.read())
    data["documents"][0][1] += "x"  # one character edited: the recorded fingerprint no longer holds
    with lzma.open(path, "wb") as f:
        f.write(json.dumps(data).encode())
    with pytest.raises(CorpusError, match="does not match its fingerprint"):
        corpus_mod.load_snapshot("pydoc", tmp_path)
    path.write_bytes(b"not xz")
    with pytest.raises(CorpusError, match="cannot be read"):
        corpus_mod.load_snapshot("pydoc", tmp_path)
    with pytest.raises(CorpusError, match="cannot be read"):
        corpus_mod.load_snapshot("stdlib", tmp_path / "nowhere")


def test_a_snapshot_json_would_choke_on_is_refused_as_damaged(tmp_path):
    """The snapshot is read by the one bounded JSON reader: nesting that made json.loads raise RecursionError (no
    CorpusError, no message) and a NaN are refused as a damaged snapshot."""
    for text, why in (("[" * 100_000 + "]" * 100_000, "nested 100,000 levels deep"), ('{"fingerprint": NaN}', "NaN")):
        with lzma.open(tmp_path / "pydoc.json.xz", "wb") as f:
            f.write(text.encode())
        with pytest.raises(CorpusError, match=f"is damaged \\(.*{why}.*\\); reinstall the lab"):
            corpus_mod.load_snapshot("pydoc", tmp_path)


def test_the_module_docstring_claims_hold(stdlib):
    doc = " ".join(corpus_mod.__doc__.split())
    assert "about two hundred modules" in doc and "(about 6 MB)" in doc
    assert abs(stdlib.num_chars / 1e6 - 6) <= 1 and abs(len(stdlib.documents) - 200) <= 40
    # "nearly all ASCII": a handful of characters in a handful of modules, so the vocabulary stays small
    outside = [c for c in stdlib.text if ord(c) > 127]
    assert len(outside) <= 100 and len(outside) / stdlib.num_chars < 1e-4
    assert sum(any(ord(c) > 127 for c in d.text) for d in stdlib.documents) <= 10
    assert len(set(stdlib.text)) <= 110  # the tokenizer's characters: printable ASCII, whitespace, those few


def test_fingerprint_matches_an_independent_sha256_and_is_stable(stdlib):
    h = hashlib.sha256()
    for doc in stdlib.documents:
        for field in (doc.name, doc.text):
            b = field.encode("utf-8")
            h.update(len(b).to_bytes(8, "big") + b)
    assert stdlib.fingerprint == h.hexdigest()
    assert load_corpus("stdlib").fingerprint == stdlib.fingerprint


def test_fingerprint_changes_with_text_name_and_boundaries():
    base = (Document("a", "xy"), Document("b", "z"))
    assert fingerprint(base) != fingerprint((Document("a", "xy"), Document("b", "Z")))
    assert fingerprint(base) != fingerprint((Document("a", "xy"), Document("c", "z")))
    assert fingerprint(base) != fingerprint((Document("a", "x"), Document("b", "yz")))  # moved boundary


def test_corpus_refuses_a_fingerprint_that_does_not_match():
    docs = (Document("a", "xy"), Document("b", "z"))
    with pytest.raises(CorpusError, match="fingerprint"):
        Corpus(docs, "0" * 64, "hand")


def test_text_file_is_cut_into_documents_that_rebuild_it(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text(PARAGRAPHS, encoding="utf-8")
    c = load_corpus(path)
    assert c.text == PARAGRAPHS
    assert len(c.documents) >= 2
    assert c.source == str(path)
    assert [d.name for d in c.documents] == [f"notes.txt#{i}" for i in range(len(c.documents))]
    # cuts fall on blank-line boundaries: every document but the last ends with a blank line
    assert all(d.text.endswith("\n\n") for d in c.documents[:-1])


def test_long_text_documents_stay_near_the_target_size():
    text = "\n\n".join("x" * 300 for _ in range(200))  # ~60 kB of paragraphs
    pieces = split_text(text, target=4000)
    assert "".join(pieces) == text
    assert all(4000 <= len(p) <= 8000 for p in pieces[:-1])


def test_a_text_without_blank_lines_or_newlines_still_splits():
    text = "abcdefghij" * 50
    pieces = split_text(text)
    assert "".join(pieces) == text and len(pieces) >= 2


def test_two_characters_make_two_documents_and_one_is_refused():
    assert [d.text for d in corpus_from_text("t", "ab").documents] == ["a", "b"]
    with pytest.raises(CorpusError, match="too little"):
        corpus_from_text("t", "a")


def test_upload_accepts_bytes_and_str_alike_and_normalises_line_ends():
    from_bytes = corpus_from_text("up.txt", ("\ufeff" + PARAGRAPHS.replace("\n", "\r\n")).encode("utf-8"))
    from_str = corpus_from_text("up.txt", PARAGRAPHS)
    assert from_bytes.fingerprint == from_str.fingerprint
    assert from_str.source == "upload:up.txt"


def test_split_is_by_document_deterministic_disjoint_and_complete(stdlib):
    train, val = split_documents(stdlib, val_fraction=0.1, seed=0)
    assert split_documents(stdlib, val_fraction=0.1, seed=0) == (train, val)
    names_train, names_val = {d.name for d in train}, {d.name for d in val}
    assert names_train.isdisjoint(names_val)
    assert names_train | names_val == set(STDLIB_MODULES)
    assert len(val) == round(0.1 * len(STDLIB_MODULES))
    assert all(d in stdlib.documents for d in val)  # whole documents, never pieces of one
    other = split_documents(stdlib, val_fraction=0.1, seed=1)[1]
    assert {d.name for d in other} != names_val  # the seed matters


def test_split_keeps_at_least_one_document_on_each_side():
    c = corpus_from_text("t", "ab")
    for fraction in (0.01, 0.99):
        train, val = split_documents(c, val_fraction=fraction)
        assert len(train) == 1 and len(val) == 1


def test_empty_file_is_refused(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    with pytest.raises(CorpusError, match="empty"):
        load_corpus(path)
    with pytest.raises(CorpusError, match="empty"):
        corpus_from_text("blank.txt", "  \n\n \t\n")


def test_non_utf8_bytes_are_refused_with_their_offset(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"caf" + b"\xe9 au lait")
    with pytest.raises(CorpusError, match=r"offset 3") as err:
        load_corpus(path)
    assert "UTF-8" in str(err.value) and "0xe9" in str(err.value)


def test_too_large_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_mod, "MAX_BYTES", 100)
    path = tmp_path / "big.txt"
    path.write_text("x" * 101)
    with pytest.raises(CorpusError, match="more than the limit"):
        load_corpus(path)
    with pytest.raises(CorpusError, match="smaller excerpt"):
        corpus_from_text("big.txt", b"x" * 101)
    assert MAX_BYTES == 20 * 1024 * 1024


def distinct(n: int) -> str:
    """A text of exactly n distinct characters (a newline among them), in paragraphs, as an upload could be."""
    chars = [chr(0x10000 + i) for i in range(n - 1)]  # past the surrogates: every one a valid character
    return "\n\n".join("".join(chars[i : i + 500]) for i in range(0, len(chars), 500))


def test_more_distinct_characters_than_a_vocabulary_holds_are_refused_before_training(tmp_path):
    """Issue 35: 70,005 distinct characters passed the upload check and failed after Start ("vocab_size must be
    <= 65536"). The limit is the model's, less the special tokens; a text at it gives a vocabulary the model takes."""
    from core.model.gpt import MAX_VOCAB, preset
    from core.model.tokenizer import CharTokenizer

    with pytest.raises(CorpusError) as err:
        corpus_from_text("many.txt", distinct(70_005).encode("utf-8"))
    said = str(err.value)
    assert "70,005 distinct characters" in said and f"at most {MAX_CHARACTERS:,}" in said, said
    path = tmp_path / "many.txt"
    path.write_text(distinct(MAX_CHARACTERS + 1), encoding="utf-8")
    with pytest.raises(CorpusError, match=f"{MAX_CHARACTERS + 1:,} distinct characters"):
        load_corpus(path)  # the command line's --corpus FILE too
    at_limit = corpus_from_text("limit.txt", distinct(MAX_CHARACTERS))
    vocab = CharTokenizer.from_text(at_limit.text).vocab_size
    assert vocab == MAX_VOCAB
    preset("tiny", vocab)  # the model's config takes it (it refuses one more)


def test_missing_file_and_directory_are_refused(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope.txt")
    with pytest.raises(CorpusError, match="not a regular file"):
        load_corpus(tmp_path)


def test_corpus_too_small_for_the_context_names_the_numbers():
    check_split_size(33, 33, 32)  # exactly one window each: fine
    with pytest.raises(CorpusError, match=r"validation documents hold 32 tokens and need at least 33"):
        check_split_size(1000, 32, 32)
    with pytest.raises(CorpusError, match=r"training documents"):
        check_split_size(10, 1000, 32)


def test_every_corpus_error_is_a_value_error():
    assert issubclass(CorpusError, ValueError)
