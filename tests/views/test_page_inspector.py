"""The attention inspector draws the model's own weights for every layer and head, enlarges the chosen one,
and its hand check of one row agrees with the model within the declared tolerance. Expected values come
from a reference built from the raw weight matrices (tests/references.py)."""

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from apptest import all_text, decode, figure, figures, open_page, predict, unescaped
from references import reference_qkv, reference_weights
from streamlit.testing.v1 import AppTest

from core.agreement import allowance, model_terms

LABEL = "test bundle (tiny)"
DEFAULT_TEXT = "def add(a, b): return a + b"
NO_SINGLE_KEY = "no single key: the largest weights are too close to tell apart"

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")  # st.cache_* is shared across AppTests


def open_inspector(path, query=None) -> AppTest:
    """The inspector with the test bundle added to this session and selected in the sidebar."""
    return open_page("inspector", query, bundle=(LABEL, path))


def answer_options(at) -> list[str]:
    """The question's options as the reader sees them: a radio's come escaped for markdown, a selectbox's (a
    question of many keys, ui.predict) as plain text."""
    radios = [r for r in at.radio if r.key == "insp_predict_answer"]
    if radios:
        return [unescaped(o) for o in radios[0].options]
    return list(at.selectbox(key="insp_predict_answer").options)


def reveal(at) -> AppTest:
    """Answer the page's prediction with its first option (right or wrong, both reveal sections 2 and 3). AppTest
    lists a radio's options as displayed (escaped for markdown) and sets it by the option itself."""
    return predict(at, "insp_predict", answer_options(at)[0])


def labels_of(tokenizer, ids) -> list[str]:
    return [f"{t} {tokenizer.display_piece(i)}" for t, i in enumerate(ids)]


def z_of(trace):
    """The cells as floats, None where masked (sent as NaN in float32, ui.charts.cells)."""
    return [[None if v is None or v != v else float(v) for v in row] for row in decode(trace["z"]).tolist()]


def assert_causal_weights(z, want):
    """Weights equal `want` (T, T) on and below the diagonal; the future cells are masked (None)."""
    T = len(want)
    assert len(z) == T
    for t in range(T):
        assert all(z[t][s] is None for s in range(t + 1, T))
        np.testing.assert_allclose(z[t][: t + 1], want[t][: t + 1], atol=1e-5, rtol=0)


def hand_difference(at) -> float:
    """The verdict's figure; its allowance must be a float64 one (well below float32's rounding)."""
    match = re.search(
        r"Largest difference between the hand computation and the model's attention code: (\S+) "
        r"\(allowance (\S+), float64\)",
        all_text(at),
    )
    assert match, all_text(at)
    difference, allowed = float(match.group(1)), float(match.group(2))
    assert 0 < allowed < 1e-10 and difference <= allowed
    return difference


@pytest.mark.numerics
def test_grid_shows_every_layer_and_head_with_the_models_weights(trained_bundle_path, trained_bundle):
    at = open_inspector(trained_bundle_path)
    model, ids = trained_bundle.model, trained_bundle.tokenizer.encode(DEFAULT_TEXT)
    L, H = model.config.n_layer, model.config.n_head
    fig = figure(at, "attention weights of every layer")
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert titles == ["<b>layer 0, head 0</b>", "layer 0, head 1", "layer 1, head 0", "layer 1, head 1"]
    assert [(s["xref"], s["yref"]) for s in fig["layout"]["shapes"]] == [("x domain", "y domain")]  # outlined
    assert len(fig["data"]) == L * H
    for i, trace in enumerate(fig["data"]):
        layer, head = divmod(i, H)
        assert_causal_weights(z_of(trace), reference_weights(model, ids, layer, head).tolist())
        assert trace["hovertemplate"].startswith(f"layer {layer}, head {head}<br>query %{{y}}<br>key %{{x}}<br>weight")
    assert decode(fig["data"][0]["x"]).tolist()[3] == "3 ␣"  # hover names keys by position and visible piece
    summary = at.dataframe[0].value
    assert list(zip(summary["layer"], summary["head"])) == [(0, 0), (0, 1), (1, 0), (1, 1)]


