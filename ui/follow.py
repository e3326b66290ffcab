"""Follow the teacher (issue 29): a learner in a class session whose page and widgets follow the teacher's view.

The teacher's view (page, URL-bound widgets off their defaults, pinned model) is published only when it changed,
so a plain rerun writes nothing. A following learner's page already polls the session's pulse; when a new view
arrives it sets every widget to the teacher's value and switches page. A published view is untrusted text, as a
link is: the page must be one of the app's and every value must pass the widget's own link check, or the view is
ignored whole, with a notice. A widget the learner moves by hand (its on_change, which a value set from code never
fires) or a model picked in the sidebar stops following, and the page says how to rejoin. Following is kept in the
address too (with the learner's seat): a reload, a new browser session, follows again and so comes back to the
teacher's page, never to the page the address bar may still show. The teacher's language goes with the view (its
LANGUAGE entry, absent for English): ui.live_class makes it the language of every learner in the session, following
or not; it is never a widget's value nor put in the address (that would be the learner's own choice).
"""

from __future__ import annotations

from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from core import i18n
from core.classroom.live import LANGUAGE, MAX_PARAMS, PAGE, PARAM_KEY, TeacherView
from core.database import StoreError
from core.i18n import N_, _
from core.model.bundle import is_version
from ui import fragment, live_class, models, params, projector
from ui.text import escape_markdown

POLL_S = 1.0  # the fragments' period: the teacher's view check, the follower's own-move check
LOCAL = frozenset({projector.KEY})  # this screen's presentation: neither published nor followed
LEFT = N_("You left follow mode by moving a slider; turn Follow the teacher on to rejoin.")
LEFT_MODEL = N_("You left follow mode by picking another model; turn Follow the teacher on to rejoin.")
_PAGES = "_follow_pages"  # session key: {url_path: {widget key: params.Bound}} of the widgets each page drew
_PUBLISHED = "_follow_published"  # session key: (code, page, params) of the teacher's last publish
_APPLIED = "_follow_applied"  # session key: (seq, page, params) of the teacher's view this learner last applied
_NOTE = "_follow_note"  # session key: why follow mode went off (LEFT, LEFT_MODEL), or why a view was not applied
# session key: the toggle's value, kept apart from the widget's: st.switch_page starts a run without the browser's
# widget values, which resets every widget that is not bound to the URL (the toggle would go off on every follow)
_FOLLOWING = "_follow_following"


def sync(page_path: str) -> None:
    """Before the page runs: publish the teacher's view, or bring a following learner to it."""
    pages: dict[str, dict[str, params.Bound]] = st.session_state.setdefault(_PAGES, {})
    st.session_state[params.DRAWN] = pages.setdefault(page_path, {})  # ui.params fills it as the page draws
    code = live_class.teacher_session()
    if code is not None:
        _publish(code, page_path)
        with st.sidebar:
            _teacher_poll(code, page_path)
        return
    joined = live_class.current()
    if joined is not None:
        _learner(joined.code, page_path)


# ---- the teacher --------------------------------------------------------------------------------------------


def _as_text(value: Any) -> str:
    """A widget's value as its URL carries it (Bound.parse reads it back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return params.link_prefix(value)
    return str(value)


def view_params(page_path: str) -> dict[str, str]:
    """The teacher's view of `page_path`: each widget the page drew whose value is not its default, the model pin,
    and the teacher's language when it is not English (LANGUAGE). Read from the widgets, not st.query_params: the
    server's copy of the URL is refreshed only on a page change."""
    drawn: dict[str, params.Bound] = st.session_state.get(_PAGES, {}).get(page_path, {})
    out: dict[str, str] = {}
    if i18n.language() != i18n.DEFAULT:
        out[LANGUAGE] = i18n.language()
    pin = st.query_params.get(models.PIN)
    if pin and is_version(pin):
        out[models.PIN] = pin
    for key in sorted(drawn):
        if key in LOCAL or key == LANGUAGE or key not in st.session_state or not PARAM_KEY.fullmatch(key):
            continue
        value = st.session_state[key]
        if value != drawn[key].default and len(out) < MAX_PARAMS:
            out[key] = _as_text(value)
    return out


