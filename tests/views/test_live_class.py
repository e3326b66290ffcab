"""ui.live_class and ui.predict in a class session (issue 29), with AppTest: one AppTest per browser (a teacher and
learners) on one class database. The expected counts come from the answers the test gives, never from the code
under test; AppTest never fires a fragment's run_every by itself, so each side reruns where a browser would poll."""

from __future__ import annotations

import pytest
from apptest import all_text, decode, figure, open_page, predict, signatures, unescaped

from core.classroom.live import LiveClass
from ui import live_class

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")

PASSCODE = "live-class-test-passcode"
QID = "temperature_predict"
SHARPER = "sharper: each row's largest weight grows, towards one-hot"
FLATTER = "flatter: the weights move towards uniform"
UNCHANGED = "unchanged: softmax only looks at the order of the scores"
SECRET_NAME = "Zelda Quixotic"  # a name that appears nowhere else in the lab


@pytest.fixture(autouse=True)
def class_db(tmp_path, monkeypatch):
    """Each test its own class database and a teacher passcode."""
    monkeypatch.setenv("LAB_CLASS_DB", str(tmp_path / "class.db"))
    monkeypatch.delenv("LAB_DATABASE_URL", raising=False)
    monkeypatch.delenv("LAB_JOIN_URL", raising=False)
    monkeypatch.setenv("LAB_TEACHER_PASSCODE", PASSCODE)
    return tmp_path / "class.db"


def teacher_opens(page: str = "temperature"):
    """A teacher's browser: the sidebar's gate unlocked with the passcode, a session opened. (AppTest, code)."""
    at = open_page(page)
    at.toggle(key="live_class_teacher_toggle").set_value(True).run()
    at.text_input(key="live_class_gate_passcode_input").set_value(PASSCODE)
    at.button(key="live_class_gate_unlock").click().run()
    at.button(key="live_class_open").click().run()
    assert not at.exception, [e.value for e in at.exception]
    code = at.session_state[live_class.TEACHER_KEY]
    assert LiveClass().is_open(code)
    return at, code


