"""The temperature page renders the distribution the formula gives, at any temperature, and the scaling experiment."""

import math

import pytest
from apptest import all_text, decode, figures, open_page

LESSON_SCORES = [1.2, 0.3, -0.4, 1.8]

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")  # st.cache_* is shared across AppTests


def by_formula(scores, tau):
    e = [math.exp(s / tau) for s in scores]
    return [x / math.fsum(e) for x in e]


def bar_values(at):
    return [float(y) for y in decode(figures(at)[0]["data"][0]["y"])]


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


def test_moving_the_slider_changes_the_distribution():
    at = open_page("temperature")
    before = bar_values(at)
    at.slider(key="temperature").set_value(0.25).run()
    after = bar_values(at)
    assert after != before
    assert after == pytest.approx(by_formula(LESSON_SCORES, 0.25), abs=1e-12)
    assert max(after) > max(before)  # colder is sharper


def test_link_parameters_reproduce_the_view_and_bad_ones_fall_back_with_a_note():
    at = open_page("temperature", {"temperature": "2.5", "scores": "0, 1, 2"})
    assert bar_values(at) == pytest.approx(by_formula([0, 1, 2], 2.5), abs=1e-12)
    at = open_page("temperature", {"temperature": "hot"})
    assert at.slider(key="temperature").value == 1.0
    assert "not usable" in all_text(at)


def test_unreadable_scores_are_explained_and_the_lesson_scores_are_kept():
    at = open_page("temperature")
    at.text_input(key="scores").set_value("1, two, 3").run()
    assert "'two' is not a number" in all_text(at)
    assert bar_values(at) == pytest.approx(by_formula(LESSON_SCORES, 1.0), abs=1e-12)


def test_scaling_experiment_shows_saturation_measured():
    at = open_page("temperature")
    at.toggle(key="reveal").set_value(True).run()
    measured = at.dataframe[1].value.set_index("measure")
    base, big = measured.columns
    max_weight = measured.iloc[0]
    grad = measured.iloc[3]
    assert max_weight[big] > 0.99 > max_weight[base]
    assert grad[big] < 1e-3 < grad[base]
    assert measured.iloc[1][big] == 1.0  # every row nearly one-hot
