"""The Tokenizer and architecture page (AppTest): the vocabulary, a text as ids and back, and the loaded
model's parts revealed after a prediction, every figure checked against core."""

from pathlib import Path

from core.model.architecture import architecture
from core.model.bundle import load_bundle
from tests.apptest import open_page, table

SHIPPED = load_bundle(Path(__file__).resolve().parents[2] / "models" / "default")


def test_the_vocabulary_and_a_text_with_an_unseen_character():
    at = open_page("anatomy")
    vocab = table(at, "code point")
    assert len(vocab) == SHIPPED.tokenizer.vocab_size
    assert list(vocab["token"][:4]) == ["<pad>", "<bos>", "<eos>", "<unk>"]
    at.text_area(key="anatomy_text").input("é=1").run()
    ids = table(at, "seen in training")
    assert list(ids["id"]) == SHIPPED.tokenizer.encode("é=1")
    assert list(ids["seen in training"]) == ["no: <unk>", "yes", "yes"]
    assert at.code[0].value == SHIPPED.tokenizer.decode(SHIPPED.tokenizer.encode("é=1"))
    assert any("U+00E9" in w.value for w in at.warning)  # the unseen character is named


def test_the_parts_are_revealed_only_after_a_prediction_and_add_up():
    at = open_page("anatomy")
    assert not any("part" in d.value.columns for d in at.dataframe)
    at.radio(key="anatomy_prediction").set_value(at.radio(key="anatomy_prediction").options[1]).run()
    assert any(e.value.startswith("Not quite") for e in at.error)
    parts = table(at, "shape out")
    want = architecture(SHIPPED.model)
    assert list(parts["part"]) == [p.name for p in want]
    assert list(parts["parameters"]) == [p.parameters for p in want]
    assert parts["parameters"].sum() == SHIPPED.model.num_parameters()
    assert parts["shape out"].iloc[-1] == f"1 × 128 × {SHIPPED.tokenizer.vocab_size}"
