"""ui.fragment.polled: a polling fragment's tick that Streamlit runs as a run of a page this session has left (the
browser sent it before it heard of a st.switch_page) switches back to the session's page instead of running, so the
page is drawn again; a tick on its own page runs its body and nothing else.

Streamlit's own script runner (AppTest) runs a two-page app with one polled fragment in the sidebar, and the tick is
sent as the browser sends it (tests.apptest.rerun_fragment: the fragment's id, every widget's value, and here the page
the browser believes it shows). What it replaces, run the same way without the guard (st.fragment), is checked too:
that run draws the fragment only, which is the blank main area a follower saw (tests/e2e/test_follow.py)."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest import fragment_of, rerun_fragment

MAIN = """
import streamlit as st
from ui import fragment

pages = [st.Page("one.py", title="One", default=True), st.Page("two.py", title="Two")]
page = st.navigation(pages)
st.session_state["hashes"] = {p.title: p._script_hash for p in pages}
fragment.remember_page(page)
poll = fragment.polled(1.0) if st.session_state.get("guarded", True) else st.fragment(run_every=1.0)


@poll
def tick() -> None:
    st.session_state["ticks"] = st.session_state.get("ticks", 0) + 1
    st.checkbox("in the tick", key="tick_box")


with st.sidebar:
    tick()
page.run()
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    (tmp_path / "main.py").write_text(MAIN)
    for name in ("one", "two"):
        (tmp_path / f"{name}.py").write_text(f"import streamlit as st\n\nst.title('Page {name}')\n")
    return tmp_path / "main.py"


def on_page(app: Path, title: str, *, guarded: bool = True) -> AppTest:
    at = AppTest.from_file(str(app), default_timeout=30)
    at.session_state["guarded"] = guarded
    at.run()
    if title != "One":
        at.switch_page(f"{title.lower()}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == [f"Page {title.lower()}"]
    return at


def tick_from(at: AppTest, page_title: str):
    """The tick as the browser sends it while it shows `page_title`: the elements that run produced."""
    fragment_id = fragment_of(at, at.checkbox(key="tick_box"))
    assert fragment_id is not None
    return rerun_fragment(at, fragment_id, at.session_state["hashes"][page_title])


@pytest.mark.parametrize("title", ["One", "Two"])  # the default page (the URL names none) and another
def test_a_tick_on_its_own_page_runs_the_fragment_only(app, title):
    at = on_page(app, title)
    ticks = at.session_state["ticks"]
    tree = tick_from(at, title)
    assert at.session_state["ticks"] == ticks + 1
    assert [t.value for t in tree.title] == []  # the page's main area is not redrawn: nothing there changed


def test_a_tick_from_a_page_the_session_left_redraws_the_sessions_page(app):
    at = on_page(app, "Two")  # the browser still believes it shows One (a server-side switch_page it has not heard of)
    ticks = at.session_state["ticks"]
    tree = tick_from(at, "One")
    assert [t.value for t in tree.title] == ["Page two"]  # switched back: page Two drawn again, whole
    assert at.session_state["ticks"] == ticks + 1  # by that whole-script run; the stale tick's body did not run


def test_without_the_guard_the_stale_tick_draws_no_page(app):
    """What polled replaces: st.fragment runs the tick as a run of page One, which draws the fragment and no page."""
    at = on_page(app, "Two", guarded=False)
    tree = tick_from(at, "One")
    assert [t.value for t in tree.title] == []
    assert [c.key for c in tree.checkbox] == ["tick_box"]
