"""ui.predict: a question that a widget changes is asked afresh, with an empty answer and no old verdict."""

import pytest
from apptest import all_text, open_page, predict, unescaped

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")

SHARPER = "sharper: each row's largest weight grows, towards one-hot"


def verdicts(at) -> list[str]:
    return [v for v in unescaped(all_text(at)).splitlines() if v.startswith(("Right.", "Not quite."))]


def test_moving_the_factor_asks_again_with_no_answer_selected():
    """Issue 25: after the factor moved from 10 to 15 the old choice stayed selected under the new question."""
    at = predict(open_page("temperature"), "temperature_predict", SHARPER)
    assert at.radio(key="temperature_predict_answer").value == SHARPER
    assert len(verdicts(at)) == 1
    at.run()  # a rerun that changes nothing keeps the answer and its verdict
    assert at.radio(key="temperature_predict_answer").value == SHARPER
    assert len(verdicts(at)) == 1

    at.slider(key="factor").set_value(15.0).run()
    assert not at.exception
    radio = at.radio(key="temperature_predict_answer")
    assert "× 15" in unescaped(all_text(at))  # the new question ...
    assert radio.value is None  # ... starts with nothing chosen
    assert verdicts(at) == []  # and the old verdict is gone
    assert at.radio(key="temperature_predict_answer").index is None

    at = predict(at, "temperature_predict", SHARPER)  # the new question can be answered and checked
    [verdict] = verdicts(at)
    assert verdict.startswith("Right. You predicted 'sharper") and "× 15" not in verdict