def _publish(code: str, page_path: str) -> None:
    view = (code, page_path, view_params(page_path))
    if st.session_state.get(_PUBLISHED) == view:
        return  # nothing changed: a plain rerun writes nothing
    try:
        live_class.live().publish(code, page_path, view[2])
    except (ValueError, StoreError) as e:
        st.session_state[_NOTE] = _("Followers could not be sent this view: {problem}").format(problem=e)
        return
    st.session_state[_PUBLISHED] = view
    st.session_state.pop(_NOTE, None)


@fragment.polled(POLL_S)
def _teacher_poll(code: str, page_path: str) -> None:
    """Every POLL_S: publish a widget change made inside a page's fragment (which does not run app.py)."""
    _publish(code, page_path)
    st.caption(_("Learners who follow you see this page, its sliders and the model you pick."))
    note = st.session_state.get(_NOTE)
    if note:
        st.warning(escape_markdown(i18n._(note)))


# ---- the learner --------------------------------------------------------------------------------------------


def _toggled() -> None:
    """The toggle's on_change. Turned on: a fresh start (the teacher's current view is applied on this run)."""
    st.session_state[_FOLLOWING] = bool(st.session_state.get(live_class.FOLLOW_KEY))
    st.session_state.pop(params.MOVED, None)
    st.session_state.pop(_APPLIED, None)
    st.session_state.pop(_NOTE, None)


def _moved() -> str | None:
    """What the learner changed by hand since the last applied view (a widget, or the sidebar's model), as the note
    that says so; None when nothing."""
    applied = st.session_state.get(_APPLIED)
    if applied is None:
        return None
    if st.session_state.get(params.MOVED) is not None:
        return LEFT
    pin = applied[2].get(models.PIN)
    return LEFT_MODEL if pin is not None and st.query_params.get(models.PIN) != pin else None


def _learner(code: str, page_path: str) -> None:
    if _FOLLOWING not in st.session_state and st.query_params.get(live_class.FOLLOW_PARAM) == "1":
        st.session_state[_FOLLOWING] = True  # a reload of a following page: the teacher's current view is applied
    with st.sidebar:
        left = _moved() if st.session_state.get(_FOLLOWING) else None
        if left is not None:
            st.session_state[_FOLLOWING] = False
            st.session_state[_NOTE] = left
        st.session_state[live_class.FOLLOW_KEY] = bool(st.session_state.get(_FOLLOWING))
        following = st.toggle(
            _("Follow the teacher"),
            key=live_class.FOLLOW_KEY,
            on_change=_toggled,
            help=_("Your page, sliders and model follow the teacher's; moving a slider yourself leaves follow mode."),
        )
        _keep_in_address(following)
        if following:
            try:
                view = live_class.live().view(code)
            except (ValueError, StoreError):
                view = None  # a closed session or an unreachable database: ui.live_class says so
            applied = st.session_state.get(_APPLIED)
            if view is not None and (applied is None or applied[0] != view.seq):
                _apply(view, page_path)
            _own_move_poll()
        note = st.session_state.get(_NOTE)
        if note:
            st.info(escape_markdown(i18n._(note)))  # LEFT and LEFT_MODEL are kept in English


def _keep_in_address(following: bool) -> None:
    """The follow mode in the address (FOLLOW_PARAM), written only when it changes: a reload takes it up again."""
    if following and st.query_params.get(live_class.FOLLOW_PARAM) != "1":
        st.query_params[live_class.FOLLOW_PARAM] = "1"
    elif not following and live_class.FOLLOW_PARAM in st.query_params:
        del st.query_params[live_class.FOLLOW_PARAM]


@fragment.polled(POLL_S)
def _own_move_poll() -> None:
    """Every POLL_S while following: a widget moved inside a page's fragment reran only that fragment; the whole page
    reruns so that the toggle goes off and the learner is told."""
    if _moved() is not None:
        st.rerun()


