"""Each st.fragment of the attention and transformer lesson pages (ui.fragment.section) against a plain whole-script
run: moving the widget that drives it as the browser would (only the fragment reruns) leaves the page showing
exactly what a fresh run at the new value shows. A fragment that missed an element depending on its widget (it
would go stale on screen) or computed something else fails here; so does a widget that is not in a fragment at all
(the case would then test nothing: each case first checks the widget is in one).

The export of the whole view (the sidebar's "Download this view", ui.export) is held the same way: after a fragment
run it lists the charts a plain run lists, in the page's order."""

import pytest

from tests import apptest
from tests.apptest import fragment_of, page_after_fragment_rerun, widget

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")
_first_run = apptest.open_page


def open_page(stem: str):
    """The page as a learner has it after any rerun: a page's first run also sends the values its texts were given
    from code (ui.params starts a text at its default), which later runs, whole or fragment, do not resend. The
    browser shows the same text either way, but the harness would count the first run's field as different."""
    at = _first_run(stem)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


_change = apptest.change_as_browser


def change_as_browser(at, kind: str, key: str, value):
    """apptest.change_as_browser with the session's pages kept from the last whole run, as a server keeps them: an
    AppSession holds one PagesManager for its life, so st.page_link in a fragment run finds the pages app.py's
    st.navigation registered; AppTest makes a new, empty one for every run."""
    from streamlit.testing.v1 import app_test

    known = dict(at._registered_pages or {})
    plain = app_test.PagesManager

    class SessionPages(plain):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if known:
                self._pages = dict(known)

    app_test.PagesManager = SessionPages
    try:
        return _change(at, kind, key, value)
    finally:
        app_test.PagesManager = plain


@pytest.fixture(autouse=True)
def _as_a_server_session(monkeypatch):
    monkeypatch.setattr(apptest, "open_page", open_page)
    monkeypatch.setattr(apptest, "change_as_browser", change_as_browser)


# (page stem, AppTest accessor, widget key, value a, value b): each moves one fragment's driving widget a -> b; a is
# the widget's default (the harness keeps the page as first drawn, so a must be what it was drawn with).
CASES = [
    ("temperature", "slider", "temperature", 1.0, 0.25),
    ("temperature", "text_input", "scores", "1.2, 0.3, -0.4, 1.8", "3, 1, 0"),
    ("temperature", "slider", "factor", 10.0, 3.0),
    ("score_geometry", "slider", "geo_T", 5, 6),
    ("score_geometry", "toggle", "geo_scale", True, False),
    ("masks", "slider", "mask_len0", 6, 5),
    ("masks", "radio", "mask_side", "left", "right"),
    ("masks", "number_input", "mask_spike", 1000.0, 50.0),
    ("read_row", "slider", "row_t", 3, 1),
    ("embeddings", "selectbox", "emb_head", 0, 1),
    ("embeddings", "text_input", "emb_text", "def add(a, b):", "x = x + 1"),
    ("rope", "slider", "rope_m", 5, 9),
    ("rope", "selectbox", "rope_head", 0, 1),
]


@pytest.mark.parametrize(("stem", "kind", "key", "a", "b"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_fragment_rerun_shows_what_a_plain_run_shows(stem, kind, key, a, b):
    at = open_page(stem)
    assert fragment_of(at, widget(at, kind, key)) is not None, f"{key} is not drawn in a fragment"
    shown, plain = page_after_fragment_rerun(stem, kind, key, a, b)
    assert shown == plain


def _exported(at) -> list[str]:
    """The charts the view's export holds, by their title and summary, in order."""
    from ui import export

    view = at.session_state[export._VIEW]
    return [f"{item.fig.layout.title.text} | {item.summary}" for item in view]


def test_the_views_export_after_fragment_reruns_is_the_plain_runs():
    """The picture's chart comes before the exercise's two: after the picture reruns alone (twice, so nothing piles
    up), the export still lists the three charts of a plain run at the same temperature, in the page's order."""
    from tests.apptest import predict

    at = predict(open_page("temperature"), "temperature_predict")  # the exercise's two charts appear below
    change_as_browser(at, "slider", "temperature", 0.25)
    change_as_browser(at, "slider", "temperature", 2.0)
    plain = predict(open_page("temperature"), "temperature_predict")
    widget(plain, "slider", "temperature").set_value(2.0)
    plain.run()
    assert len(_exported(plain)) == 3
    assert _exported(at) == _exported(plain)


def test_a_text_changed_in_a_fragment_still_writes_its_link_and_keeps_the_others():
    """ui.params writes a text's link prefix itself (st.query_params): a fragment run must write it too, and leave the
    parameters app.py set (the model) in place, as a plain run does. (A slider's or selectbox's parameter is written by
    the browser from the widget's binding, which the cases above hold equal to a plain run's.)"""
    at = open_page("embeddings")
    change_as_browser(at, "text_input", "emb_text", "x = 1")
    plain = open_page("embeddings")
    widget(plain, "text_input", "emb_text").set_value("x = 1")
    plain.run()
    assert at.query_params["emb_text"] == "x = 1"
    assert dict(at.query_params) == dict(plain.query_params)
