"""Follow the teacher (ui/follow.py, issue 29), page by page in AppTest: the teacher's runs publish the view once per
change; a follower's run applies a published view (page, widget values, URL); a hostile view is ignored with a
notice; moving a widget by hand leaves follow mode and says how to rejoin.

The reference is the class database itself (core.classroom.live): what the teacher's page published is read back with
LiveClass.view, and what a follower is given is written with LiveClass.publish, never through ui.follow. AppTest does
not fire run_every (TESTING.md): a plain run() stands for the rerun ui.live_class's pulse poll starts."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from streamlit.testing.v1 import AppTest

from core.classroom.live import LiveClass, TeacherView
from core.model.bundle import load_bundle
from tests.apptest import APP, all_text, fresh_visit, page_file, rerun_fragment
from ui import follow
from ui.live_class import FOLLOW_KEY, FOLLOW_PARAM, LEARNER_KEY, SEAT_PARAM, TEACHER_KEY
from ui.models import SHIPPED_DIR, SHIPPED_LABEL
from ui.teacher import UNLOCKED_KEY

PASSCODE = "test-teacher-7f3a"


@pytest.fixture
def live(tmp_path, monkeypatch, fresh_streamlit_caches) -> LiveClass:
    """A class database of this test's own, the one the app's pages open (LAB_CLASS_DB)."""
    monkeypatch.setenv("LAB_CLASS_DB", str(tmp_path / "class.db"))
    monkeypatch.delenv("LAB_DATABASE_URL", raising=False)
    monkeypatch.setenv("LAB_TEACHER_PASSCODE", PASSCODE)
    return LiveClass(tmp_path / "class.db")


def teacher(code: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state[UNLOCKED_KEY] = True
    at.session_state[TEACHER_KEY] = code
    return at


def learner(live: LiveClass, code: str, page: str | None = None, *, following: bool = True) -> AppTest:
    """A learner who joined `code`, on views/<page>.py, with Follow the teacher turned on (as clicked)."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state[LEARNER_KEY] = (code, live.join(code, "Ada"), "Ada")
    at.run()
    if page is not None:
        at.switch_page(page_file(page)).run()
    if following:
        at.toggle(key=FOLLOW_KEY).set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_teachers_runs_publish_each_change_once(live):
    code = live.open_session()
    at = ok(teacher(code).run())
    home = live.view(code)
    assert home is not None and home.page == ""  # the default page's url_path
    ok(at.switch_page("views/temperature.py").run())
    first = live.view(code)
    assert first is not None and first.page == "temperature" and first.seq == home.seq + 1
    assert "temperature" not in first.params  # at its default: a link would not carry it either

    ok(at.run())
    ok(at.run())
    assert live.view(code) == first  # plain reruns write nothing

    ok(at.slider(key="temperature").set_value(0.2).run())
    moved = live.view(code)
    assert moved is not None and moved.seq == first.seq + 1 and moved.params["temperature"] == "0.2"
    assert moved.params.get("model") == load_bundle(SHIPPED_DIR).version  # the model the teacher looks at
    assert "projector" not in moved.params  # the teacher's own screen

    ok(at.toggle(key="projector").set_value(True).run())
    assert live.view(code) == moved  # projecting changes nobody's view but the teacher's

    ok(at.switch_page("views/masks.py").run())
    masks = live.view(code)
    assert masks is not None and masks.page == "masks" and masks.seq == moved.seq + 1


def test_no_session_or_a_locked_teacher_publishes_nothing(live):
    code = live.open_session()
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state[TEACHER_KEY] = code  # opened, but this session is not unlocked
    ok(at.run())
    ok(at.switch_page("views/temperature.py").run())
    assert live.view(code) is None
    assert not [t for t in at.toggle if t.key == FOLLOW_KEY]  # not a learner either: no toggle


def test_a_follower_is_brought_to_the_teachers_page_and_values(live):
    code = live.open_session()
    at = learner(live, code)  # on the start page
    live.publish(code, "masks", {"mask_len0": "3", "mask_len1": "2"})
    ok(at.run())
    assert at.slider(key="mask_len0").value == 3 and at.slider(key="mask_len1").value == 2
    assert at.query_params["mask_len0"] == "3" and at.query_params["mask_len1"] == "2"

    # Same page, the teacher moves one slider back to its default and another one: both follow.
    live.publish(code, "masks", {"mask_len0": "1"})
    ok(at.run())
    assert at.slider(key="mask_len0").value == 1
    fresh = ok(AppTest.from_file(APP, default_timeout=60).run())
    default_len1 = ok(fresh.switch_page("views/masks.py").run()).slider(key="mask_len1").value
    assert at.slider(key="mask_len1").value == default_len1 != 2
    assert at.toggle(key=FOLLOW_KEY).value  # still following: nothing was moved by hand