@pytest.mark.numerics
def test_enlarged_head_follows_the_selectors(trained_bundle_path, trained_bundle):
    at = reveal(open_inspector(trained_bundle_path))
    model, ids = trained_bundle.model, trained_bundle.tokenizer.encode(DEFAULT_TEXT)
    before = z_of(figure(at, "weights of layer 0, head 0")["data"][0])
    assert_causal_weights(before, reference_weights(model, ids, 0, 0).tolist())
    at.selectbox(key="insp_layer").set_value(1).run()
    at.selectbox(key="insp_head").set_value(1).run()
    assert not at.exception
    enlarged = figure(reveal(at), "weights of layer 1, head 1")["data"][0]
    after = z_of(enlarged)
    assert after != before
    assert_causal_weights(after, reference_weights(model, ids, 1, 1).tolist())
    assert "query %{y}<br>key %{x}<br>weight" in enlarged["hovertemplate"]
    grid = figure(at, "attention weights of every layer")["layout"]
    assert [a["text"] for a in grid["annotations"]][3] == "<b>layer 1, head 1</b>"
    assert [(s["xref"], s["yref"]) for s in grid["shapes"]] == [("x4 domain", "y4 domain")]  # the 4th map, outlined


@pytest.mark.numerics
def test_projected_the_grid_shows_the_chosen_layers_heads_without_frames(trained_bundle_path, trained_bundle):
    """Issue 38: projected, every layer's maps were specks and a black frame line crossed each map's title. The
    projected grid draws the layer chosen above, its heads only (larger; tests/e2e/test_projected_pairs.py measures
    them), with the model's weights, and no axis line on any map."""
    at = open_inspector(trained_bundle_path, {"insp_layer": "1", "insp_head": "1"})
    at.sidebar.toggle(key="projector").set_value(True).run()
    model, ids = trained_bundle.model, trained_bundle.tokenizer.encode(DEFAULT_TEXT)
    H = model.config.n_head
    fig = figure(at, "attention weights of layer 1")
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["layer 1, head 0", "<b>layer 1, head 1</b>"]
    assert [(s["xref"], s["yref"]) for s in fig["layout"]["shapes"]] == [("x2 domain", "y2 domain")]  # outlined
    assert len(fig["data"]) == H
    for head, trace in enumerate(fig["data"]):
        assert_causal_weights(z_of(trace), reference_weights(model, ids, 1, head).tolist())
        assert trace["hovertemplate"].startswith(f"layer 1, head {head}<br>")
    axes = [name for name in fig["layout"] if name.startswith(("xaxis", "yaxis"))]
    assert len(axes) == 2 * H and all(fig["layout"][name]["showline"] is False for name in axes), axes
    assert "Shown: layer 1's 2 heads" in all_text(at)


