"""The RoPE page: its offset check passes with a tiny spread, its score depends only on m - n, its frequency
table is the closed form, bad links fall back with a note, and with a model its on/off heatmaps are the head's
scores with and without the rotation. Expected values come from math and from the model's raw weights
(tests/references.py), never from core.lessons.rope."""

import math
import re

import numpy as np
import pytest
import torch
from apptest import all_text, decode, figure, figures, open_page, picture_figures, predict, unescaped
from bundles import TEXT, tiny_model
from references import closed_form_score, head_inputs, reference_scores

import ui.models
from core.model.bundle import load_bundle, save_bundle
from core.model.corpus import corpus_from_text
from core.model.rope import apply_rope

pytestmark = pytest.mark.numerics

LABEL = "test bundle (tiny, untrained)"
DEFAULT_TEXT = "def add(a, b): return a + b"
ARROWS = ("q before", "q after RoPE", "k before", "k after RoPE")  # the pair drawing's four arrows, by legend name


def seeded_qk(D):
    """The page's documented vectors: randn(D) twice from torch seed 0, float64."""
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(D, generator=g, dtype=torch.float64).tolist(),
        torch.randn(D, generator=g, dtype=torch.float64).tolist(),
    )


@pytest.fixture(autouse=True)
def _clean(fresh_streamlit_caches, monkeypatch, tmp_path):
    # No shipped bundle unless a test adds one: the page must work without a model.
    monkeypatch.setattr(ui.models, "SHIPPED_DIR", tmp_path / "no-shipped-bundle")
    yield


@pytest.fixture(scope="module")
def bundle_path(tmp_path_factory):
    model, tok = tiny_model()
    corpus = corpus_from_text("toy.py", TEXT)
    return save_bundle(
        tmp_path_factory.mktemp("rope") / "bundle",
        model,
        tok,
        metrics={},
        command=["tests", "test_page_rope"],
        corpus=corpus,
    )


def score_metric(at) -> float:
    return float(next(m.value for m in at.metric if m.label == "q·k after RoPE, all D features"))


def test_offset_check_passes_and_the_curves_are_the_closed_form():
    at = predict(open_page("rope"), "rope_predict")
    success = next(s.value for s in at.success if s.value.startswith("Offset check passed"))
    spread, tolerance = map(float, re.search(r"positions: (\S+), allowance (\S+) ", success).groups())
    q, k = seeded_qk(16)
    norm = math.hypot(*q) * math.hypot(*k)
    # derived from float64's epsilon: 16 eps x (D + the largest position, up to about a thousand here) x |q||k|
    assert spread <= tolerance and 16 * 2.0**-52 * 16 * norm < tolerance < 16 * 2.0**-52 * 2048 * norm
    assert spread < 1e-11  # tiny: float64 rounding of the angles only
    fig = figure(at, "q·k after RoPE against the offset")
    curves = [t for t in fig["data"] if t["name"].startswith("earlier token at")]
    assert [c["name"] for c in curves] == [
        "earlier token at 0",
        "earlier token at 2",
        "earlier token at 100",
        "earlier token at 1000",
    ]  # default m = 5, n = 2
    for curve in curves:
        offsets = decode(curve["x"]).astype(int).tolist()
        assert offsets == list(range(-32, 33))
        want = [closed_form_score(q, k, r, 10000.0) for r in offsets]
        np.testing.assert_allclose(decode(curve["y"]).astype(float), want, atol=1e-10, rtol=0)


def test_the_reported_score_depends_only_on_m_minus_n():
    at = open_page("rope", {"rope_m": "5", "rope_n": "2"})
    q, k = seeded_qk(16)
    first = score_metric(at)
    assert first == pytest.approx(closed_form_score(q, k, 3, 10000.0), abs=1e-6)
    at.number_input(key="rope_far").set_value(100).run()  # m = 105, n = 102
    assert not at.exception
    assert "q at m = 105, k at n = 102" in picture_figures(at)[0]["layout"]["title"]["text"]
    assert score_metric(at) == first  # same offset 3, same printed score
    at.slider(key="rope_m").set_value(6).run()  # m = 106
    moved = score_metric(at)
    assert moved != first
    assert moved == pytest.approx(closed_form_score(q, k, 4, 10000.0), abs=1e-6)