def page_scripts() -> dict[str, str]:
    """url_path -> script of every page in app.py's st.navigation. Streamlit has no public list of the pages, so this
    reads its page registry for this session (ctx.pages_manager), as the fragments read ctx.fragment_ids_this_run."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return {}
    return {
        str(info.get("url_pathname", "")): str(info["script_path"])
        for info in ctx.pages_manager.get_pages().values()
        if "script_path" in info
    }


def refused(view: TeacherView, scripts: dict[str, str]) -> str | None:
    """Why a published view cannot be applied (it is untrusted text, as a link is), or None."""
    if not isinstance(view.page, str) or not PAGE.fullmatch(view.page) or view.page not in scripts:
        return _("the teacher's page is not one of this lab's pages")
    if not isinstance(view.params, dict) or len(view.params) > MAX_PARAMS:
        return _("the teacher's view has too many values")
    for key, raw in view.params.items():
        if not isinstance(key, str) or not PARAM_KEY.fullmatch(key) or not isinstance(raw, str):
            return _("the teacher's view has a value that is not a widget's")
        if key == models.PIN and not is_version(raw):
            return _("the teacher's model version is not one")
        if key == LANGUAGE and raw not in i18n.LANGUAGES:
            return _("the teacher's language is not one of the lab's")
        if params.link_prefix(raw) != raw:
            return _("the teacher's view has a value longer than a link carries")
    return None


def _values(view: TeacherView) -> dict[str, Any]:
    """The teacher's value (or the default) for each widget this session has seen on the teacher's page; ValueError
    when one cannot take the teacher's value (the widget's own link check)."""
    drawn: dict[str, params.Bound] = st.session_state.get(_PAGES, {}).get(view.page, {})
    values = {}
    for key, bound in drawn.items():
        if key in LOCAL or key == LANGUAGE:
            continue
        raw = view.params.get(key)
        values[key] = bound.default if raw is None else bound.parse(raw)
    return values


def _apply(view: TeacherView, page_path: str) -> None:
    """Bring this learner to the teacher's view: widgets, model pin, page (see the module docstring)."""
    scripts = page_scripts()
    why = refused(view, scripts)
    values: dict[str, Any] = {}
    if why is None:
        try:
            values = _values(view)
        except ValueError:
            why = _("one of the teacher's values is not one this page's widget can take")
    st.session_state[_APPLIED] = (view.seq, view.page, dict(view.params) if why is None else {})
    st.session_state.pop(params.MOVED, None)
    if why is not None:
        st.session_state[_NOTE] = _(
            "The teacher's view was not applied: {why}. Following goes on with the next one."
        ).format(why=why)
        return
    st.session_state.pop(_NOTE, None)
    for key, value in values.items():
        st.session_state[key] = value  # set from code: Streamlit sends it to the browser and writes the URL
    pin = view.params.get(models.PIN)
    if view.page != page_path:
        # The teacher's values for widgets not yet drawn in this session: they are seeded from the URL, as from a link.
        # Streamlit refuses to set a widget-bound parameter from code; those widgets were set above.
        url = {k: v for k, v in view.params.items() if k not in values and k not in LOCAL and k != LANGUAGE}
        place = {k: v for k in (live_class.SEAT_PARAM, live_class.FOLLOW_PARAM) if (v := st.query_params.get(k))}
        try:  # the learner's seat and follow mode stay in the new page's address: a reload comes back here
            st.switch_page(scripts[view.page], query_params=url | place)
        except StreamlitAPIException:  # a key bound by another page's widget of the same name
            pinned = {k: v for k, v in url.items() if k == models.PIN}
            st.switch_page(scripts[view.page], query_params=pinned | place)
    if pin is not None and pin != st.query_params.get(models.PIN):
        st.query_params[models.PIN] = pin  # ui.models selects it on the next run (its picker is already drawn)
        st.rerun()
