"""A live class session in the sidebar (issue 29): the teacher opens one, learners join with its code and a
display name, and every predict-first question then records their checks and opens when the teacher reveals.

Everything lives in the class database, so every worker sees the same session; this browser session keeps only
its place in it. A learner's page polls one cheap read (the session's pulse) and reruns only when it changed.
The learner's place is kept in the address (issue 35), so a restarted worker or a reload takes it up again as the
same learner, or says it is gone; never dropped silently. The teacher's Reveal and New round are drawn above the
chart, on a laptop's first screen, and before it, so they never depend on it.

The session's language is the teacher's (published with the teacher's view, ui.follow): a learner reads it from
joining on, following or not, and the page switches at the next poll after the teacher changes it; a learner who
picked a language keeps theirs (ui.language puts an own choice first).
"""

from __future__ import annotations

import html
import math
from dataclasses import astuple
from typing import NamedTuple

import pandas as pd
import streamlit as st

from core import i18n
from core.classroom.checkpoint import Graded, Question
from core.classroom.live import Distribution, LiveClass, RoundResult, check_session_code, distribution
from core.classroom.store import class_db_location
from core.database import StoreError
from core.i18n import _, ngettext
from ui import charts, export, fragment, join, language, projector, teacher
from ui.companion import chart
from ui.text import escape_markdown

LEARNER_KEY = "live_class_learner"  # (code, learner id, display name) of the session this browser joined
TEACHER_KEY = "live_class_teacher"  # the code of the session this (unlocked) teacher opened
CODE_INPUT = "live_class_code"  # the join form's fields
NAME_INPUT = "live_class_name"
RESUME_INPUT = "live_class_resume_code"  # the teacher's: a session still open
# a joined learner's "Follow the teacher" toggle (drawn by the follow module, which imports this one): its value
# sets the poll period here, so the key lives here and no import runs back
FOLLOW_KEY = "follow_teacher"
_NOTE_KEY = "live_class_note"  # the last join or teacher action's problem, in words
_PULSE_KEY = "live_class_pulse"  # the session's pulse this page was last run with
_LINKED_KEY = "live_class_linked"  # the ?session= value already read (a link fills the form once)
_SHOW_KEY = "live_class_show_code"  # set by Open: the next run shows the code to the room at once
_ROUNDS_KEY = "live_class_rounds"  # {question id: (round, revealed)} of the questions this page asked, as shown
_LANGUAGE_PULSE_KEY = "live_class_language_pulse"  # the pulse at which the session's language was last read
_DRAWN_LANGUAGE_KEY = "live_class_drawn_language"  # the language this page's last whole run was drawn in
LINK_PARAM = "session"
SEAT_PARAM = "seat"  # a joined learner's id in the page's address, to take their place up again (see above)
FOLLOW_PARAM = "follow"  # "1" in a following learner's address: a reload follows the teacher again (ui.follow)
POLL_S = 2  # a learner's page polls the session's pulse this often (30-60 learners at once: one read each)
FOLLOW_POLL_S = 1  # a learner who follows the teacher polls this often: the teacher's move shows within 1-2 s
ROOM_POLL_S = 1  # the teacher's panel re-reads the room's answers this often
SIDEBAR_CODE_PX = 34  # six characters on one line of the sidebar
CODE_PX = 96  # the session code's type size for the room; larger projected
PROJECTOR_CODE_PX = 160


class Learner(NamedTuple):
    code: str
    learner: str
    name: str


@st.cache_resource(max_entries=4)
def _live(location: str) -> LiveClass:
    return LiveClass(location)


def live() -> LiveClass:
    """The class database's live sessions (LAB_DATABASE_URL, else LAB_CLASS_DB), one object per server process."""
    return _live(class_db_location())


def current() -> Learner | None:
    """The learner's place in a class session (code, learner id, display name), or None when not in one."""
    stored = st.session_state.get(LEARNER_KEY)
    if isinstance(stored, tuple) and len(stored) == 3 and all(isinstance(s, str) for s in stored):
        return Learner(*stored)
    return None


def teacher_session() -> str | None:
    """The code of the session this teacher opened (while the teacher actions are unlocked), or None."""
    code = st.session_state.get(TEACHER_KEY)
    return code if isinstance(code, str) and teacher.unlocked() else None


