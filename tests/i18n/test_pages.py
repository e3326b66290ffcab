"""Every page renders in every language without an exception, in the language asked for (issue 39)."""

from __future__ import annotations

import pytest
from apptest import open_page

from core import i18n
from ui import language

PAGES = [
    "home",
    "score_geometry",
    "masks",
    "read_row",
    "temperature",
    "inside",
    "anatomy",
    "embeddings",
    "rope",
    "training",
    "autocomplete",
    "inspector",
    "checkpoint",
    "release",
    "monitoring",
]


@pytest.mark.parametrize("code", [c for c in i18n.LANGUAGES if c != i18n.DEFAULT])
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_in_the_language_of_the_link(page, code):
    at = open_page(page, {language.PARAM: code})  # fails on an exception
    assert at.query_params[language.PARAM] == code  # the link keeps its language
    assert at.sidebar.selectbox(key=language.PICKER).value == code
    assert not at.error, [e.value for e in at.error]