def rotated_score(q, k, m, n, base):
    """(R_m q)·(R_n k) with every pair turned by cos and sin, in math only (not the closed form in the offset)."""
    D, total = len(q), []
    for i in range(D // 2):
        theta = base ** (-2.0 * i / D)
        (qx, qy), (kx, ky) = q[2 * i : 2 * i + 2], k[2 * i : 2 * i + 2]
        cm, sm, cn, sn = math.cos(m * theta), math.sin(m * theta), math.cos(n * theta), math.sin(n * theta)
        total.append((qx * cm - qy * sm) * (kx * cn - ky * sn) + (qx * sm + qy * cm) * (kx * sn + ky * cn))
    return math.fsum(total)


def test_the_prediction_hides_the_offset_curves_until_checked_and_grades_against_the_rotation():
    q, k = seeded_qk(16)
    now, shifted = rotated_score(q, k, 5, 2, 1e4), rotated_score(q, k, 10, 7, 1e4)  # default m = 5, n = 2
    assert shifted == pytest.approx(now, abs=1e-12)  # so the right choice is "it stays the same"

    at = open_page("rope")
    assert not [s for s in at.success if s.value.startswith("Offset check")], "the check waits for a prediction"
    assert not [f for f in figures(at) if f["layout"]["title"]["text"].startswith("q·k after RoPE against")]
    text = all_text(at)
    assert "depends only on" not in text and "stays the same" not in text
    assert "Shift both by 5: the query to m = 10, the key to n = 7." in unescaped(text)
    assert [r.options for r in at.radio if r.key == "rope_predict_answer"] == [
        ["it stays the same", "it grows", "it shrinks"]
    ]

    predict(at, "rope_predict", "it stays the same")
    text = unescaped(all_text(at))
    assert "Right. You predicted 'it stays the same'" in text
    assert f"q·k after RoPE is {now:.6f} at m = 5, n = 2 and {shifted:.6f} at m = 10, n = 7" in text
    assert any(s.value.startswith("Offset check passed") for s in at.success)

    far = {"rope_m": "31", "rope_n": "2", "rope_far": "169"}  # m = 200, n = 171: far along the text
    at = predict(open_page("rope", far), "rope_predict", "it grows")
    text = unescaped(all_text(at))
    assert "Not quite. You predicted 'it grows'; the lab's answer is 'it stays the same'." in text
    now, shifted = rotated_score(q, k, 200, 171, 1e4), rotated_score(q, k, 205, 176, 1e4)
    assert f"q·k after RoPE is {now:.6f} at m = 200, n = 171 and {shifted:.6f} at m = 205, n = 176" in text
    fig = figure(at, "q·k after RoPE against the offset")
    [mine] = [t for t in fig["data"] if t["name"] == "your m = 200, n = 171"]
    assert decode(mine["y"]).astype(float).tolist() == pytest.approx([now], abs=1e-9)


def test_the_page_opens_on_the_pair_drawing_and_the_other_sections_are_one_tab_away():
    """Issue 25: the picture is the pair drawing for the controls' m, n and pair; the rest sits in tabs."""
    at = open_page("rope", {"rope_m": "7", "rope_n": "3", "rope_pair": "2"})
    [fig] = picture_figures(at)
    assert fig["layout"]["title"]["text"] == "pair 2 (features 4, 5): q at m = 7, k at n = 3"
    q, k = seeded_qk(16)
    theta = 10000.0 ** (-2 * 2 / 16)
    [q_after] = [t for t in fig["data"] if t.get("name") == "q after RoPE"]
    want = (
        q[4] * math.cos(7 * theta) - q[5] * math.sin(7 * theta),
        q[4] * math.sin(7 * theta) + q[5] * math.cos(7 * theta),
    )
    assert decode(q_after["x"]).astype(float)[-1] == pytest.approx(want[0], abs=1e-12)
    assert decode(q_after["y"]).astype(float)[-1] == pytest.approx(want[1], abs=1e-12)
    assert [t.label for t in at.tabs] == [
        "Predict: move both together",
        "How RoPE works",
        "Every pair's speed",
        "Adjacent pairs or split halves",
        "A model's head, RoPE on and off",
    ]
    assert "On this page" not in all_text(at)


def test_the_position_sliders_show_the_lessons_positions_apart():
    """Issue 38: on 0-255 sliders the default m = 5 and n = 2 sat at the far left, a pixel apart."""
    at = open_page("rope")
    m, n = at.slider(key="rope_m"), at.slider(key="rope_n")
    assert (m.value, n.value) == (5, 2)
    assert (m.value - n.value) / (m.max - m.min) >= 0.05  # at least 5% of a slider's width between them


@pytest.mark.parametrize("pair", [0, 7], ids=["fast pair", "slow pair"])
def test_each_arrow_is_named_once_and_no_two_names_share_a_spot(pair):
    """Issue 38: the labels piled up where the arrows meet. A slow pair hardly turns in 5 positions, so q before and
    q after lie on top of each other: their names must not."""
    at = open_page("rope", {"rope_pair": str(pair)})
    [fig] = picture_figures(at)
    tips = [(float(decode(t["x"])[-1]), float(decode(t["y"])[-1])) for t in fig["data"] if t.get("name") in ARROWS]
    reach = max(math.hypot(x, y) for x, y in tips)
    labels = [
        (text, float(x), float(y))
        for t in fig["data"]
        if "text" in t.get("mode", "")
        for text, x, y in zip(t["text"], decode(t["x"]).tolist(), decode(t["y"]).tolist())
        if text
    ]
    assert sorted(text for text, _, _ in labels) == ["k", "k at n=2", "q", "q at m=5"]
    for i, (a, ax, ay) in enumerate(labels):
        for b, bx, by in labels[i + 1 :]:
            assert math.hypot(ax - bx, ay - by) >= 0.1 * reach, f"'{a}' and '{b}' are drawn at the same spot"


def test_frequency_table_is_the_closed_form():
    at = open_page("rope", {"rope_D": "32", "rope_base": "500.0"})
    table = next(d.value for d in at.dataframe if "θᵢ (rad per position)" in d.value.columns)
    assert list(table["pair i"]) == list(range(16))
    np.testing.assert_allclose(
        table["θᵢ (rad per position)"], [500.0 ** (-2 * i / 32) for i in range(16)], rtol=1e-12, atol=0
    )
    np.testing.assert_allclose(
        table["wavelength 2π/θᵢ (positions)"],
        [2 * math.pi * 500.0 ** (2 * i / 32) for i in range(16)],
        rtol=1e-12,
        atol=0,
    )


def test_layout_check_passes_and_the_mapping_moves_pairs_apart():
    at = open_page("rope", {"rope_D": "8"})
    assert any(s.value.startswith("Same rotation") for s in at.success)
    table = next(d.value for d in at.dataframe if "slot in split-half layout" in d.value.columns)
    assert list(table["slot in split-half layout"]) == [0, 4, 1, 5, 2, 6, 3, 7]
    np.testing.assert_allclose(
        table["q after RoPE, adjacent [d]"], table["q after RoPE, split half [slot]"], atol=1e-12, rtol=0
    )


def test_bad_link_values_fall_back_to_the_defaults_with_a_note():
    at = predict(open_page("rope", {"rope_m": "minus one", "rope_base": "0.5", "rope_pair": "99"}), "rope_predict")
    assert at.slider(key="rope_m").value == 5
    assert at.number_input(key="rope_base").value == 10000.0
    assert at.slider(key="rope_pair").value == 0
    text = all_text(at)
    for label in ("Query position m", "RoPE base", "Pair index i"):
        assert f"The link set '{label}'" in text and "not usable" in text
    assert any(s.value.startswith("Offset check passed") for s in at.success)


def test_without_a_bundle_the_model_section_says_what_to_do():
    at = open_page("rope")
    assert any("pick a usable bundle in the sidebar, or train one" in i.value for i in at.info)
    assert not [f for f in figures(at) if f["layout"]["title"]["text"].startswith("scores, RoPE")]


def test_with_a_bundle_the_heatmaps_are_the_heads_scores_with_and_without_rope(bundle_path):
    at = open_page("rope", {"rope_layer": "1", "rope_head": "1"}, bundle=(LABEL, bundle_path))
    model = load_bundle(bundle_path).model
    ids = load_bundle(bundle_path).tokenizer.encode(DEFAULT_TEXT)
    T = len(ids)
    q_raw, k_raw, _, _ = head_inputs(model, ids, 1, 1)
    base = model.config.rope_base
    want = {
        "on": reference_scores(apply_rope(q_raw, torch.arange(T), base), apply_rope(k_raw, torch.arange(T), base)),
        "off": reference_scores(q_raw, k_raw),
    }
    for name, title in (
        ("on", "scores, RoPE on (the model), layer 1, head 1"),
        ("off", "scores, RoPE off, layer 1, head 1"),
    ):
        # masked cells are sent as NaN in float32 (ui.charts.cells): read them back as None
        z = [[None if v != v else v for v in row] for row in decode(figure(at, title)["data"][0]["z"]).tolist()]
        assert len(z) == T
        for t in range(T):
            assert all(v is None for v in z[t][t + 1 :])  # the future is masked
            np.testing.assert_allclose(z[t][: t + 1], want[name][t][: t + 1], atol=1e-4, rtol=1e-5)
    changes = [abs(a - b) for t in range(T) for a, b in zip(want["on"][t][: t + 1], want["off"][t][: t + 1])]
    sentence = next(m.value for m in at.markdown if m.value.startswith("With RoPE off"))
    shown = float(re.search(r"change by up to (\S+) ", sentence).group(1))
    assert shown == pytest.approx(max(changes), abs=2e-3)  # printed with 3 decimals
    assert not [i for i in at.info if "pick a usable bundle" in i.value]