# ---- actions (button callbacks: they run before the page, so the whole page sees their outcome) --------------


def _join() -> None:
    st.session_state.pop(_NOTE_KEY, None)
    try:
        code = check_session_code(st.session_state.get(CODE_INPUT) or "")
        name = " ".join(str(st.session_state.get(NAME_INPUT) or "").split())
        learner = live().join(code, name)
    except (ValueError, StoreError) as e:
        st.session_state[_NOTE_KEY] = _("Not joined: {problem}").format(problem=e)
        return
    st.session_state[LEARNER_KEY] = (code, learner, name)
    st.session_state.pop(_PULSE_KEY, None)
    _read_language(code)  # a callback runs before the page: the page is drawn in the session's language


def _leave() -> None:
    st.session_state.pop(LEARNER_KEY, None)
    st.session_state.pop(_PULSE_KEY, None)
    st.session_state.pop(_LANGUAGE_PULSE_KEY, None)
    st.session_state.pop(language.CLASS_KEY, None)  # no longer in a class: the learner's own language again
    st.query_params.pop(SEAT_PARAM, None)
    st.query_params.pop(FOLLOW_PARAM, None)


def _read_language(code: str) -> None:
    """The session's language (the teacher's, in the view the teacher published) kept under language.CLASS_KEY,
    which ui.language reads for a learner who chose none; unchanged while the teacher has published nothing."""
    try:
        view = live().view(code)
    except (ValueError, StoreError):
        return  # the next poll tries again
    if view is not None:
        st.session_state[language.CLASS_KEY] = view.language


def _keep_seat(joined: Learner) -> None:
    """The learner's id in the address, written again after a page change (which clears the query)."""
    if st.query_params.get(SEAT_PARAM) != joined.learner:
        st.query_params[SEAT_PARAM] = joined.learner


def _take_seat() -> None:
    """A browser session without a place but with a seat in its address (the server lost the session that joined):
    the same learner again while the session is open, else told it is out and how to join again. The seat is
    untrusted: only an id the class database knows is taken up, and it is never echoed."""
    raw = st.query_params.get(SEAT_PARAM)
    if raw is None:
        return
    seat = raw[:64]  # bounded: a link can be long
    try:
        found = live().learner(seat)
    except StoreError as e:
        st.session_state[_NOTE_KEY] = _("Your class session cannot be reached now: {problem}").format(problem=e)
        return  # the seat stays: the next run tries again
    st.query_params.pop(SEAT_PARAM, None)
    if found is None:
        st.session_state[_NOTE_KEY] = _(
            "You are no longer in a class session (it has ended, or the lab lost your place): join again with the "
            "code your teacher shows."
        )
        return
    code, name = found
    st.session_state[LEARNER_KEY] = (code, seat, name)
    st.session_state.pop(_PULSE_KEY, None)
    st.session_state[_NOTE_KEY] = _(
        "You are back in session {code} as {name}: the lab had lost your connection."
    ).format(code=code, name=name)


def _open() -> None:
    st.session_state.pop(_NOTE_KEY, None)
    if not teacher.unlocked():  # the passcode may have been removed since the button was drawn
        return
    try:
        st.session_state[TEACHER_KEY] = live().open_session()
        st.session_state[_SHOW_KEY] = True
    except StoreError as e:
        st.session_state[_NOTE_KEY] = _("No session was opened: {problem}").format(problem=e)


def _resume() -> None:
    """The teacher takes up a session still open (after a reload, which locks the teacher actions and forgets it)."""
    st.session_state.pop(_NOTE_KEY, None)
    if not teacher.unlocked():
        return
    try:
        code = check_session_code(st.session_state.get(RESUME_INPUT) or "")
        if not live().is_open(code):
            raise ValueError(_("the session {code} is not open: open a new one").format(code=code))
    except (ValueError, StoreError) as e:
        st.session_state[_NOTE_KEY] = _("Not resumed: {problem}").format(problem=e)
        return
    st.session_state[TEACHER_KEY] = code


