"""A class session's language is the teacher's, followed by its learners (issue 39), with AppTest: one AppTest per
browser (a teacher and a learner) on one class database. The teacher's language goes out with the teacher's view
(ui.follow), a learner who joined reads it under ui.language.CLASS_KEY (ui.live_class), following or not, and a
learner who picked a language keeps theirs. AppTest never fires a fragment's run_every: the learner's pulse poll is
run as the browser's tick would run it (tests.apptest.rerun_fragment)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core import i18n
from core.classroom.live import LANGUAGE, LiveClass
from core.i18n import _
from tests.apptest import APP, open_page, rerun_fragment
from ui import language, live_class

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")

PASSCODE = "class-language-test-passcode"


@pytest.fixture(autouse=True)
def class_db(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CLASS_DB", str(tmp_path / "class.db"))
    monkeypatch.delenv("LAB_DATABASE_URL", raising=False)
    monkeypatch.delenv("LAB_JOIN_URL", raising=False)
    monkeypatch.setenv("LAB_TEACHER_PASSCODE", PASSCODE)
    return tmp_path / "class.db"


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def as_shown(at: AppTest):
    """The language `at`'s page was last drawn in, for the test's own side of a run: AppTest formats each widget's
    value with the widget's format_func in the test's thread (to send it as the browser would), and a translated
    format_func must then speak the page's language."""
    return i18n.speaking(at.sidebar.selectbox(key=language.PICKER).value)


def pick(at: AppTest, code: str) -> AppTest:
    """The sidebar's language picker set to `code`, as a reader picks it."""
    with as_shown(at):
        return ok(at.sidebar.selectbox(key=language.PICKER).set_value(code).run())


def rerun(at: AppTest) -> AppTest:
    with as_shown(at):
        return ok(at.run())


def shown_language(at: AppTest) -> str:
    return at.sidebar.selectbox(key=language.PICKER).value  # the picker shows the run's language


def class_session_label(at: AppTest) -> str:
    return next(e.label for e in at.sidebar.get("expander") if e.label != "")


def teacher_opens(page: str = "temperature") -> tuple[AppTest, str]:
    at = open_page(page)
    at.toggle(key="live_class_teacher_toggle").set_value(True).run()
    at.text_input(key="live_class_gate_passcode_input").set_value(PASSCODE)
    at.button(key="live_class_gate_unlock").click().run()
    at.button(key="live_class_open").click().run()
    return ok(at), at.session_state[live_class.TEACHER_KEY]


def learner_joins(code: str, name: str, page: str = "temperature", *, own: str | None = None) -> AppTest:
    """A learner's browser joining `code`; `own`: a language the learner picked first."""
    at = open_page(page)
    if own is not None:
        pick(at, own)
    at.text_input(key=live_class.CODE_INPUT).set_value(code)
    at.text_input(key=live_class.NAME_INPUT).set_value(name)
    with as_shown(at):
        return ok(at.button(key="live_class_join_button").click().run())


def poll_tick(at: AppTest) -> bool:
    """The learner's pulse poll as a run_every tick (the sidebar's fragments that draw no widget: the pulse poll,
    and ui.follow's own-move poll while following, which this learner is not); True when it reran the whole page."""
    with_widgets = {m.fragment_id for m in at._session_state._state._new_widget_state.widget_metadata.values()}
    polls = [f for f in at._fragment_storage._fragments if f not in with_widgets]
    assert len(polls) == 1, polls
    with as_shown(at):
        tree = rerun_fragment(at, polls[0])
    if tree.title:  # the poll reran the whole page (st.rerun): the browser now shows that page
        at._tree = tree
    return bool(tree.title)


def test_a_learner_who_joined_reads_the_teachers_language_and_follows_its_changes():
    teacher, code = teacher_opens()
    pick(teacher, "es")
    assert LiveClass().view(code).params[LANGUAGE] == "es"  # published with the teacher's view

    learner = learner_joins(code, "Ada")
    assert not learner.toggle(key=live_class.FOLLOW_KEY).value  # not following the teacher: the language all the same
    assert learner.session_state[language.CLASS_KEY] == "es"
    assert shown_language(learner) == "es"
    with i18n.speaking("es"):
        assert class_session_label(learner) == _("Class session") != "Class session"
        assert _("Leave the session") in [b.label for b in learner.sidebar.button]
    assert language.PARAM not in learner.query_params  # the class's language is not the learner's own choice

    pick(teacher, "zh")  # the teacher changes language: a new view, a new pulse
    assert LiveClass().view(code).params[LANGUAGE] == "zh"
    assert poll_tick(learner)  # the learner's next poll reruns the whole page in the new language
    assert learner.session_state[language.CLASS_KEY] == "zh"
    assert shown_language(learner) == "zh"
    with i18n.speaking("zh"):
        assert class_session_label(learner) == _("Class session")

    pick(teacher, "en")  # English: no LANGUAGE entry in the view, and the learner reads English again
    assert LANGUAGE not in LiveClass().view(code).params
    assert poll_tick(learner)
    assert shown_language(learner) == "en" and class_session_label(learner) == "Class session"


def test_a_learner_who_chose_a_language_keeps_it():
    teacher, code = teacher_opens()
    pick(teacher, "es")
    learner = learner_joins(code, "Bo", own="zh")
    assert learner.session_state[language.CLASS_KEY] == "es"  # the class's, kept for a learner without a choice
    assert shown_language(learner) == "zh"
    with i18n.speaking("zh"):
        assert class_session_label(learner) == _("Class session")

    pick(teacher, "en")
    assert not poll_tick(learner)  # the pulse moved, the learner's language did not: no rerun
    assert shown_language(rerun(learner)) == "zh"


def test_leaving_the_session_leaves_its_language():
    teacher, code = teacher_opens()
    pick(teacher, "es")
    learner = learner_joins(code, "Cy")
    assert shown_language(learner) == "es"
    with as_shown(learner):
        ok(learner.button(key="live_class_leave").click().run())
    assert language.CLASS_KEY not in learner.session_state
    assert shown_language(learner) == "en"  # AppTest has no browser language: English


def test_a_follower_is_brought_to_the_teachers_page_in_the_teachers_language_never_through_the_address():
    classes = LiveClass()
    code = classes.open_session()
    learner = AppTest.from_file(APP, default_timeout=60)
    learner.session_state[live_class.LEARNER_KEY] = (code, classes.join(code, "Di"), "Di")
    ok(learner.run())
    ok(learner.toggle(key=live_class.FOLLOW_KEY).set_value(True).run())
    classes.publish(code, "masks", {LANGUAGE: "es", "mask_len0": "3"})
    rerun(learner)  # the rerun the pulse poll starts for a follower: brought to Masks
    assert learner.slider(key="mask_len0").value == 3
    assert shown_language(learner) == "es"
    with i18n.speaking("es"):
        assert [t.value for t in learner.title] == [_("Masks")]
    assert language.PARAM not in learner.query_params  # the class's language, not the learner's own choice
    assert learner.toggle(key=live_class.FOLLOW_KEY).value


def test_a_published_language_is_one_of_the_labs():
    classes = LiveClass()
    code = classes.open_session()
    with pytest.raises(ValueError, match="language"):
        classes.publish(code, "masks", {LANGUAGE: "xx"})
    classes.publish(code, "masks", {LANGUAGE: "zh"})
    assert classes.view(code).language == "zh"
    classes.publish(code, "masks", {})
    assert classes.view(code).language == i18n.DEFAULT
