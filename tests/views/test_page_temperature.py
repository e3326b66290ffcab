"""The temperature page renders the distribution the formula gives, at any temperature, and the scaling experiment."""

import math

import pytest
from apptest import all_text, decode, figures, open_page, picture_figures, predict, unescaped

LESSON_SCORES = [1.2, 0.3, -0.4, 1.8]

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")  # st.cache_* is shared across AppTests


def by_formula(scores, tau):
    e = [math.exp(s / tau) for s in scores]
    return [x / math.fsum(e) for x in e]


def bar_values(at):
    return [float(y) for y in decode(figures(at)[0]["data"][0]["y"])]


@pytest.mark.smoke
@pytest.mark.numerics
def test_default_shows_the_lesson_distribution_in_chart_table_and_summary():
    at = open_page("temperature")
    want = by_formula(LESSON_SCORES, 1.0)
    assert bar_values(at) == pytest.approx(want, abs=1e-12)
    table = at.dataframe[0].value
    assert list(table["score"]) == LESSON_SCORES
    assert [f"{p:.4f}" for p in table["probability"]] == ["0.2915", "0.1185", "0.0589", "0.5311"]
    assert "0.2915, 0.1185, 0.0589, 0.5311" in all_text(at)
    entropy = -sum(p * math.log2(p) for p in want)
    assert at.metric[0].value == f"{entropy:.3f}"


@pytest.mark.numerics
def test_moving_the_slider_changes_the_distribution():
    at = open_page("temperature")
    before = bar_values(at)
    at.slider(key="temperature").set_value(0.25).run()
    after = bar_values(at)
    assert after != before
    assert after == pytest.approx(by_formula(LESSON_SCORES, 0.25), abs=1e-12)
    assert max(after) > max(before)  # colder is sharper


@pytest.mark.numerics
def test_link_parameters_reproduce_the_view_and_bad_ones_fall_back_with_a_note():
    at = open_page("temperature", {"temperature": "2.5", "scores": "0, 1, 2"})
    assert bar_values(at) == pytest.approx(by_formula([0, 1, 2], 2.5), abs=1e-12)
    at = open_page("temperature", {"temperature": "hot"})
    assert at.slider(key="temperature").value == 1.0
    assert "not usable" in all_text(at)


@pytest.mark.numerics
def test_unreadable_scores_are_explained_and_the_lesson_scores_are_kept():
    at = open_page("temperature")
    at.text_input(key="scores").set_value("1, two, 3").run()
    assert "'two' is not a number" in all_text(at)
    assert bar_values(at) == pytest.approx(by_formula(LESSON_SCORES, 1.0), abs=1e-12)


@pytest.mark.numerics
def test_scaling_experiment_shows_saturation_measured():
    at = open_page("temperature")
    assert not any("measure" in d.value.columns for d in at.dataframe), "the measurement waits for a prediction"
    predict(at, "temperature_predict", "flatter: the weights move towards uniform")
    assert "Not quite. You predicted 'flatter" in unescaped(all_text(at))
    measured = at.dataframe[1].value.set_index("measure")
    base, big = measured.columns
    max_weight = measured.iloc[0]
    grad = measured.iloc[3]
    assert max_weight[big] > 0.99 > max_weight[base]
    assert grad[big] < 1e-3 < grad[base]
    assert measured.iloc[1][big] == 1.0  # every row nearly one-hot


@pytest.mark.numerics
def test_the_right_prediction_is_what_the_lesson_measures():
    """Dropping √3 and multiplying Q, K by 10 multiplies every score by 100√3: rows sharpen (worked example)."""
    import torch

    with torch.random.fork_rng():
        torch.manual_seed(2)
        q, k = torch.randn(1, 4, 3, dtype=torch.float64), torch.randn(1, 4, 3, dtype=torch.float64)
    mask = torch.ones(4, 4, dtype=torch.bool).tril()

    def mean_max(scale):
        w = torch.softmax((q @ k.mT * scale).masked_fill(~mask, float("-inf")), -1)  # (1, 4, 4)
        return w.amax(-1).mean().item()

    assert mean_max(100.0) > mean_max(3**-0.5)
    at = predict(
        open_page("temperature"), "temperature_predict", "sharper: each row's largest weight grows, towards one-hot"
    )
    text = unescaped(all_text(at))
    assert "Right. You predicted 'sharper" in text
    assert f"goes from {mean_max(3**-0.5):.3f} to {mean_max(100.0):.3f}" in text


def test_the_exercise_heading_and_question_name_the_factor_the_slider_holds():
    """Issue 25: after the factor slider moves to 15, no heading or prompt still says 10."""
    at = open_page("temperature")
    assert [h.value for h in at.main.subheader if "multiply" in h.value] == [
        "Prediction exercise: drop the √d and multiply Q and K by 10"
    ]
    at.slider(key="factor").set_value(15.0).run()
    assert [h.value for h in at.main.subheader if "multiply" in h.value] == [
        "Prediction exercise: drop the √d and multiply Q and K by 15"
    ]
    text = unescaped(all_text(at))
    assert "Q and K × 15" in text and "by 10" not in text and "× 10" not in text


def test_the_chart_is_the_pictures_and_the_exercise_is_one_tab_away():
    at = open_page("temperature")
    [fig] = picture_figures(at)
    assert fig["layout"]["title"]["text"] == "softmax(scores / 1.00)"
    assert [t.label for t in at.tabs] == ["Predict: drop the √d and scale Q and K", "How temperature works"]