def _close() -> None:
    code = teacher_session()
    if code is None:
        return
    try:
        live().close_session(code)
    except StoreError as e:
        st.session_state[_NOTE_KEY] = _("The session could not be closed: {problem}").format(problem=e)
        return
    st.session_state.pop(TEACHER_KEY, None)


# ---- the sidebar -------------------------------------------------------------------------------------------


def _link_code() -> None:
    """A first visit through a join link (`?session=CODE`): the form's code filled in, once. The value is untrusted:
    bounded and checked like a typed code; an unusable one is said, never echoed."""
    raw = st.query_params.get(LINK_PARAM)
    if raw is None or st.session_state.get(_LINKED_KEY) == raw[:64]:
        return
    st.session_state[_LINKED_KEY] = raw[:64]  # bounded: a link can be long
    try:
        code = check_session_code(raw[:64])
    except ValueError:
        st.session_state[_NOTE_KEY] = _("The link's session code is not one: type the code your teacher shows.")
        return
    if not st.session_state.get(CODE_INPUT):
        st.session_state[CODE_INPUT] = code


def sidebar() -> None:
    """The sidebar's class-session section: joined, or a form to join; the teacher's open, show, download, close."""
    st.session_state[_ROUNDS_KEY] = {}  # filled again by this page's questions (revealed)
    st.session_state[_DRAWN_LANGUAGE_KEY] = i18n.language()  # what the poll compares the session's language with
    if current() is None and teacher_session() is None:
        _take_seat()
        _link_code()
    if (joined := current()) is not None:
        _keep_seat(joined)
    with st.sidebar:
        joined, opened = current(), teacher_session()
        linked = joined is None and bool(st.session_state.get(_LINKED_KEY))  # a join link: the form, open
        with st.expander(_("Class session"), expanded=joined is not None or opened is not None or linked):
            note = st.session_state.get(_NOTE_KEY)
            if opened is not None:
                _teacher_open(opened)
            elif joined is not None:
                _learner(joined)
            else:
                _join_form()
                _teacher_start()
            if note:
                st.warning(escape_markdown(note))
        if joined is not None:
            following = bool(st.session_state.get(FOLLOW_KEY))
            fragment.polled(FOLLOW_POLL_S if following else POLL_S)(_poll)(joined.code)


def _learner(joined: Learner) -> None:
    try:
        still_open = live().is_open(joined.code)
    except StoreError as e:
        st.warning(escape_markdown(_("The class session cannot be reached now: {problem}").format(problem=e)))
        still_open = True
    if not still_open:
        st.info(_("Class session {code} has ended. Join another one with its code.").format(code=joined.code))
        _leave()  # the note of a prediction not recorded, if any, stays below
        _join_form()
        return
    st.markdown(_("In session **{code}** as **{name}**").format(code=joined.code, name=escape_markdown(joined.name)))
    st.caption(_("Your predictions go to your teacher without your name being shown to the class."))
    st.button(_("Leave the session"), key="live_class_leave", on_click=_leave)


def _join_form() -> None:
    with st.form("live_class_join", border=False):
        st.markdown(_("**Join a class session**"))
        st.text_input(_("Session code (from your teacher)"), key=CODE_INPUT, max_chars=12, placeholder=_("e.g. K7PQ2X"))
        st.text_input(_("Your display name"), key=NAME_INPUT, max_chars=40, placeholder=_("shown to your teacher only"))
        st.form_submit_button(_("Join"), key="live_class_join_button", on_click=_join)


def _teacher_start() -> None:
    if not teacher.configured_passcode():
        st.caption(_("A teacher opens a session with the teacher passcode (LAB_TEACHER_PASSCODE on the server)."))
        return
    if not st.toggle(_("I am the teacher"), key="live_class_teacher_toggle"):
        return
    if teacher.gate(_("class sessions"), why=_("decide what the class is shown"), key="live_class_gate"):
        st.button(_("Open a class session"), key="live_class_open", type="primary", on_click=_open)
        with st.form("live_class_resume", border=False):  # after a reload (which locks) the session is still open
            st.text_input(_("Or resume your open session (its code)"), key=RESUME_INPUT, max_chars=12)
            st.form_submit_button(_("Resume"), key="live_class_resume_button", on_click=_resume)


