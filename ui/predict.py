"""Predict, then reveal: one question a lab page asks before it shows its own computed answer.

The page builds the question from its current inputs (its answer is what core computes for them) and shows what
gives the answer away only once the learner has checked, graded as the checkpoint grades. When an input moves the
question changes, so the page asks again with the old answer cleared. Prompts, options and answers may hold learner
or model text, so all of it is escaped. In a class session a check is recorded under the question's fingerprint
(the same on every worker), and a reveal opens the page for a learner who has not checked.
"""

from __future__ import annotations

import streamlit as st

from core import i18n
from core.classroom.checkpoint import MAX_ANSWER_CHARS, Graded, Question, grade, parse_number
from core.classroom.live import fingerprint
from core.i18n import N_, _
from ui import live_class
from ui.text import escape_markdown

MAX_RADIO_OPTIONS = 8  # more choices than this are a selectbox, one line tall
_CHECKED = "_predict_checked_{}"  # session key: (fingerprint, Graded) of the last check of a question id
_ASKED = "_predict_asked_{}"  # session key: the fingerprint of the question last shown under an id
REVEALED = N_("revealed by the teacher")  # the message of the Graded `ask` returns for a revealed question


FULL_STOPS = ("。", "！", "？", "：", "；")  # a sentence that ends in one of these (Chinese) needs no space after it


def sentences(*parts: str) -> str:
    """Translated sentences as one paragraph: a space between two, none after a full-width stop (Chinese)."""
    text = ""
    for part in parts:
        if part:
            text += part if not text or text.endswith(FULL_STOPS) else " " + part
    return text


def _unreadable(text: str) -> str | None:
    try:
        parse_number(text)
    except ValueError as e:
        return str(e)
    return None


def checked(question: Question) -> Graded | None:
    """The learner's check of this very question (same prompt, options and answer), or None."""
    stored = st.session_state.get(_CHECKED.format(question.id))
    return stored[1] if stored is not None and stored[0] == fingerprint(question) else None


def answer_key(question: Question) -> str:
    return f"{question.id}_answer"


def _fresh_answer(question: Question) -> None:
    """Empty the answer field when the question under this id is not the one last shown (a widget moved).

    Set, not deleted: a value set from code reaches the browser, which would otherwise keep showing the old
    choice for a radio whose options did not change."""
    shown = _ASKED.format(question.id)
    digest = fingerprint(question)
    if shown in st.session_state and st.session_state[shown] != digest:
        st.session_state[answer_key(question)] = None if question.is_choice else ""
    st.session_state[shown] = digest


def ask(question: Question, *, hint: str) -> Graded | None:
    """Show `question` with an answer field, `hint` in an expander and a check button; after the check, the
    verdict. Returns the Graded answer once the learner has checked this question (or, in a class session, once the
    teacher has revealed it: message REVEALED), else None."""
    _fresh_answer(question)
    digest = fingerprint(question)
    with st.container(border=True):
        st.markdown(_("**Predict first.** {question}").format(question=escape_markdown(question.shown_prompt)))
        shown = {option: _(option) for option in question.options}  # shown in the reader's words; values stay English
        with st.form(f"{question.id}_form", border=False):
            if question.is_choice and len(question.options) <= MAX_RADIO_OPTIONS:
                given = st.radio(
                    _("Your prediction"),
                    question.options,
                    index=None,
                    key=answer_key(question),
                    format_func=lambda option: escape_markdown(shown[option]),
                )
            elif question.is_choice:  # one radio row per key of a long text would push the page down screens
                given = st.selectbox(
                    _("Your prediction"),
                    question.options,
                    index=None,
                    key=answer_key(question),
                    format_func=shown.__getitem__,
                    placeholder=_("Choose one of {count}").format(count=len(question.options)),
                )  # a selectbox shows its options as plain text: nothing to escape
            else:
                given = st.text_input(
                    _("Your prediction (a number; within {tolerance} of the lab's counts as right)").format(
                        tolerance=i18n.formatted(question.tolerance, "g")
                    ),
                    key=answer_key(question),
                    max_chars=MAX_ANSWER_CHARS,
                )
            with st.expander(_("Hint")):
                st.markdown(hint)
            submitted = st.form_submit_button(_("Check my prediction"), key=f"{question.id}_check")
        if submitted:
            if given is None or not str(given).strip():
                st.warning(_("Choose or type your prediction first; the lab then shows its answer."))
            elif not question.is_choice and (problem := _unreadable(given)):
                st.warning(
                    escape_markdown(
                        _("Your prediction could not be read: {problem}. Nothing was checked yet.").format(
                            problem=problem
                        )
                    )
                )
            else:
                result = grade(question, given)
                st.session_state[_CHECKED.format(question.id)] = (digest, result)
                if problem := live_class.record(question.id, digest, result):  # in a class session only
                    st.warning(escape_markdown(problem))
        if live_class.teacher_session() is not None:
            live_class.room(question, digest)  # the room's answers, for the teacher only
        graded = checked(question)
        if live_class.revealed(question.id):  # said to everyone in the session: a check now is no longer recorded
            answer = _(str(question.answer)) if question.is_choice else i18n.signs(f"{float(question.answer):.4g}")
            if graded is not None:  # the verdict below says the answer and why
                st.info(
                    _("Your teacher revealed the lab's answer to the class: {answer}.").format(
                        answer=escape_markdown(answer)
                    )
                )
            else:
                revealed = _("Your teacher revealed the lab's answer: {answer}.").format(answer=answer)
                st.info(escape_markdown(sentences(revealed, question.why.strip())))
                return Graded(question, "", False, REVEALED)
        if graded is None:
            st.info(_("The lab's own answer appears below once you have checked your prediction."))
            return None
        head = _("Right.") if graded.correct else _("Not quite.")
        if question.is_choice:
            detail = _("You predicted '{given}'; the lab's answer is '{answer}'.").format(
                given=_(str(graded.given)), answer=_(str(question.answer))
            )
        else:
            detail = _("You predicted {given}: {message}.").format(given=graded.given, message=graded.message)
        (st.success if graded.correct else st.error)(escape_markdown(sentences(head, detail, question.why.strip())))
    return graded