@pytest.mark.numerics
def test_hand_check_of_a_row_agrees_with_the_model_within_tolerance(trained_bundle_path, trained_bundle):
    at = open_inspector(trained_bundle_path, {"insp_layer": "1", "insp_head": "0"})
    model, ids = trained_bundle.model, trained_bundle.tokenizer.encode(DEFAULT_TEXT)
    T = len(ids)
    want = reference_weights(model, ids, 1, 0)
    labels = [f"{t} {trained_bundle.tokenizer.display_piece(i)}" for t, i in enumerate(ids)]
    assert at.selectbox(key="insp_row").value == labels[-1]  # the last query by default
    at.selectbox(key="insp_row").set_value(labels[6]).run()
    bars = figure(reveal(at), "weights of query 6")["data"][0]
    np.testing.assert_allclose(decode(bars["y"]).astype(float), want[6, :7].numpy(), atol=1e-5, rtol=0)
    hand = next(d.value for d in at.dataframe if "weight by hand" in d.value.columns)
    assert len(hand) == 7  # keys 0..6: the causal prefix
    # hand (float64 from the model's float32 q, k) against the float64 reference (q, k from float64 weights):
    # they differ by the float32 rounding of q and k, so the allowance is float32's, derived, not tuned
    np.testing.assert_allclose(
        hand["weight by hand"],
        want[6, :7].numpy(),
        rtol=0,
        atol=allowance(torch.float32, model.config.d_model + 2 * T, 1.0),
    )
    # the verdict column: core.attention on the same q, k, v in float64 equals the hand computation
    np.testing.assert_allclose(hand["weight by core.attention (float64)"], hand["weight by hand"], atol=1e-13, rtol=0)
    q, k, v, _ = reference_qkv(model, ids, 1, 0)
    np.testing.assert_allclose(hand["q·k (sum of D products)"], (k[:7] @ q[6]).numpy(), atol=1e-5, rtol=0)
    assert math.fsum(hand["weight by hand"]) == pytest.approx(1.0, abs=1e-12)
    assert "sum of the hand weights = 1.000000" in all_text(at)
    difference = hand_difference(at)
    shown = float(hand["|hand − model float32|"].max())
    assert shown <= allowance(torch.float32, model.config.d_model + 2 * T, 1.0)  # the float32 figure, shown
    assert difference == pytest.approx(
        float((hand["weight by core.attention (float64)"] - hand["weight by hand"]).abs().max()), rel=1e-6, abs=1e-18
    )
    assert "The model's attention for this row is the hand computation's." in all_text(at)
    # the row handed to the Read one row page: plain lists, the causal prefix of this head
    row = at.session_state["inspector_row"]
    assert (row["text"], row["layer"], row["head"], row["t"]) == (DEFAULT_TEXT, 1, 0, 6)
    assert all(type(x) is float for x in row["q"][0] + row["k"][3] + row["v"][6])
    np.testing.assert_allclose(row["q"], q[:7].numpy(), atol=1e-5, rtol=0)  # queries 0..t: row t is read
    np.testing.assert_allclose(row["k"], k[:7].numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(row["v"], v[:7].numpy(), atol=1e-5, rtol=0)
    assert row["pieces"] == [trained_bundle.tokenizer.display_piece(i) for i in ids[:7]]


def test_empty_text_gets_a_clear_message_and_no_charts(trained_bundle_path):
    at = open_inspector(trained_bundle_path)
    at.text_input(key="insp_text").set_value("").run()
    assert not at.exception
    assert "The text is empty" in all_text(at)
    assert figures(at) == []


def test_unseen_characters_are_listed_and_a_shorter_text_keeps_a_valid_row(trained_bundle_path):
    at = open_inspector(trained_bundle_path)
    at.selectbox(key="insp_row").set_value("20 n").run()
    at.text_input(key="insp_text").set_value("x = ü + ∑").run()
    assert not at.exception, [e.value for e in at.exception]
    text = all_text(at)
    assert "not in the training text and became `<unk>`" in text
    assert "ü (U+00FC)" in text and "∑ (U+2211)" in text
    assert at.selectbox(key="insp_row").value == "8 <unk>"  # the old row is gone: back to the last token
    hand_difference(reveal(at))


def expected_answer(row: list[float], labels: list[str], near: float) -> tuple[str, list[int]]:
    """The option the page must mark right for one row of reference weights, and the keys that lead: the key
    with the largest weight, or 'no single key' when others lie within `near` (the float32 allowance) of it. The
    reference is float64 and the page float32, so no key may sit within 1e-5 of the margin's edge (checked)."""
    top = max(row)
    assert all(abs((top - w) - near) > 1e-5 for w in row), "a key sits on the margin's edge"
    group = [s for s, w in enumerate(row) if w >= top - near]
    if len(group) == 1:
        return labels[group[0]], group
    return NO_SINGLE_KEY, group


def shows_the_head(at) -> bool:
    """Whether section 2's enlarged map or section 3's bars and hand table are on the page."""
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    return any(t.startswith("weights of") for t in titles) or any(
        "weight by hand" in d.value.columns for d in at.dataframe
    )


@pytest.mark.numerics
def test_the_prediction_hides_the_enlarged_head_and_the_row_until_checked_and_grades_against_the_reference(
    trained_bundle_path, trained_bundle
):
    """The last query of layer 1, head 1, whose favourite keys this barely trained model weighs within float32's
    allowance of each other: 'no single key' is right, any one key is wrong, both reveal, and the map and bars
    revealed are the reference's weights."""
    model, ids = trained_bundle.model, trained_bundle.tokenizer.encode(DEFAULT_TEXT)
    T, labels = len(ids), labels_of(trained_bundle.tokenizer, ids)
    near = allowance(torch.float32, model_terms(model.config), 1.0)
    want = reference_weights(model, ids, 1, 1)  # (T, T) float64
    row = want[T - 1].tolist()  # the last query sees every key
    answer, group = expected_answer(row, labels, near)
    assert len(group) > 1, "this fixture's last row has a near tie: the test covers the tie"
    query = {"insp_layer": "1", "insp_head": "1"}
    at = open_inspector(trained_bundle_path, query)
    assert figure(at, "attention weights of every layer") and not shows_the_head(at)  # the grid stays
    assert "Hint" in [e.label for e in at.expander]
    options = answer_options(at)
    assert options == [*labels, NO_SINGLE_KEY]  # every key, and the tie, for any row: the options tell nothing

    predict(at, "insp_predict", answer)
    text = unescaped(all_text(at))
    assert f"Right. You predicted '{answer}'" in text
    said = re.search(r"The model gives keys .+? weights ([0-9., ]+): each within", text).group(1).split(", ")
    assert [float(w) for w in said] == pytest.approx([row[s] for s in group], abs=1e-4)
    bars = figure(at, f"weights of query {labels[-1]} (layer 1, head 1)")["data"][0]
    np.testing.assert_allclose(decode(bars["y"]).astype(float), row, atol=1e-5, rtol=0)
    assert_causal_weights(z_of(figure(at, "weights of layer 1, head 1")["data"][0]), want.tolist())

    wrong = max(group, key=lambda s: row[s])  # the largest weight of all, but not by more than rounding explains
    at = predict(open_inspector(trained_bundle_path, query), "insp_predict", labels[wrong])
    text = unescaped(all_text(at))
    assert f"Not quite. You predicted '{labels[wrong]}'; the lab's answer is '{answer}'" in text
    assert shows_the_head(at), "a wrong prediction reveals the answer too"


@pytest.mark.numerics
def test_a_row_with_one_clear_favourite_is_graded_by_that_key(trained_bundle_path, trained_bundle):
    """Layer 0, head 0, row 3: one key leads by more than the allowance; choosing another row asks again."""
    model, ids = trained_bundle.model, trained_bundle.tokenizer.encode(DEFAULT_TEXT)
    labels = labels_of(trained_bundle.tokenizer, ids)
    near = allowance(torch.float32, model_terms(model.config), 1.0)
    want = reference_weights(model, ids, 0, 0)  # (T, T) float64
    row = want[3, :4].tolist()  # query 3 sees keys 0..3
    answer, group = expected_answer(row, labels, near)
    assert group == [int(want[3, :4].argmax())], "this row has one clear favourite"
    at = open_inspector(trained_bundle_path)
    at.selectbox(key="insp_row").set_value(labels[3]).run()
    assert not shows_the_head(at)
    assert answer_options(at) == [*labels[:4], NO_SINGLE_KEY]
    predict(at, "insp_predict", answer)
    text = unescaped(all_text(at))
    assert f"Right. You predicted '{answer}'" in text
    said = float(re.search(r"The model gives key .+? weight (\d\.\d{4}), the largest", text).group(1))
    assert said == pytest.approx(row[group[0]], abs=1e-4)
    bars = figure(at, f"weights of query {labels[3]} (layer 0, head 0)")["data"][0]
    np.testing.assert_allclose(decode(bars["y"]).astype(float), row, atol=1e-5, rtol=0)

    at.selectbox(key="insp_row").set_value(labels[4]).run()  # another row is another question
    assert not shows_the_head(at)


# ---- 4. compare side by side ---------------------------------------------------------------------------------

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "models" / "default"


def float32_allowance(config) -> float:
    """How far the page's float32 weights may lie from a float64 reference: derived from float32's epsilon and
    the model's longest sums (core.agreement), not a constant that passed once."""
    return allowance(torch.float32, model_terms(config), 1.0)


def same_axes(a: dict, b: dict) -> None:
    """Two side maps drawn aligned: one height, one extent on both axes, one colour scale 0..1."""
    assert a["layout"]["height"] == b["layout"]["height"]
    assert a["layout"]["xaxis"]["range"] == b["layout"]["xaxis"]["range"]
    assert a["layout"]["yaxis"]["range"] == b["layout"]["yaxis"]["range"]
    for fig in (a, b):
        assert (fig["data"][0]["zmin"], fig["data"][0]["zmax"]) == (0, 1)


@pytest.mark.numerics
def test_compare_two_texts_draws_each_texts_own_weights_side_by_side(trained_bundle_path, trained_bundle):
    model, tok = trained_bundle.model, trained_bundle.tokenizer
    at = reveal(open_inspector(trained_bundle_path, {"insp_layer": "1", "insp_head": "0"}))
    assert at.radio(key="insp_cmp_by").value == "another text"
    text_b = at.text_input(key="insp_cmp_text").value
    assert len(text_b) == len(DEFAULT_TEXT) and text_b != DEFAULT_TEXT  # a small edit by default: same T
    near = float32_allowance(model.config)
    for text, title in ((DEFAULT_TEXT, "side A: layer 1, head 0"), (text_b, "side B: layer 1, head 0")):
        fig = figure(at, title)
        ids = tok.encode(text)
        assert decode(fig["data"][0]["x"]).tolist() == labels_of(tok, ids)  # position and piece on each axis
        z, want = z_of(fig["data"][0]), reference_weights(model, ids, 1, 0).tolist()
        for t in range(len(ids)):
            assert all(z[t][s] is None for s in range(t + 1, len(ids)))  # the future is masked
            np.testing.assert_allclose(z[t][: t + 1], want[t][: t + 1], atol=near, rtol=0)
    same_axes(figure(at, "side A"), figure(at, "side B"))
    assert figure(at, "B − A")  # same T: the difference map is drawn

    # a shorter second text: side B is still its own weights, on the longer side's axes; no difference map
    at.text_input(key="insp_cmp_text").set_value("return a").run()
    assert not at.exception, [e.value for e in at.exception]
    ids_b = tok.encode("return a")
    fig_b = figure(at, "side B")
    assert decode(fig_b["data"][0]["x"]).tolist() == labels_of(tok, ids_b)
    assert_causal_weights(z_of(fig_b["data"][0]), reference_weights(model, ids_b, 1, 0).tolist())
    same_axes(figure(at, "side A"), fig_b)
    assert fig_b["layout"]["xaxis"]["range"] == [-0.5, len(DEFAULT_TEXT) - 0.5]
    assert not [f for f in figures(at) if f["layout"]["title"]["text"].startswith("B − A")]
    assert f"Side A has {len(DEFAULT_TEXT)} tokens and side B {len(ids_b)}" in all_text(at)


def test_compare_a_crafted_second_text_is_marked_and_stays_inert(trained_bundle_path, trained_bundle):
    """Unseen characters become <unk> and are listed, as for the first text; nothing of the text becomes markdown
    (an image from another host)."""
    crafted = "![x](http://h.example/p.png)"[: len(DEFAULT_TEXT)].ljust(len(DEFAULT_TEXT), "a")
    at = reveal(open_inspector(trained_bundle_path))
    at.text_input(key="insp_cmp_text").set_value(crafted).run()
    assert not at.exception, [e.value for e in at.exception]
    text = all_text(at)
    assert "became `<unk>`" in text and "! (U+0021)" in unescaped(text)
    assert "![" not in text and "](http" not in text and "http://" not in text
    assert "<unk>" in decode(figure(at, "side B")["data"][0]["x"]).tolist()[1]
    assert unescaped(text).count("B − A: the largest change is query") == 1


def reference_largest_change(want_a, want_b, near: float):
    """(t, s) of the largest |B − A| over the causal cells, written cell by cell; no other cell may come within
    `near` of it, or float32 rounding could order them differently (checked)."""
    T = len(want_a)
    changes = sorted(((abs(want_b[t][s] - want_a[t][s]), t, s) for t in range(T) for s in range(t + 1)), reverse=True)
    assert changes[0][0] - changes[1][0] > near, "the fixture's largest change must lead by more than rounding"
    return changes[0][1], changes[0][2]


@pytest.mark.numerics
def test_compare_two_models_draws_their_difference_and_names_the_largest_change(trained_bundle_path, trained_bundle):
    """Side A: the test bundle (selected); side B: the shipped default, reading the same text."""
    from core.model.bundle import load_bundle

    shipped = load_bundle(SHIPPED_DIR)
    at = reveal(open_inspector(trained_bundle_path, {"insp_layer": "1", "insp_head": "0"}))
    assert at.radio(key="insp_cmp_by").options == ["another text", "another model"]
    at.radio(key="insp_cmp_by").set_value("another model").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="insp_cmp_model").options == ["Shipped default (Python standard library)"]
    ids_a, ids_b = trained_bundle.tokenizer.encode(DEFAULT_TEXT), shipped.tokenizer.encode(DEFAULT_TEXT)
    want_a = reference_weights(trained_bundle.model, ids_a, 1, 0).tolist()
    want_b = reference_weights(shipped.model, ids_b, 1, 0).tolist()
    near = float32_allowance(trained_bundle.model.config) + float32_allowance(shipped.model.config)
    assert_causal_weights(z_of(figure(at, "side B: layer 1, head 0")["data"][0]), want_b)
    diff = figure(at, "B − A: change of the weights of layer 1, head 0")
    z, T = z_of(diff["data"][0]), len(ids_a)
    for t in range(T):
        assert all(z[t][s] is None for s in range(t + 1, T))
        np.testing.assert_allclose(z[t][: t + 1], [want_b[t][s] - want_a[t][s] for s in range(t + 1)], atol=near)
    t, s = reference_largest_change(want_a, want_b, near)
    piece = labels_of(trained_bundle.tokenizer, ids_a)
    said = unescaped(all_text(at))
    expected = (
        f"B − A: the largest change is query {t} ('{piece[t].split(' ', 1)[1]}'), key {s} "
        f"('{piece[s].split(' ', 1)[1]}'): weight {want_a[t][s]:.3f} on side A, {want_b[t][s]:.3f} on side B"
    )
    assert expected in said, said
    assert f"a change of {want_b[t][s] - want_a[t][s]:+.3f}." in said


