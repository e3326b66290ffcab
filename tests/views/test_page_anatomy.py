"""The Tokenizer and architecture page (AppTest): the vocabulary, a text as ids and back, and the loaded
model's parts revealed after a prediction, every figure checked against core."""

from pathlib import Path

from core.model.architecture import architecture
from core.model.bundle import load_bundle
from tests.apptest import all_text, decode, open_page, picture_figures, table

SHIPPED = load_bundle(Path(__file__).resolve().parents[2] / "models" / "default")


def test_the_page_opens_on_its_texts_ids_with_the_unseen_character_as_a_lesson_not_a_warning():
    """The default text's é is the lesson's own case: a labelled callout, never a warning box (issue 25)."""
    at = open_page("anatomy")
    text = at.text_area(key="anatomy_text").value
    ids = SHIPPED.tokenizer.encode(text)
    assert ids[-1] == 3 and 3 not in ids[:-1]
    [fig] = picture_figures(at)
    cells = next(t for t in fig["data"] if t["type"] == "heatmap")
    shown = [int(v) for row in cells["text"] for v in row if v]  # the ids written in the cells, in reading order
    assert shown == ids
    kinds = [v for row in decode(cells["z"]).tolist() for v in row if v == v]  # one value per cell, NaN left out
    assert len(kinds) == len(ids) and set(kinds[:-1]) == {kinds[0]} != {kinds[-1]}  # one colour; the é stands out
    assert not at.warning and not at.error
    assert "What goes wrong: a character the model never saw" in all_text(at)
    assert "é (U+00E9)" in all_text(at)


def test_no_trace_of_the_picture_draws_an_id_as_a_length():
    """An id is a name, not an amount (issue 38): no bars, and no axis position carries the ids' values."""
    at = open_page("anatomy")
    ids = SHIPPED.tokenizer.encode(at.text_area(key="anatomy_text").value)
    [fig] = picture_figures(at)
    assert not any(t["type"] in ("bar", "histogram", "funnel", "waterfall") for t in fig["data"])
    for trace in fig["data"]:
        for axis in ("x", "y"):
            values = decode(trace.get(axis, [])).tolist()
            assert sorted(values) != sorted(ids), f"{trace['type']} places the ids along {axis}"


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
    assert any("U+00E9" in w.value for w in at.warning)  # the reader's own unseen character: a warning
    assert "What goes wrong" not in all_text(at)


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