def _teacher_open(code: str) -> None:
    st.markdown(_("**Your class session** (learners join with this code)"))
    st.markdown(_big_code(code, SIDEBAR_CODE_PX), unsafe_allow_html=True)  # a checked code: letters and digits
    if st.button(_("Show the code to the room"), key="live_class_show", type="primary") or st.session_state.pop(
        _SHOW_KEY, False
    ):
        _show_code(code)
    st.download_button(
        _("Download the answers (CSV)"),
        lambda: live().answers_csv(code).encode("utf-8"),  # written when pressed, not on every rerun
        file_name=f"class-session-{code}.csv",
        mime="text/csv",
        key="live_class_csv",
        on_click="ignore",
        help=_("Every answer of this session by question and round, with the learners' display names: for you only."),
    )
    st.button(_("Close the session"), key="live_class_close", on_click=_close)


def _big_code(code: str, px: int) -> str:
    """The session code in large type: `code` has passed check_session_code (letters and digits), escaped anyway."""
    return (
        f'<p style="font-size:{px}px;font-weight:700;letter-spacing:0.12em;line-height:1.1;margin:0;'
        f'font-family:monospace" data-session-code="{html.escape(code)}">{html.escape(code)}</p>'
    )


def _show_code(code: str) -> None:
    """The code for the room, in a dialog (its title in this run's language: decorated here, not at import)."""
    st.dialog(_("Join the class session"), width="large")(_code_dialog)(code)


def _code_dialog(code: str) -> None:
    """The code for the room: in type the back row reads, with the join address and its QR code (carrying the code,
    so a scan fills the form) when the lab serves the network."""
    try:
        url = join.join_url()
    except ValueError as e:
        st.caption(escape_markdown(e))
        url = None
    words, picture = st.columns([3, 2], vertical_alignment="center")  # both on one projected screen
    with words:
        st.markdown(_big_code(code, PROJECTOR_CODE_PX if projector.on() else CODE_PX), unsafe_allow_html=True)
        if url is None:
            st.markdown(_("Open the lab, then type this code in the sidebar's **Class session**."))
            return
        st.markdown(_("Go to this address and type the code, or scan the QR code:"))
        join.address(url)  # on one line, never broken inside
    link = f"{url}?{LINK_PARAM}={code}"
    png, width = join.qr_png(link, join.PROJECTOR_QR_PX if projector.on() else join.QR_PX)
    picture.image(png, width=width, caption=_("QR code of the join address with this session's code"))


def _poll(code: str) -> None:
    """Every POLL_S (FOLLOW_POLL_S while following the teacher), as a fragment: one read of the session's pulse;
    the whole page reruns only when the teacher did something this page shows (see changed), or changed the session's
    language (one read of the teacher's view when the pulse moved). Inside a whole-script run it only notes the pulse
    and the language: the rest of that run draws what is new, and a rerun from here would drop what the run is for (a
    prediction just submitted would be neither checked nor recorded); the next tick reruns for the language."""
    tick = fragment.fragment_run()
    try:
        pulse = live().pulse(code)
        seen = st.session_state.get(_PULSE_KEY)
        st.session_state[_PULSE_KEY] = pulse
        if st.session_state.get(_LANGUAGE_PULSE_KEY) != pulse:
            _read_language(code)
            st.session_state[_LANGUAGE_PULSE_KEY] = pulse
        if tick and language.resolve() != st.session_state.get(_DRAWN_LANGUAGE_KEY, i18n.language()):
            st.rerun()  # the page in the session's new language
        following = bool(st.session_state.get(FOLLOW_KEY))
        if tick and seen is not None and seen != pulse and changed(live(), code, shown(), following=following):
            st.rerun()
    except (ValueError, StoreError):
        return  # the next poll tries again; the page keeps what it shows


def shown() -> dict[str, tuple[int, bool]]:
    """{question id: (round, revealed)} of the questions this page asked in its last run, as it showed them."""
    return dict(st.session_state.get(_ROUNDS_KEY) or {})


