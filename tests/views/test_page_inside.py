"""The Inside the model page (AppTest): one picture of the loaded model's forward pass, its table and summary, what
each layer would predict and every stage's numbers, all checked against core.model.forward_trace on the shipped
model (whose last-layer prediction tests/model/test_forward_trace.py holds to the model's real output)."""

from pathlib import Path

import pytest
from apptest import all_text, decode, open_page, picture_figures, table, unescaped

from core.model.bundle import load_bundle
from core.model.forward_trace import top_choices, trace_forward
from core.model.prompt import encode_for_model

SHIPPED = load_bundle(Path(__file__).resolve().parents[2] / "models" / "default")

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")  # st.cache_* is shared across AppTests


def traced(text: str):
    enc = encode_for_model(SHIPPED.tokenizer, text, SHIPPED.config.context_length)
    return enc, trace_forward(SHIPPED.model, enc.ids)


def test_the_picture_table_and_summary_show_the_models_own_pass():
    at = open_page("inside")
    text = at.text_input(key="inside_text").value
    enc, trace = traced(text)
    L = SHIPPED.config.n_layer
    [fig] = picture_figures(at)
    cells = [row[0] for row in fig["data"][0]["text"]]  # the text → ids column: one cell per character
    assert [int(c.rsplit(" ", 1)[1]) for c in cells] == list(enc.ids)
    bars = fig["data"][-1]
    (best, p), *_ = top_choices(trace.probs, 1)
    assert decode(bars["x"])[0] == pytest.approx(p, abs=1e-12)
    flow = table(at, "would predict")
    assert list(flow["stage"]) == ["text → ids", "embedding", *(f"block {b}" for b in range(L)), "final norm",
                                   "next character"]  # fmt: skip
    probs = [round(float(trace.layer_probs[r].max()), 4) for r in range(L + 1)]
    assert list(flow["with probability"][1 : L + 2]) == probs
    assert list(flow["with probability"])[-1] == round(p, 4)
    piece = SHIPPED.tokenizer.display_piece(best)
    assert f"predicts '{piece}' next with probability {p:.2f}" in unescaped(all_text(at))


def test_the_layer_by_layer_table_is_the_lens_and_ends_at_the_models_prediction():
    at = open_page("inside", {"inside_text": "for i in range("})
    _, trace = traced("for i in range(")
    lens = table(at, "probability")
    top = [i for i, _ in top_choices(trace.probs, 8)]
    stopped = list(dict.fromkeys(lens["stopped"]))
    assert stopped == ["after the embedding", *(f"after block {b}" for b in range(SHIPPED.config.n_layer))]
    last = [float(v) for v in lens[lens["stopped"] == stopped[-1]]["probability"]]  # printed to 6 decimals
    assert last == pytest.approx([float(trace.probs[i]) for i in top], abs=1e-6)


def test_every_stage_steps_with_its_numbers_its_outline_and_its_lesson():
    at = open_page("inside")
    options = at.selectbox(key="inside_stage").options
    assert len(options) == SHIPPED.config.n_layer + 5  # every stage at once, then each stage
    for k, option in enumerate(options[1:]):
        at.selectbox(key="inside_stage").set_value(option).run()
        assert not at.exception, (option, [e.value for e in at.exception])
        [fig] = picture_figures(at)
        assert len(fig["layout"].get("shapes", [])) == 1, option  # the current stage is outlined
        later = [t.get("opacity", 1) for t in fig["data"][-1:]]
        assert later == ([1] if k == len(options) - 2 else [pytest.approx(0.15)]), option  # later stages dimmed
        assert at.subheader[0].value.startswith(f"Stage {k + 1}:")
    links = " ".join(str(link.proto) for link in at.get("page_link"))
    assert "Temperature" in links  # the last stage opens the last softmax's lesson
    at.selectbox(key="inside_stage").set_value(options[3]).run()  # block 0
    hidden = table(at, "unit")
    _, trace = traced(at.text_input(key="inside_text").value)
    assert hidden["value"].tolist() == pytest.approx(trace.blocks[0].mlp_hidden[-1].tolist(), abs=1e-4)
    assert "Read one row" in " ".join(str(link.proto) for link in at.get("page_link"))


@pytest.mark.parametrize("text", ["", "é" * 64, "<b>x</b> [a](javascript:alert(1))"])
def test_hostile_text_is_shown_as_data_with_no_exception(text):
    at = open_page("inside", {"inside_text": text})
    assert not at.exception
    [fig] = picture_figures(at)
    assert all("<b>" not in row[0] for row in fig["data"][0]["text"])  # Plotly would read it as markup
