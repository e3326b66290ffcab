"""Checkpoint: questions across the lesson, answered first and graded after, kept for the teacher.

Numbers are drawn per learner by the lab's own code; answers go to the class database, and the class's results
are the teacher's, behind the same passcode as the release actions.
"""

import pandas as pd
import streamlit as st

from core import i18n
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
from core.i18n import _, ngettext
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


def columns(row: str) -> list[str]:
    """A table's column names, translated as one message ("learner|right|asked"): a short word alone ("right") would
    share its translation with the same word meaning something else."""
    return [name.strip() for name in row.split("|")]


def message(g: cp.Graded) -> str:
    """A graded answer's message in this run's language: graded again (the same answer, the same verdict) unless its
    given text was cut to MAX_ANSWER_CHARS, which another reading might grade otherwise."""
    return cp.grade(g.question, g.given).message if len(g.given) < cp.MAX_ANSWER_CHARS else g.message


st.title(_("Checkpoint"))
pass_percent = round(100 * PASS_MARK)
st.markdown(
    _(
        "{count} questions across the lesson. Answer them all first; the lab then grades each one with its own code "
        "and shows what it computes. You pass at {percent}% or more. Your numbers are drawn for you (from your name "
        "and class code), so your neighbour's differ."
    ).format(count=len(cp.QUESTIONS), percent=pass_percent)
)

learner = st.session_state.get(LEARNER_KEY)
if learner is None:
    with st.form("checkpoint_identity"):
        st.text_input(_("Your name"), key="checkpoint_name", max_chars=MAX_LEARNER)
        st.text_input(_("Class code (from your teacher)"), key="checkpoint_class", max_chars=32)
        st.form_submit_button(_("Start the checkpoint"), on_click=start)
    if st.session_state.get(NOTE_KEY):
        st.error(escape_markdown(st.session_state[NOTE_KEY]))
else:
    name, code, attempt = learner
    questions = cp.checkpoint(cp.learner_seed(name, code))
    st.markdown(
        _("Questions for **{name}**, class **{code}**.").format(name=escape_markdown(name), code=escape_markdown(code))
    )
    st.button(_("Start again under another name"), on_click=leave)
    graded = st.session_state.get(GRADED_KEY)
    with st.form("checkpoint_answers"):
        for i, q in enumerate(questions, start=1):
            st.markdown(f"**{i}. {escape_markdown(q.shown_prompt)}**")
            key = f"cp_answer_{q.id}"
            if q.is_choice:  # the options stay in English (graded, kept and counted as such), shown translated
                st.radio(
                    _("Your answer"), q.options, index=None, key=key, disabled=graded is not None, format_func=i18n._
                )
            else:
                st.text_input(
                    _("Your answer"),
                    key=key,
                    max_chars=cp.MAX_ANSWER_CHARS,
                    placeholder=_("a number; within ±{tolerance} counts as right").format(tolerance=f"{q.tolerance:g}"),
                    disabled=graded is not None,
                )
        submitted = st.form_submit_button(_("Submit my answers"), disabled=graded is not None)
    if submitted and graded is None:
        graded = [cp.grade(q, st.session_state.get(f"cp_answer_{q.id}")) for q in questions]
        st.session_state[GRADED_KEY] = graded
        try:
            store().record(name, code, attempt, [(g.question.id, g.given, g.correct) for g in graded])
        except (StoreError, ValueError) as e:
            st.error(
                _("Your answers are graded below but could not be kept for your teacher: {problem}").format(
                    problem=escape_markdown(e)
                )
            )
    if graded is not None:
        right = sum(g.correct for g in graded)
        percent = round(100 * right / len(graded))
        verdict(
            passes(right, len(graded)),
            _("Passed: {right} of {count} right ({percent}%).").format(right=right, count=len(graded), percent=percent),
            _(
                "Not yet: {right} of {count} right ({percent}%); {pass_percent}% passes. The pages linked below teach "
                "what was missed."
            ).format(right=right, count=len(graded), percent=percent, pass_percent=pass_percent),
        )
        for i, g in enumerate(graded, start=1):
            if g.correct and g.question.is_choice:  # its message is the bare word "right": said here in full
                line = _("**{number}. RIGHT**: you answered {given}; right. *{why}.*")
            else:
                line = _("**{number}. {mark}**: you answered {given}; {message}. *{why}.*")
            st.markdown(
                line.format(
                    number=i,
                    mark=_("RIGHT") if g.correct else _("WRONG"),
                    given=escape_markdown(
                        (i18n._(g.given) if g.question.is_choice else g.given) if g.given else _("(nothing)")
                    ),
                    message=escape_markdown(message(g)),
                    why=escape_markdown(i18n._(g.question.why)),
                )
            )
            revisit = _("Revisit: {topic}").format(topic=i18n._(g.question.topic))
            if not g.correct and not link_if_registered(g.question.page, revisit):
                st.caption(_("Taught on {page}.").format(page=g.question.page))
        st.button(_("Take it again"), on_click=again)

st.divider()
st.header(_("Teacher: the class's results"))
if teacher.gate(_("the class results"), why=_("name every learner and their answers")):
    db = store()
    if db.notice:
        st.warning(escape_markdown(db.notice))
    try:
        codes = db.class_codes()
    except StoreError as e:
        st.error(escape_markdown(e))
        codes = []
    if not codes:
        st.info(_("No answers have been kept yet. Learners' submissions appear here."))
    else:
        chosen = st.selectbox(_("Class code"), codes, key="checkpoint_teacher_class")
        answers = db.answers(chosen)
        summary = summarise(answers)
        rate = summary.pass_rate or 0.0
        st.metric(
            _("Pass rate (latest attempt of each learner)"),
            f"{i18n.number(100 * rate, 0)}%",
            help=_("{percent}% passes").format(percent=pass_percent),
        )
        projector.dataframe(
            pd.DataFrame(
                {
                    name: column
                    for name, column in zip(
                        columns(_("learner|right|asked|passed|at (UTC)")),
                        (
                            [s.learner for s in summary.learners],
                            [s.right for s in summary.learners],
                            [s.asked for s in summary.learners],
                            [_("yes") if s.passed else _("no") for s in summary.learners],
                            [s.at for s in summary.learners],
                        ),
                        strict=True,
                    )
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
            title=_("Share of learners who got each question wrong"),
            y_title=_("share wrong"),
            value_format=".0%",
            y_range=(0, 1.1),
        )
        wrong_counts, asked_counts = [d.wrong for d in summary.questions], [d.asked for d in summary.questions]
        question_h, wrong_h, asked_h = columns(_("question|wrong|asked"))
        table = pd.DataFrame({question_h: labels, wrong_h: wrong_counts, asked_h: asked_counts})
        hardest = summary.questions[0]
        chart(
            fig,
            table,
            ngettext(
                "{count} learners; pass rate {rate}%; the hardest question is {question}, missed by {wrong} of "
                "{asked}.",
                "{count} learners; pass rate {rate}%; the hardest question is {question}, missed by {wrong} of "
                "{asked}.",
                len(summary.learners),
            ).format(
                count=len(summary.learners),
                rate=i18n.number(100 * rate, 0),
                question=hardest.question,
                wrong=hardest.wrong,
                asked=hardest.asked,
            ),
            key="checkpoint_difficulty",
        )
        st.download_button(
            _("Download every answer of this class as CSV"),
            to_csv(answers).encode("utf-8"),
            file_name=f"checkpoint-{chosen}.csv",
            mime="text/csv",
            key="checkpoint_csv",
        )