def changed(classes: LiveClass, code: str, shown: dict[str, tuple[int, bool]], *, following: bool) -> bool:
    """After the pulse moved: does a learner's page need a run? Yes when following the teacher (to apply the
    new view), when the session closed, or when a question the page shows (`shown`) has a new round or was revealed.
    Not for the teacher's other moves: every learner's page rerunning at each of them would load the class server
    for nothing (issue 26: 60 learners on 2 workers). A few primary-key reads, only after the pulse moved."""
    if following or not classes.is_open(code):
        return True
    return any(astuple(classes.round(code, q))[:2] != state for q, state in shown.items())


# ---- the predict-first questions in a session (ui.predict calls these) ---------------------------------------


def record(question: str, fingerprint: str, graded: Graded) -> str | None:
    """A learner's check kept for the teacher in the question's current round; None when kept (or when not in a
    session), else what went wrong, in words."""
    joined = current()
    if joined is None:
        return None
    try:
        live().answer(
            joined.code, joined.learner, question, fingerprint, graded.given, graded.correct,
            number=not graded.question.is_choice,
        )  # fmt: skip
    except (ValueError, StoreError) as e:
        problem = _("Your prediction was checked here but not recorded for your teacher: {problem}.").format(problem=e)
        st.session_state[_NOTE_KEY] = problem  # said in the sidebar too, after a poll's rerun, until the next one kept
        return problem
    st.session_state.pop(_NOTE_KEY, None)
    return None


def revealed(question: str) -> bool:
    """True when the teacher has revealed the current round of `question` in the session this browser is in."""
    joined = current()
    code = joined.code if joined is not None else teacher_session()
    if code is None:
        return False
    try:
        now = live().round(code, question)
    except (ValueError, StoreError):
        return False  # the learner keeps predicting; the next poll tries again
    st.session_state.setdefault(_ROUNDS_KEY, {})[question] = (now.number, now.revealed)  # what the poll compares
    return now.revealed


@fragment.polled(ROOM_POLL_S)
def room(question: Question, fingerprint: str) -> None:
    """The teacher's view of the room's answers to `question` in the current round (and the previous one beside it,
    so the shift after a discussion shows), counted for the teacher's own version of the question, never with a name;
    Reveal to everyone and New round. Re-read every ROOM_POLL_S while the room answers.

    Its chart stays out of the sidebar's "Download this view": redrawn every second on its own, it would
    pile up copies there; the session's answers are the teacher's CSV download."""
    view = st.session_state.get(export._VIEW)
    st.session_state[export._VIEW] = None  # export.collect keeps nothing while this is None
    try:
        _room(question, fingerprint)
    finally:
        st.session_state[export._VIEW] = view


def _room(question: Question, fingerprint: str) -> None:
    code = teacher_session()
    if code is None:
        return
    try:
        results = live().rounds(code, question.id, fingerprint)
    except (ValueError, StoreError) as e:
        st.warning(escape_markdown(_("The room's answers cannot be read now: {problem}").format(problem=e)))
        return
    now = results[-1]
    shown = results[-2:]  # the previous round beside the current one
    if now.revealed:
        head = ngettext(
            "**The room, round {round}** (revealed): **{count} answered**",
            "**The room, round {round}** (revealed): **{count} answered**",
            now.n,
        )
    else:
        head = ngettext(
            "**The room, round {round}** (open): **{count} answered**",
            "**The room, round {round}** (open): **{count} answered**",
            now.n,
        )
    st.markdown(head.format(round=now.number, count=now.n))
    if now.other:
        st.caption(
            ngettext(
                "{count} more answered another version of this question (their sliders differ from yours); "
                "they are not counted here.",
                "{count} more answered another version of this question (their sliders differ from yours); "
                "they are not counted here.",
                now.other,
            ).format(count=now.other)
        )
    # The controls above the chart: on the first screen of a laptop, and drawn first, so they never depend on it.
    reveal, again = st.columns(2)
    if reveal.button(_("Reveal to everyone"), key=f"{question.id}_reveal", disabled=now.revealed, type="primary"):
        _teacher_act(lambda: live().reveal(code, question.id, fingerprint))
    if again.button(_("New round"), key=f"{question.id}_new_round"):
        _teacher_act(lambda: live().new_round(code, question.id, fingerprint))
    if any(r.n for r in shown):
        chart(*_room_chart(question, shown), key=f"{question.id}_room")


