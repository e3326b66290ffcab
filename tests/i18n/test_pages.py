"""Every page renders in every language without an exception, in the language asked for (issue 39)."""

from __future__ import annotations

import pytest
from apptest import PAGES, open_page

from core import i18n
from ui import language


@pytest.mark.parametrize("code", [c for c in i18n.LANGUAGES if c != i18n.DEFAULT])
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_in_the_language_of_the_link(page, code):
    at = open_page(page, {language.PARAM: code})  # fails on an exception
    assert at.query_params[language.PARAM] == code  # the link keeps its language
    assert at.sidebar.selectbox(key=language.PICKER).value == code
    assert not at.error, [e.value for e in at.error]


QUESTION_PAGES = [
    "score_geometry",
    "masks",
    "read_row",
    "temperature",
    "embeddings",
    "rope",
    "autocomplete",
    "inspector",
]


def asked(at) -> dict[str, str]:
    """The fingerprint of each predict-first question the page asked (ui.predict keeps it per question id)."""
    state = at.session_state._state._state  # AppTest's SafeSessionState -> SessionState (internal keys included)
    return {k: state[k] for k in state._keys() if k.startswith("_predict_asked_")}


@pytest.mark.parametrize("page", QUESTION_PAGES)
def test_a_question_is_the_same_question_in_every_language(page):
    """A class's answers are counted per question fingerprint (core.classroom.live): a learner reading Chinese and
    a teacher reading English must be asked the same question, so the fingerprint may not depend on the language."""
    english = asked(open_page(page))
    assert english, "the page asked no question"
    assert asked(open_page(page, {language.PARAM: "zh"})) == english
