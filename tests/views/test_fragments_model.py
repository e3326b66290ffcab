"""Each st.fragment of the model and release pages (ui.fragment.section) against a plain whole-script run: moving
the widget that drives it as the browser would (only the fragment reruns) leaves the page showing exactly what a
fresh run at the new value shows. A fragment that missed an element depending on its widget (it would go stale on
screen) or computed something else fails here; so does a widget that is not in a fragment at all (each case first
checks the widget is in one). A URL-bound widget stays bound after a fragment run: a teacher's link keeps
working."""

import pytest

from tests import apptest
from tests.apptest import change_as_browser, fragment_of, page_after_fragment_rerun, widget

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")
_first_run = apptest.open_page


def open_page(stem: str):
    """The page past its first run: that run also sends the values its texts were given from code (ui.params starts
    a text at its default), which later runs, whole or fragment, do not resend; the browser shows the same text
    either way (as in tests/views/test_fragments_attention.py)."""
    at = _first_run(stem)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(autouse=True)
def _pages_past_their_first_run(monkeypatch):
    monkeypatch.setattr(apptest, "open_page", open_page)


# (page stem, AppTest accessor, widget key, value a, value b): each moves one fragment's driving widget a -> b.
CASES = [
    ("inspector", "selectbox", "insp_head", 0, 1),
    ("inspector", "selectbox", "insp_layer", 0, 1),
    ("inspector", "selectbox", "insp_row", "26 b", "2 f"),  # 'position piece' of the default text
    ("autocomplete", "slider", "ac_temperature", 1.0, 0.5),
    ("autocomplete", "slider", "ac_k", 10, 4),
    ("autocomplete", "number_input", "ac_top_k", 0, 3),
    ("autocomplete", "slider", "ac_length", 40, 12),  # the completion's tab, and the parity tab's offer to check
    ("autocomplete", "text_area", "ac_prompt", "class Stack:\n    def __init__(self", "def main("),  # default first
]
# The inspector's text (insp_text) is in the same fragment, but this harness cannot move it: a new text brings the
# row selector new options, and the harness replays the next change from the page it kept, whose selector still
# holds the old ones (AppTest refuses a value that is not among them).


@pytest.mark.parametrize(("stem", "kind", "key", "a", "b"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_fragment_rerun_shows_what_a_plain_run_shows(stem, kind, key, a, b):
    at = open_page(stem)
    assert fragment_of(at, widget(at, kind, key)) is not None, f"{key} is not drawn in a fragment"
    shown, plain = page_after_fragment_rerun(stem, kind, key, a, b)
    assert shown == plain


@pytest.mark.parametrize(("stem", "kind", "key", "value"), [("inspector", "selectbox", "insp_head", 1)])
def test_a_fragment_run_keeps_the_widget_bound_to_the_address(stem, kind, key, value):
    """The browser writes a bound widget's value into the address when it moves (Streamlit's bind="query-params"),
    for the widgets the last run registered as bound: a fragment run re-registers its widgets, still bound, so a
    teacher's link keeps carrying them. (AppTest runs no browser: the registry is what can be checked here.)"""
    at = open_page(stem)
    change_as_browser(at, kind, key, value)
    with at.session_state._state.query_params() as query:
        assert query.is_bound(key)
        assert not query.is_bound(key + "_not_a_widget")