def _teacher_act(action) -> None:
    """A reveal or a new round, then the whole page again (a reveal opens the teacher's own page too)."""
    try:
        action()
    except (ValueError, StoreError) as e:
        st.warning(escape_markdown(_("Not done: {problem}.").format(problem=e)))
        return
    st.rerun()


def _room_chart(question: Question, shown: list[RoundResult]) -> tuple:
    """Counts per option (or per bin of numbers) for each shown round, on one axis. Right answers are marked only
    once the round is revealed: the teacher's screen may be on the projector."""
    dists = {r.number: distribution(r, question) for r in shown}
    labels = _labels(list(dists.values()))
    names = {r.number: _("round {number}").format(number=r.number) for r in shown}
    series = {}
    for number, dist in dists.items():
        counts = dict(zip(dist.labels, dist.counts, strict=True))
        series[names[number]] = [counts.get(label, 0) for label in labels]
    labels = [i18n._(label) for label in labels]  # a choice question's options are kept in English
    # one message: "round" or "answer" alone would share a translation with the same word meaning something else
    round_h, answer_h, learners_h = (name.strip() for name in _("round|answer|learners").split("|"))
    fig = charts.grouped_bars(
        labels,
        series,
        title=_("The room's answers") if question.is_choice else _("The room's answers (numbers, by range)"),
        y_title=learners_h,
        fmt="d",
    )
    top = max((n for counts in series.values() for n in counts), default=0)
    fig.update_layout(legend_title_text=round_h)
    fig.update_yaxes(tick0=0, dtick=max(1, math.ceil(top / 5)), rangemode="tozero")  # whole learners
    table = pd.DataFrame(
        [
            {round_h: r.number, answer_h: label, learners_h: n}
            for r in shown
            for label, n in zip(labels, series[names[r.number]], strict=True)
        ]
    )
    parts = []
    for r in shown:
        if r.revealed:
            part = ngettext(
                "round {number}: {count} answered, {right} right",
                "round {number}: {count} answered, {right} right",
                r.n,
            ).format(number=r.number, count=r.n, right=sum(r.correct))
        else:
            part = ngettext("round {number}: {count} answered", "round {number}: {count} answered", r.n).format(
                number=r.number, count=r.n
            )
        unreadable = dists[r.number].unreadable
        parts.append(_("{round} ({count} unreadable)").format(round=part, count=unreadable) if unreadable else part)
    most = most_chosen(labels, series[names[shown[-1].number]])
    rounds = "; ".join(parts)
    if most:
        summary = _("{rounds}. Round {number}: {most}.").format(rounds=rounds, number=shown[-1].number, most=most)
    else:
        summary = _("{rounds}.").format(rounds=rounds)
    return fig, table, summary


def most_chosen(labels: list[str], counts: list[int]) -> str:
    """What the room chose most, in words: "most chose key 3, 2 of 3", or on a tie every answer that tied
    ("key 1 and key 3 tied, 1 each"), never one of them named the winner; "" when nobody answered."""
    top = max(counts, default=0)
    if top == 0:
        return ""
    first = [label for label, n in zip(labels, counts, strict=True) if n == top]
    if len(first) == 1:
        return _("most chose {answer}, {count} of {total}").format(answer=first[0], count=top, total=sum(counts))
    return _("{answers} tied, {count} each").format(answers=listed(first), count=top)


def listed(items: list[str]) -> str:
    """Two or more items as a sentence lists them: "a, b and c" (in the reader's language)."""
    text = items[0]
    for item in items[1:-1]:
        text = _("{list}, {item}").format(list=text, item=item)
    return _("{list} and {last}").format(list=text, last=items[-1])


def _labels(dists: list[Distribution]) -> list[str]:
    """The categories of every shown round, in order: a choice question's options, or the bins by their lower edge
    (bins sit on multiples of one width, so two rounds' bins of one range share their label)."""
    first: dict[str, float] = {}
    for dist in dists:
        for j, label in enumerate(dist.labels):
            first.setdefault(label, dist.edges[j] if dist.edges is not None else float(j))
    return sorted(first, key=lambda label: first[label])