def test_a_follower_comes_back_to_a_page_it_saw_with_the_teachers_values(live):
    """A page the learner visited keeps its widgets' values in the session (bound widgets are preserved): the
    teacher's values (and defaults) must still win over them."""
    code = live.open_session()
    at = learner(live, code, "temperature", following=False)
    ok(at.slider(key="temperature").set_value(3.0).run())
    ok(at.switch_page("views/masks.py").run())
    ok(at.toggle(key=FOLLOW_KEY).set_value(True).run())
    live.publish(code, "temperature", {})  # the teacher is at the default temperature
    ok(at.run())
    assert at.slider(key="temperature").value == 1.0  # views/temperature.py's default
    live.publish(code, "temperature", {"temperature": "0.35"})
    ok(at.run())
    assert at.slider(key="temperature").value == pytest.approx(0.35)


def test_a_stale_tick_after_a_follow_draws_the_teachers_page_again_with_its_values(live):
    """The blank page tests/e2e/test_follow.py once showed: the learner's poll ticked from the start page while the
    server switched to the teacher's page; Streamlit ran that tick as a run of the start page, which cleared the new
    page on screen. ui.fragment.polled switches back, and the page comes back with the teacher's values (the tick
    carried the start page's widgets and URL, as the browser sends them)."""
    from ui import fragment

    code = live.open_session()
    at = learner(live, code)  # on the start page
    start_page, shown = at.session_state[fragment._PAGE][0], at._tree.get_widget_states()  # what the browser shows
    url = urlencode(at.query_params, doseq=True)
    live.publish(code, "masks", {"mask_len0": "3"})
    ok(at.run())  # the pulse poll's rerun: the follower is brought to Masks
    assert at.slider(key="mask_len0").value == 3
    with_widgets = {m.fragment_id for m in at._session_state._state._new_widget_state.widget_metadata.values()}
    polls = [f for f in at._fragment_storage._fragments if f not in with_widgets]  # the sidebar's polls: no widgets
    assert len(polls) == 2, polls  # the pulse poll (ui.live_class) and the own-move poll (ui.follow)
    tree = rerun_fragment(at, polls[0], start_page, shown, url)  # a tick the browser sent from the start page
    assert not tree.exception, [e.value for e in tree.exception]
    assert [t.value for t in tree.title] == ["Masks"]  # the page drawn again, whole
    assert [s.value for s in tree.slider if s.key == "mask_len0"] == [3]  # with the teacher's value
    assert at.toggle(key=FOLLOW_KEY).value  # still following


HOSTILE = {
    "an unknown page": TeacherView("nosuchpage", {}, 1, ""),
    "a path for a page": TeacherView("../../etc/passwd", {}, 1, ""),
    "a number out of range": TeacherView("temperature", {"temperature": "99"}, 1, ""),
    "not a number": TeacherView("temperature", {"temperature": "![x](http://evil.example/p.png)"}, 1, ""),
    "an infinite number": TeacherView("temperature", {"temperature": "1e400"}, 1, ""),
    "a fraction for a whole number": TeacherView("masks", {"mask_len0": "3.5"}, 1, ""),
    "an oversize value": TeacherView("temperature", {"temperature": "1" * 5_000}, 1, ""),
    "an oversize text": TeacherView("temperature", {"scores": "é," * 2_000}, 1, ""),
    "an ill-formed key": TeacherView("temperature", {"bad key!": "1"}, 1, ""),
    "too many keys": TeacherView("temperature", {f"k{i}": "1" for i in range(60)}, 1, ""),
    "a model that is no version": TeacherView("temperature", {"model": "../../models"}, 1, ""),
}


def test_a_reload_of_a_following_page_follows_again_and_comes_back_to_the_teachers_page(live):
    """A reload is a new browser session from the address alone: the learner's seat and follow mode are in it, so the
    learner is brought to the teacher's page again, even from an address still at the page left (issue 38)."""
    code = live.open_session()
    at = learner(live, code)  # following, on the start page
    live.publish(code, "temperature", {"temperature": "0.35"})
    ok(at.run())
    assert [t.value for t in at.title] == ["Temperature"]
    address = {k: at.query_params[k] for k in (SEAT_PARAM, FOLLOW_PARAM)}  # kept through the page switch
    assert address == {SEAT_PARAM: at.session_state[LEARNER_KEY][1], FOLLOW_PARAM: "1"}

    again = fresh_visit(None, address)  # the reload, its address bar left at the start page
    assert again.session_state[LEARNER_KEY] == at.session_state[LEARNER_KEY]
    assert again.toggle(key=FOLLOW_KEY).value
    assert [t.value for t in again.title] == ["Temperature"]
    assert again.slider(key="temperature").value == pytest.approx(0.35)

    ok(again.toggle(key=FOLLOW_KEY).set_value(False).run())  # turned off: a reload no longer follows
    assert FOLLOW_PARAM not in again.query_params


