"""Score geometry page: the numbers it draws against an independent torch computation with the same seed."""

import math
import re

import numpy as np
import pytest
import torch
from apptest import all_text, decode, figure, figures, open_page, picture_figures, predict, table, unescaped

pytestmark = pytest.mark.numerics

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")  # st.cache_* is shared across AppTests


def expected_scores(B, H, T, D, seed, scaled):
    """q kᵀ (/ √D) for unit-variance draws in the order q, k, v from one seeded generator, in float64."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(B, H, T, D, generator=g), torch.randn(B, H, T, D, generator=g)
    scores = torch.einsum("bhtd,bhsd->bhts", q.double(), k.double())  # (B, H, T, S)
    return scores / math.sqrt(D) if scaled else scores


def test_default_heatmap_shapes_and_variance_table():
    at = predict(open_page("score_geometry"), "score_geometry_predict", "16")
    # Defaults: B=2, H=2, T=5, D=16, seed 0; batch element 0, head 0, scaled.
    z = decode(figure(at, "scores")["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(z, expected_scores(2, 2, 5, 16, 0, True)[0, 0].numpy(), atol=1e-5)
    picture = [f["layout"]["title"]["text"] for f in picture_figures(at)]  # the first screen: the matrices
    assert picture == ["scores = Q Kᵀ × 0.2500 (b=0, h=0)", "weights = softmax(scores) (b=0, h=0)"]
    weights = decode(figure(at, "weights")["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(weights.sum(-1), np.ones(5), atol=1e-6)

    shapes = table(at, "shape here")
    assert dict(zip(shapes["tensor"], shapes["shape here"])) == {
        "Q": "(2, 2, 5, 16)",
        "K": "(2, 2, 5, 16)",
        "Kᵀ": "(2, 2, 16, 5)",
        "scores": "(2, 2, 5, 5)",
        "weights": "(2, 2, 5, 5)",
        "V": "(2, 2, 5, 16)",
        "out": "(2, 2, 5, 16)",
    }

    variance = table(at, "measured Var(q·k)")
    assert variance["head width D"].tolist() == [2**i for i in range(9)]
    for _, row in variance.iterrows():
        D = row["head width D"]
        se_scaled = math.sqrt((2 + 6 / D) / 4096)  # closed-form standard error of a sample variance of q·k/√D
        assert abs(row["measured Var(q·k)"] - D) <= 5 * D * se_scaled
        assert abs(row["measured Var(q·k / √D)"] - 1) <= 5 * se_scaled
        assert (row["closed form D"], row["closed form 1"]) == (D, 1)
    lines = {tr["name"]: decode(tr["y"]).astype(float) for tr in figure(at, "Variance")["data"]}
    np.testing.assert_allclose(lines["closed form: D"], [2**i for i in range(9)])
    np.testing.assert_allclose(lines["measured Var(q·k / √D)"], variance["measured Var(q·k / √D)"], atol=1e-4)

    text = all_text(at)
    overall = expected_scores(2, 2, 5, 16, 0, True).var(unbiased=False).item()
    assert f"variance {overall:.3f}" in text
    assert not re.search(r"\bnan\b", text, re.I)


def test_widgets_change_the_heatmap():
    at = open_page("score_geometry")
    before = decode(figure(at, "scores")["data"][0]["z"]).astype(float)
    at.selectbox(key="geo_b").set_value(1)
    at.selectbox(key="geo_h").set_value(1)
    at.toggle(key="geo_scale").set_value(False).run()
    z = decode(figure(at, "scores")["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(z, expected_scores(2, 2, 5, 16, 0, False)[1, 1].numpy(), atol=1e-4)
    assert not np.allclose(z, before)
    assert "scale 1 (no division)" in all_text(at)

    at.slider(key="geo_T").set_value(3)
    at.slider(key="geo_D").set_value(64).run()
    z = decode(figure(at, "scores")["data"][0]["z"]).astype(float)
    assert z.shape == (3, 3)
    assert dict(zip(table(at, "shape here")["tensor"], table(at, "shape here")["shape here"]))["Kᵀ"] == "(2, 2, 64, 3)"


def test_a_bad_link_value_falls_back_to_the_default_with_a_note():
    at = open_page("score_geometry", {"geo_T": "99", "geo_seed": "3"})
    assert "The link set 'Sequence length T' to '99'" in all_text(at)
    z = decode(figure(at, "scores")["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(z, expected_scores(2, 2, 5, 16, 3, True)[0, 0].numpy(), atol=1e-5)


def measured_variance(widths, D, seed, samples=4096):
    """Var(q·k) of `samples` unit-variance pairs at width D, drawn as the page documents: one generator seeded
    with the page's seed, q then k for each width in turn, float64."""
    g = torch.Generator().manual_seed(seed)
    for w in widths:
        q = torch.randn(samples, w, generator=g, dtype=torch.float64)  # (N, w)
        k = torch.randn(samples, w, generator=g, dtype=torch.float64)  # (N, w)
        if w == D:
            return (q * k).sum(-1).var().item()
    raise AssertionError(f"width {D} is not drawn")


def test_the_prediction_hides_the_variance_until_checked_and_grades_against_the_closed_form():
    at = open_page("score_geometry")
    assert not [f for f in figures(at) if f["layout"]["title"]["text"].startswith("Variance")]
    assert not any("measured Var(q·k)" in d.value.columns for d in at.dataframe)
    overall = expected_scores(2, 2, 5, 16, 0, True).var(unbiased=False).item()
    text = unescaped(all_text(at))
    assert f"variance {overall:.3f}" not in text and "closed form" not in text
    assert "The head width is D = 16" in text

    predict(
        at, "score_geometry_predict", "15"
    )  # within 10 % of D = 16: the closed form is the sum of 16 unit variances
    text = unescaped(all_text(at))
    assert "Right. You predicted 15: the lab computes 16; you were 1 off (tolerance 1.6)." in text
    measured = measured_variance([2**i for i in range(9)], 16, seed=0)
    assert abs(measured - 16) <= 5 * 16 * math.sqrt((2 + 6 / 16) / 4096)
    assert f"Measured over 4096 random (q, k) pairs at D = 16: {measured:.2f}" in text
    assert f"variance {overall:.3f}" in text
    assert table(at, "measured Var(q·k)")["measured Var(q·k)"].tolist()[4] == pytest.approx(measured, abs=1e-4)

    # A width that is not a power of two is measured on its own draw; √D is the usual wrong guess.
    at = predict(
        open_page("score_geometry", {"geo_D": "10", "geo_seed": "7"}), "score_geometry_predict", f"{math.sqrt(10):.2f}"
    )
    text = unescaped(all_text(at))
    assert "Not quite. You predicted 3.16: the lab computes 10; you were 6.84 off (tolerance 1)." in text
    assert f"Measured over 4096 random (q, k) pairs at D = 10: {measured_variance([10], 10, seed=7):.2f}" in text