def test_compare_with_a_model_that_lacks_the_layer_shows_only_side_a(trained_bundle_path):
    """Side A: the shipped default (4 layers) at layer 3; side B: the test bundle, which has 2."""
    at = open_inspector(trained_bundle_path)
    at.sidebar.selectbox(key="lab_bundle").set_value("Shipped default (Python standard library)").run()
    at = reveal(at.selectbox(key="insp_layer").set_value(3).run())
    at.radio(key="insp_cmp_by").set_value("another model").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="insp_cmp_model").value == LABEL
    assert "Side B's model lacks layer 3, head 0: it has 2 layers (0 to 1), so no layer 3." in all_text(at)
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert any(t.startswith("side A: layer 3, head 0") for t in titles)
    assert not any(t.startswith(("side B", "B − A")) for t in titles)


def test_compare_without_another_model_offers_only_another_text():
    at = open_page("inspector")  # only the shipped default is on offer
    at = predict(at, "insp_predict", answer_options(at)[0])
    assert at.radio(key="insp_cmp_by").options == ["another text"]
    assert "There is no other transformer model to compare with" in all_text(at)
    assert figure(at, "side B") and figure(at, "B − A")


# ---- picture first, readable type -----------------------------------------------------------------------------

MIN_TEXT_PX = 16  # issue 25: every text on the enlarged map at least 16 px, at 1440x900 too
TICK_PITCH_PX = 22  # the room one tick label needs along its axis (views/inspector/page.py)