@pytest.mark.parametrize("view", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_view_is_ignored_with_a_notice(live, monkeypatch, view):
    code = live.open_session()
    at = learner(live, code, "masks", following=False)
    ok(at.switch_page("views/temperature.py").run())
    ok(at.switch_page("views/masks.py").run())  # both pages' widgets seen: their values could be set from code
    ok(at.slider(key="mask_len0").set_value(5).run())
    before = (at.slider(key="mask_len0").value, dict(at.query_params))
    monkeypatch.setattr(LiveClass, "view", lambda self, code: view)  # as if the database held it
    ok(at.toggle(key=FOLLOW_KEY).set_value(True).run())
    address = dict(at.query_params)
    assert address.pop(FOLLOW_PARAM) == "1"  # following, kept for a reload
    assert (at.slider(key="mask_len0").value, address) == before  # still on Masks, as it was
    assert "The teacher's view was not applied" in all_text(at)
    assert "evil.example" not in all_text(at)  # the view's text is never quoted back
    assert at.toggle(key=FOLLOW_KEY).value  # the next good view is followed

    monkeypatch.setattr(LiveClass, "view", lambda self, code: TeacherView("masks", {"mask_len0": "2"}, 2, ""))
    ok(at.run())
    assert at.slider(key="mask_len0").value == 2 and "not applied" not in all_text(at)


def test_moving_a_slider_leaves_follow_mode_and_says_how_to_rejoin(live):
    code = live.open_session()
    live.publish(code, "temperature", {"temperature": "0.2"})
    at = learner(live, code)
    assert at.slider(key="temperature").value == pytest.approx(0.2)
    ok(at.slider(key="temperature").set_value(1.5).run())
    assert not at.toggle(key=FOLLOW_KEY).value
    assert follow.LEFT in [t.replace("\\", "") for t in (i.value for i in at.sidebar.info)]

    live.publish(code, "temperature", {"temperature": "0.4"})
    ok(at.run())
    assert at.slider(key="temperature").value == pytest.approx(1.5)  # not following: the learner's own value stays

    ok(at.toggle(key=FOLLOW_KEY).set_value(True).run())  # rejoin: the teacher's view again, the note gone
    assert at.slider(key="temperature").value == pytest.approx(0.4)
    assert at.toggle(key=FOLLOW_KEY).value and not at.sidebar.info


def test_the_model_the_teacher_picks_is_followed_and_picking_another_leaves(live, trained_bundle_path):
    """The teacher's model version (the picker's pin in the URL) follows too: a version this learner's server has
    is selected in the learner's picker; the learner picking another model by hand leaves follow mode."""
    code = live.open_session()
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["lab_session_bundles"] = [("Trained here", str(trained_bundle_path))]
    at.session_state["lab_bundle"] = SHIPPED_LABEL
    at.session_state[LEARNER_KEY] = (code, live.join(code, "Ada"), "Ada")
    ok(at.run())
    ok(at.toggle(key=FOLLOW_KEY).set_value(True).run())
    live.publish(code, "temperature", {"model": load_bundle(trained_bundle_path).version})
    ok(at.run())
    assert at.selectbox(key="lab_bundle").value == "Trained here"
    assert at.query_params["model"] == load_bundle(trained_bundle_path).version
    assert at.toggle(key=FOLLOW_KEY).value

    ok(at.selectbox(key="lab_bundle").set_value(SHIPPED_LABEL).run())
    assert not at.toggle(key=FOLLOW_KEY).value
    assert follow.LEFT_MODEL in [t.replace("\\", "") for t in (i.value for i in at.sidebar.info)]


def _two_fragments() -> None:
    import streamlit as st

    from ui import params

    @st.fragment
    def section() -> None:
        params.slider("A page's slider", "x", 0, 10, 5)

    @st.fragment
    def poll() -> None:
        st.button("A poll's tick", key="tick")

    section()
    poll()


def _run_fragment(at: AppTest, fragment_id: str | None) -> None:
    """Rerun as the browser asks for `fragment_id` (None: the whole script), sending every widget's value as set."""
    if fragment_id is None:
        at._run(at._tree.get_widget_states())
        ok(at)
    else:
        rerun_fragment(at, fragment_id)


def test_a_widget_counts_as_moved_by_hand_only_in_the_run_its_change_asked_for():
    """A poll's run_every tick sends the browser's widget values too, which may be older than a value just set from
    code: a difference seen in another fragment's run is no move of the learner's (the browser test once left follow
    mode by itself that way); the widget's own fragment's run, or a whole run, is."""
    from tests.apptest import fragment_of
    from ui.params import MOVED

    at = ok(AppTest.from_function(_two_fragments).run())
    section, poll = fragment_of(at, at.slider(key="x")), fragment_of(at, at.button(key="tick"))
    assert section is not None and poll is not None and section != poll

    at.slider(key="x").set_value(7)
    _run_fragment(at, poll)  # a tick carrying a value the browser held
    assert MOVED not in at.session_state
    at.slider(key="x").set_value(8)
    _run_fragment(at, section)  # the learner dragged it: its fragment reruns
    assert at.session_state[MOVED] == "x"
    del at.session_state[MOVED]
    at.slider(key="x").set_value(2)
    _run_fragment(at, None)
    assert at.session_state[MOVED] == "x"