def learner_joins(code: str, name: str, page: str = "temperature"):
    at = open_page(page)
    at.text_input(key=live_class.CODE_INPUT).set_value(code)
    at.text_input(key=live_class.NAME_INPUT).set_value(name)
    at.button(key="live_class_join_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def room_counts(at) -> dict[str, dict[str, int]]:
    """The teacher's room chart: {series name: {option: count}}."""
    fig = figure(at, "The room's answers")
    return {
        trace["name"]: {unescaped(x): int(y) for x, y in zip(trace["x"], decode(trace["y"]), strict=True)}
        for trace in fig["data"]
    }


def measured(at) -> list:
    """The Temperature exercise's table of measures, drawn once the question is answered (or revealed)."""
    return [d.value for d in at.dataframe if "measure" in d.value.columns]


def page_text(at) -> str:
    """Everything the page shows as text: markdown and alerts, tables, charts' specs, widget labels and values."""
    parts = [all_text(at)]
    parts += [d.value.to_csv() for d in at.dataframe]
    parts += [el.proto.spec for el in at.get("plotly_chart")]
    parts += signatures(at._tree)
    return "\n".join(parts)


def test_without_a_session_the_page_is_as_before(monkeypatch):
    """No session: the main area (the predict box included) is element for element what it was before issue 29,
    the hooks replaced by the no-ops they were; the sidebar only gains the closed "Class session" expander."""
    live = open_page("temperature")
    assert [e.label for e in live.sidebar.get("expander")].count("Class session") == 1
    monkeypatch.setattr(live_class, "sidebar", lambda: None)
    monkeypatch.setattr(live_class, "teacher_session", lambda: None)
    monkeypatch.setattr(live_class, "revealed", lambda question: False)
    before = open_page("temperature")
    assert any("temperature_predict_answer" in e for e in signatures(before.main))  # the predict box is compared
    assert signatures(live.main) == signatures(before.main)
    assert "Class session" not in [e.label for e in before.sidebar.get("expander")]


def test_a_learner_joins_answers_and_the_teacher_counts_it_without_the_name():
    teacher, code = teacher_opens()
    learner = learner_joins(code.lower(), f"  {SECRET_NAME} ")  # typed in lower case, with spaces: still the code
    assert learner.session_state[live_class.LEARNER_KEY][0] == code
    assert f"In session **{code}**" in all_text(learner)
    predict(learner, QID, FLATTER)
    assert "not recorded" not in all_text(learner)

    teacher.run()  # the teacher's panel re-reads the room every second
    assert "**1 answered**" in all_text(teacher)
    counts = room_counts(teacher)
    assert counts == {"round 1": {SHARPER: 0, FLATTER: 1, UNCHANGED: 0}}
    assert SECRET_NAME.split()[0] not in page_text(teacher)
    assert "Zelda" not in page_text(teacher)
    # ... while the teacher's download has it
    assert SECRET_NAME in LiveClass().answers_csv(code)


def test_reveal_opens_the_page_of_a_learner_who_has_not_answered():
    teacher, code = teacher_opens()
    waiting = learner_joins(code, "Quiet one")
    assert "The lab's own answer appears below once you have checked" in all_text(waiting)
    assert not measured(waiting)
    pulse = LiveClass().pulse(code)

    teacher.button(key=f"{QID}_reveal").click().run()
    assert not teacher.exception
    assert LiveClass().round(code, QID).revealed
    assert LiveClass().pulse(code) > pulse  # what the learners' pages poll

    waiting.run()  # the pulse changed: the learner's page reruns
    text = unescaped(all_text(waiting))
    assert "Your teacher revealed the lab's answer: sharper" in text
    assert measured(waiting)  # the section the answer opens: the measured table
    # checking after the reveal is still graded here, and the page says it was not recorded for the teacher
    predict(waiting, QID, SHARPER)
    assert "not recorded for your teacher" in unescaped(all_text(waiting))


def test_a_new_round_keeps_the_first_beside_it():
    teacher, code = teacher_opens()
    learners = [learner_joins(code, f"Learner {i}") for i in range(3)]
    for at, answer in zip(learners, [FLATTER, FLATTER, SHARPER], strict=True):
        predict(at, QID, answer)
    teacher.run()
    assert room_counts(teacher)["round 1"][FLATTER] == 2

    teacher.button(key=f"{QID}_new_round").click().run()
    assert "**The room, round 2** (open): **0 answered**" in all_text(teacher)
    for at in learners:  # after the discussion everyone changes their mind
        at.run()
        predict(at, QID, SHARPER)
    teacher.run()
    counts = room_counts(teacher)
    assert counts["round 1"][FLATTER] == 2 and counts["round 1"][SHARPER] == 1
    assert counts["round 2"][FLATTER] == 0 and counts["round 2"][SHARPER] == 3
    assert "**3 answered**" in all_text(teacher)


@pytest.mark.parametrize(
    "counts, says",
    [
        ([0, 1, 0, 1], "key 1 and key 3 tied, 1 each"),
        ([2, 0, 2, 2], "key 0, key 2 and key 3 tied, 2 each"),
        ([1, 0, 0, 3], "most chose key 3, 3 of 4"),
        ([0, 0, 0, 0], ""),
    ],
)
def test_the_rooms_most_chosen_answer_names_every_answer_of_a_tie(counts, says):
    assert live_class.most_chosen([f"key {s}" for s in range(4)], counts) == says


def test_a_tie_in_the_room_is_said_as_one():
    teacher, code = teacher_opens()
    for i, answer in enumerate([SHARPER, FLATTER]):
        predict(learner_joins(code, f"Tie {i}"), QID, answer)
    teacher.run()
    [summary] = [c.value for c in teacher.caption if c.value.startswith("round 1: 2 answered")]
    assert summary == f"round 1: 2 answered. Round 1: {SHARPER} and {FLATTER} tied, 1 each."


def test_a_changed_answer_replaces_the_first_in_the_round():
    teacher, code = teacher_opens()
    learner = learner_joins(code, "Changes mind")
    predict(learner, QID, FLATTER)
    predict(learner, QID, SHARPER)
    teacher.run()
    assert room_counts(teacher)["round 1"][SHARPER] == 1 and room_counts(teacher)["round 1"][FLATTER] == 0


@pytest.mark.parametrize(
    "code, name, says",
    [
        ("ABC", "Sam", "a session code is 6 letters and digits"),
        ("I0O1LZ", "Sam", "a session code is 6 letters and digits"),  # look-alikes are never in a code
        ("ZZZZZZ", "Sam", "no session has the code ZZZZZZ"),
        ("open", "   ", "enter your name"),
        ("open", "Sam\x07", "control characters"),
    ],
)
def test_a_bad_code_or_name_is_said_in_one_line_and_the_form_keeps_it(code, name, says):
    if code == "open":
        _, code = teacher_opens()
    at = learner_joins(code, name)
    assert live_class.LEARNER_KEY not in at.session_state
    [warning] = [w.value for w in at.sidebar.get("warning")]
    assert says in unescaped(warning) and warning.startswith("Not joined") and "\n" not in warning
    assert at.text_input(key=live_class.CODE_INPUT).value == code
    assert at.text_input(key=live_class.NAME_INPUT).value == name


def test_a_closed_session_takes_no_answer_and_the_learner_is_told():
    teacher, code = teacher_opens()
    learner = learner_joins(code, "Late")
    teacher.button(key="live_class_close").click().run()
    assert not LiveClass().is_open(code) and live_class.TEACHER_KEY not in teacher.session_state
    learner.run()
    assert f"Class session {code} has ended" in all_text(learner)
    assert live_class.LEARNER_KEY not in learner.session_state


def test_a_join_link_fills_the_code_and_a_bad_one_is_refused_without_echo():
    from apptest import fresh_visit

    _, code = teacher_opens()
    at = fresh_visit("temperature", {"session": code.lower()})
    assert at.text_input(key=live_class.CODE_INPUT).value == code
    crafted = "![x](http://evil.example/p.png)"
    at = fresh_visit("temperature", {"session": crafted})
    assert at.text_input(key=live_class.CODE_INPUT).value == ""
    assert "evil" not in all_text(at)
    assert "The link's session code is not one" in all_text(at)


def test_numbers_are_counted_in_bins_for_the_teacher():
    """Masks' question is a number: three answers, two of them within one bin's width, one far off."""
    teacher, code = teacher_opens("masks")
    for i, answer in enumerate(["0.5", "0.5", "0.9"]):
        predict(learner_joins(code, f"N{i}", "masks"), "masks_predict", answer)
    teacher.run()
    [series] = room_counts(teacher).values()
    assert sorted(n for n in series.values() if n) == [1, 2]
    assert "**3 answered**" in all_text(teacher)


def test_a_learner_with_other_sliders_answers_another_version():
    """The teacher's chart counts answers to the teacher's own version of the question (its fingerprint); a learner
    whose factor slider differs is counted apart and said."""
    teacher, code = teacher_opens()
    learner = learner_joins(code, "Explorer")
    learner.slider(key="factor").set_value(15.0).run()
    predict(learner, QID, SHARPER)
    teacher.run()
    assert "**0 answered**" in all_text(teacher)
    assert "1 more answered another version of this question" in all_text(teacher)
    assert not teacher.get("plotly_chart") or "The room's answers" not in page_text(teacher)


def test_a_teacher_resumes_an_open_session_after_a_reload():
    _, code = teacher_opens()
    again = open_page("temperature")  # a reload: a new browser session, locked, the session forgotten
    again.toggle(key="live_class_teacher_toggle").set_value(True).run()
    again.text_input(key="live_class_gate_passcode_input").set_value(PASSCODE)
    again.button(key="live_class_gate_unlock").click().run()
    again.text_input(key=live_class.RESUME_INPUT).set_value("ZZZZZZ")
    again.button(key="live_class_resume_button").click().run()
    assert "Not resumed: the session ZZZZZZ is not open" in unescaped(all_text(again))
    again.text_input(key=live_class.RESUME_INPUT).set_value(code)
    again.button(key="live_class_resume_button").click().run()
    assert again.session_state[live_class.TEACHER_KEY] == code
    assert "**The room, round 1** (open): **0 answered**" in all_text(again)


def test_the_room_chart_stays_out_of_the_view_export():
    """Redrawn every second on its own, it would pile up in the sidebar's "Download this view" file."""
    from ui import export

    teacher, code = teacher_opens()
    predict(learner_joins(code, "One"), QID, SHARPER)
    teacher.run()
    assert room_counts(teacher)  # drawn ...
    titles = [shown.fig.layout.title.text for shown in teacher.session_state[export._VIEW]]
    assert titles and not any("room" in t for t in titles), titles  # ... and not exported


def test_a_learners_page_reruns_for_what_it_shows_not_for_every_move_of_the_teacher():
    """The pulse moves at every publish of the teacher's view (ui.follow), reveal, new round and close. A learner's page
    that does not follow reruns only for a reveal or new round of a question it asked, or a closed session."""
    teacher, code = teacher_opens()
    learner = learner_joins(code, "Watcher")
    shown = learner.session_state[live_class._ROUNDS_KEY]
    assert shown == {QID: (1, False)}  # the page's question, as the page showed it
    classes = LiveClass()

    classes.publish(code, "temperature", {"factor": "12"})  # the teacher moved a slider
    assert not live_class.changed(classes, code, shown, following=False)
    assert live_class.changed(classes, code, shown, following=True)  # a follower applies the view
    classes.reveal(code, "other_question")  # another page's question
    assert not live_class.changed(classes, code, shown, following=False)

    classes.reveal(code, QID)
    assert live_class.changed(classes, code, shown, following=False)
    learner.run()  # the rerun the poll asks for: the page shows the reveal and records it
    assert learner.session_state[live_class._ROUNDS_KEY] == {QID: (1, True)}
    assert not live_class.changed(classes, code, learner.session_state[live_class._ROUNDS_KEY], following=False)

    classes.new_round(code, QID)
    assert live_class.changed(classes, code, {QID: (1, True)}, following=False)
    classes.close_session(code)
    assert live_class.changed(classes, code, {}, following=False)


@pytest.mark.parametrize("page", ["release", "checkpoint"])
def test_the_sidebar_gate_sits_beside_a_pages_own_and_unlocks_both(page):
    """Release and Checkpoint draw ui.teacher's gate too: the sidebar's has its own widget keys, and one unlock (the
    session's) opens both."""
    at = open_page(page)
    at.toggle(key="live_class_teacher_toggle").set_value(True).run()
    assert not at.exception
    assert [t.key for t in at.text_input if t.key and "passcode" in t.key].count("teacher_passcode_input") == 1
    at.text_input(key="live_class_gate_passcode_input").set_value(PASSCODE)
    at.button(key="live_class_gate_unlock").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.button(key="teacher_lock")  # the page's own gate is unlocked by the same passcode
    assert at.button(key="live_class_open")


# ---- issue 35: hostile numbers, a database removed mid-class, names and lost places ------------------------


def test_a_huge_number_is_refused_with_the_range_and_a_stored_one_never_breaks_the_room(class_db):
    import sqlite3

    teacher, code = teacher_opens("masks")
    learner = learner_joins(code, "Big", "masks")
    predict(learner, "masks_predict", "1e308")
    said = unescaped(all_text(learner))
    assert "not recorded for your teacher" in said and "between -1e+06 and 1e+06" in said
    teacher.run()
    assert not teacher.exception and "**0 answered**" in all_text(teacher)

    predict(learner, "masks_predict", "0.5")
    with sqlite3.connect(class_db) as conn:  # a row kept before the bound, or by another version of the lab
        conn.execute("UPDATE live_answers SET answer = ?", ("9" * 190,))
    conn.close()
    teacher.run()
    assert not teacher.exception, [e.value for e in teacher.exception]
    assert "**1 answered**" in all_text(teacher) and "1 unreadable" in page_text(teacher)
    assert teacher.button(key="masks_predict_reveal") and teacher.button(key="masks_predict_new_round")


def test_the_rooms_reveal_and_new_round_show_even_when_its_chart_fails(monkeypatch):
    teacher, code = teacher_opens()
    predict(learner_joins(code, "One"), QID, SHARPER)

    def broken(*_):
        raise RuntimeError("the chart could not be drawn")

    drawn = live_class._room_chart
    monkeypatch.setattr(live_class, "_room_chart", broken)
    teacher.run()
    assert teacher.exception  # the failure is the chart's own ...
    assert teacher.button(key=f"{QID}_reveal") and teacher.button(key=f"{QID}_new_round")  # ... the controls stay
    monkeypatch.setattr(live_class, "_room_chart", drawn)
    teacher.button(key=f"{QID}_reveal").click().run()
    assert LiveClass().round(code, QID).revealed


def test_a_second_learner_under_a_taken_name_is_asked_for_another_and_the_form_keeps_it():
    _, code = teacher_opens()
    learner_joins(code, "Sam Smith")
    again = learner_joins(code, "  sam   SMITH ")
    assert live_class.LEARNER_KEY not in again.session_state
    [warning] = [w.value for w in again.sidebar.get("warning")]
    assert "already has that name" in unescaped(warning) and "another name" in unescaped(warning)
    assert again.text_input(key=live_class.NAME_INPUT).value == "  sam   SMITH "


def test_a_learner_whose_session_was_lost_takes_their_place_again_and_is_counted_once():
    from apptest import fresh_visit

    teacher, code = teacher_opens()
    learner = learner_joins(code, "Reconnects")
    _, me, _ = learner.session_state[live_class.LEARNER_KEY]
    assert learner.query_params[live_class.SEAT_PARAM] == me  # the address keeps the place
    predict(learner, QID, FLATTER)

    back = fresh_visit("temperature", {live_class.SEAT_PARAM: me})  # a worker restarted: a new session, same address
    assert back.session_state[live_class.LEARNER_KEY] == (code, me, "Reconnects")
    assert f"You are back in session {code}" in unescaped(all_text(back))
    predict(back, QID, SHARPER)  # the same learner: replaces the answer, not a second one
    teacher.run()
    assert "**1 answered**" in all_text(teacher)
    assert room_counts(teacher)["round 1"][SHARPER] == 1

    lost = fresh_visit("temperature", {live_class.SEAT_PARAM: "0" * 32})  # a place the class database does not have
    assert live_class.LEARNER_KEY not in lost.session_state
    assert "You are no longer in a class session" in unescaped(all_text(lost))
    assert live_class.SEAT_PARAM not in lost.query_params


def test_a_class_database_removed_mid_class_is_said_to_the_learner_and_the_teacher(class_db):
    teacher, code = teacher_opens()
    learner = learner_joins(code, "Keeps going")
    predict(learner, QID, FLATTER)
    teacher.run()
    assert "**1 answered**" in all_text(teacher)
    for found in class_db.parent.glob(class_db.name + "*"):  # rm class.db*
        if not found.name.endswith(".lock"):
            found.unlink()

    predict(learner, QID, SHARPER)
    said = unescaped(all_text(learner))  # in the sidebar, after the poll's rerun (the learner's pulse moved)
    assert "not recorded for your teacher" in said and "removed or replaced" in said
    teacher.run()
    assert not teacher.exception, [e.value for e in teacher.exception]
    assert "removed or replaced" in unescaped(all_text(teacher)) and "answered**" not in all_text(teacher)