def assert_map_text_at_least_16px(fig: dict) -> None:
    """The enlarged map's fonts: the layout's (titles, hover), both axes' ticks, the cell values, the colour bar."""
    layout, trace = fig["layout"], fig["data"][0]
    assert layout["font"]["size"] >= MIN_TEXT_PX
    for axis in ("xaxis", "yaxis"):
        assert layout[axis]["tickfont"]["size"] >= MIN_TEXT_PX, axis
        assert layout[axis]["title"]["font"]["size"] >= MIN_TEXT_PX, axis
    assert trace["textfont"]["size"] >= MIN_TEXT_PX
    assert trace["colorbar"]["tickfont"]["size"] >= MIN_TEXT_PX


def test_the_enlarged_map_labels_every_token_in_16px_type_while_they_fit(trained_bundle_path, trained_bundle):
    at = reveal(open_inspector(trained_bundle_path))
    fig = figure(at, "weights of layer 0, head 0")
    assert_map_text_at_least_16px(fig)
    labels = labels_of(trained_bundle.tokenizer, trained_bundle.tokenizer.encode(DEFAULT_TEXT))
    for axis in ("xaxis", "yaxis"):
        assert fig["layout"][axis]["tickvals"] == labels  # 27 tokens fit: every one is labelled


def test_a_long_text_labels_every_nth_token_rather_than_shrinking_the_type():
    """The shipped model reads up to 128 characters: the map cannot give each a 16 px label, so it labels every n-th
    token, evenly, with room for each label; the grid of 4 layers still fits the first screen."""
    text = ("def add(a, b): return a + b\n" * 5)[:120]
    at = open_page("inspector", {"insp_text": text})
    grid = figure(at, "attention weights of every layer")
    assert grid["layout"]["height"] <= 520
    at = predict(at, "insp_predict", answer_options(at)[0])
    fig = figure(at, "weights of layer 0, head 0")
    assert_map_text_at_least_16px(fig)
    labels = decode(fig["data"][0]["y"]).tolist()
    assert len(labels) == 120
    for axis in ("xaxis", "yaxis"):
        ticks = fig["layout"][axis]["tickvals"]
        step = labels.index(ticks[1])
        assert step > 1 and ticks == labels[::step]
        assert (fig["layout"]["height"] - 130) / len(ticks) >= TICK_PITCH_PX  # each label has its room
    assert f"one token in {step} labelled" in fig["layout"]["title"]["text"]
