"""Checkpoint: questions across the lesson, answered first and graded after, kept for the teacher.

Numbers are drawn per learner by the lab's own code; answers go to the class database, and the class's results
are the teacher's, behind the same passcode as the release actions.
"""

import pandas as pd
import streamlit as st

from core.classroom import checkpoint as cp
from core.classroom.results import PASS_MARK, passes, summarise, to_csv
from core.classroom.store import (
    MAX_LEARNER,
    ClassStore,
    check_class_code,
    check_learner,
    class_db_location,
    new_attempt,
)
from core.database import StoreError
from ui import charts, projector, teacher
from ui.companion import chart
from ui.text import escape_markdown, link_if_registered, verdict

LEARNER_KEY = "checkpoint_learner"  # (name, class code, attempt id) once the learner has started
GRADED_KEY = "checkpoint_graded"  # the graded submission, once submitted
NOTE_KEY = "checkpoint_note"


@st.cache_resource(max_entries=4)
def class_store(path: str) -> ClassStore:
    return ClassStore(path)


def store() -> ClassStore:
    return class_store(class_db_location())


def start() -> None:
    try:
        name = check_learner(st.session_state.get("checkpoint_name"))
        code = check_class_code(st.session_state.get("checkpoint_class"))
    except ValueError as e:
        st.session_state[NOTE_KEY] = str(e)
        return
    st.session_state.pop(NOTE_KEY, None)
    st.session_state[LEARNER_KEY] = (name, code, new_attempt())
    st.session_state.pop(GRADED_KEY, None)


def again() -> None:
    """A new attempt with the same numbers: the answers stay in their fields, ready to change."""
    name, code, _ = st.session_state[LEARNER_KEY]
    st.session_state[LEARNER_KEY] = (name, code, new_attempt())
    st.session_state.pop(GRADED_KEY, None)


def leave() -> None:
    for key in (LEARNER_KEY, GRADED_KEY, NOTE_KEY):
        st.session_state.pop(key, None)
    for name in list(st.session_state):
        if str(name).startswith("cp_answer_"):
            del st.session_state[name]


st.title("Checkpoint")
pass_percent = round(100 * PASS_MARK)
st.markdown(
    f"{len(cp.QUESTIONS)} questions across the lesson. Answer them all first; the lab then grades each one with "
    f"its own code and shows what it computes. You pass at {pass_percent}% or more. Your numbers are drawn "
    "for you (from your name and class code), so your neighbour's differ."
)

learner = st.session_state.get(LEARNER_KEY)
if learner is None:
    with st.form("checkpoint_identity"):
        st.text_input("Your name", key="checkpoint_name", max_chars=MAX_LEARNER)
        st.text_input("Class code (from your teacher)", key="checkpoint_class", max_chars=32)
        st.form_submit_button("Start the checkpoint", on_click=start)
    if st.session_state.get(NOTE_KEY):
        st.error(escape_markdown(st.session_state[NOTE_KEY]))
else:
    name, code, attempt = learner
    questions = cp.checkpoint(cp.learner_seed(name, code))
    st.markdown(f"Questions for **{escape_markdown(name)}**, class **{escape_markdown(code)}**.")
    st.button("Start again under another name", on_click=leave)
    graded = st.session_state.get(GRADED_KEY)
    with st.form("checkpoint_answers"):
        for i, q in enumerate(questions, start=1):
            st.markdown(f"**{i}. {escape_markdown(q.prompt)}**")
            key = f"cp_answer_{q.id}"
            if q.is_choice:
                st.radio("Your answer", q.options, index=None, key=key, disabled=graded is not None)
            else:
                st.text_input(
                    "Your answer",
                    key=key,
                    max_chars=cp.MAX_ANSWER_CHARS,
                    placeholder=f"a number; within ±{q.tolerance:g} counts as right",
                    disabled=graded is not None,
                )
        submitted = st.form_submit_button("Submit my answers", disabled=graded is not None)
    if submitted and graded is None:
        graded = [cp.grade(q, st.session_state.get(f"cp_answer_{q.id}")) for q in questions]
        st.session_state[GRADED_KEY] = graded
        try:
            store().record(name, code, attempt, [(g.question.id, g.given, g.correct) for g in graded])
        except (StoreError, ValueError) as e:
            st.error(f"Your answers are graded below but could not be kept for your teacher: {escape_markdown(e)}")
    if graded is not None:
        right = sum(g.correct for g in graded)
        percent = round(100 * right / len(graded))
        verdict(
            passes(right, len(graded)),
            f"Passed: {right} of {len(graded)} right ({percent}%).",
            f"Not yet: {right} of {len(graded)} right ({percent}%); {pass_percent}% passes. The pages linked below "
            "teach what was missed.",
        )
        for i, g in enumerate(graded, start=1):
            mark = "right" if g.correct else "wrong"
            st.markdown(
                f"**{i}. {mark.upper()}**: you answered {escape_markdown(g.given or '(nothing)')}; "
                f"{escape_markdown(g.message)}. *{escape_markdown(g.question.why)}.*"
            )
            if not g.correct and not link_if_registered(g.question.page, f"Revisit: {g.question.topic}"):
                st.caption(f"Taught on {g.question.page}.")
        st.button("Take it again", on_click=again)

st.divider()
st.header("Teacher: the class's results")
if teacher.gate("the class results", why="name every learner and their answers"):
    db = store()
    if db.notice:
        st.warning(escape_markdown(db.notice))
    try:
        codes = db.class_codes()
    except StoreError as e:
        st.error(escape_markdown(e))
        codes = []
    if not codes:
        st.info("No answers have been kept yet. Learners' submissions appear here.")
    else:
        chosen = st.selectbox("Class code", codes, key="checkpoint_teacher_class")
        answers = db.answers(chosen)
        summary = summarise(answers)
        rate = summary.pass_rate or 0.0
        st.metric("Pass rate (latest attempt of each learner)", f"{100 * rate:.0f}%", help=f"{pass_percent}% passes")
        projector.dataframe(
            pd.DataFrame(
                {
                    "learner": [s.learner for s in summary.learners],
                    "right": [s.right for s in summary.learners],
                    "asked": [s.asked for s in summary.learners],
                    "passed": ["yes" if s.passed else "no" for s in summary.learners],
                    "at (UTC)": [s.at for s in summary.learners],
                }
            ),
            hide_index=True,
            key="checkpoint_learners",
        )
        labels = [d.question for d in summary.questions]
        shares = [d.share_wrong for d in summary.questions]
        fig = charts.bars(
            labels,
            shares,
            title="Share of learners who got each question wrong",
            y_title="share wrong",
            value_format=".0%",
            y_range=(0, 1.1),
        )
        wrong_counts, asked_counts = [d.wrong for d in summary.questions], [d.asked for d in summary.questions]
        table = pd.DataFrame({"question": labels, "wrong": wrong_counts, "asked": asked_counts})
        hardest = summary.questions[0]
        chart(
            fig,
            table,
            f"{len(summary.learners)} learners; pass rate {100 * rate:.0f}%; the hardest question is "
            f"{hardest.question}, missed by {hardest.wrong} of {hardest.asked}.",
            key="checkpoint_difficulty",
        )
        st.download_button(
            "Download every answer of this class as CSV",
            to_csv(answers).encode("utf-8"),
            file_name=f"checkpoint-{chosen}.csv",
            mime="text/csv",
            key="checkpoint_csv",
        )
