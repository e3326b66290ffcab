"""The reader's language (core/i18n.py), chosen once per run before anything is drawn.

In order: the link's `?lang=es` (a shared link keeps its language), the sidebar's picker (kept for the session
and written back into the link), the class session's language (the teacher's, kept under CLASS_KEY by the class
screens for a learner who has not chosen one), the browser's preferred language (st.context.locale), English.
`apply()` runs at the start of app.py and of every fragment run (ui/fragment.py), which do not run app.py.
"""

from __future__ import annotations

import streamlit as st

from core import i18n

PARAM = "lang"  # the link's query parameter
KEY = "lab_language"  # session: the language this reader chose (the picker, or a link that named one)
CLASS_KEY = "lab_class_language"  # session: the language of the class session this learner joined, if any
PICKER = "lab_language_picker"  # the sidebar selectbox's widget key
LABEL = "Language · Idioma · 语言"  # the picker's label in each of its languages: found by a reader of any of them


def chosen() -> str | None:
    """The reader's own choice: the link's, else the picker's; None when they made none."""
    from_link = i18n.parse(st.query_params.get(PARAM))
    if from_link is not None:
        st.session_state[KEY] = from_link
        return from_link
    return i18n.parse(st.session_state.get(KEY))


def browser() -> str | None:
    """The browser's preferred language, where Streamlit exposes it (None in a test run without a browser)."""
    try:
        return i18n.parse(st.context.locale)
    except (AttributeError, RuntimeError):  # no browser context
        return None


def resolve() -> str:
    return chosen() or i18n.parse(st.session_state.get(CLASS_KEY)) or browser() or i18n.DEFAULT


def apply() -> str:
    """Set this run's language (and keep an explicit choice in the link); returns its code."""
    code = resolve()
    i18n.use(code)
    if st.session_state.get(KEY) == code and code != i18n.DEFAULT and st.query_params.get(PARAM) != code:
        st.query_params[PARAM] = code  # st.navigation drops query parameters between pages: keep the choice shared
    return code


def _picked() -> None:
    code = i18n.parse(st.session_state.get(PICKER)) or i18n.DEFAULT
    st.session_state[KEY] = code
    if code == i18n.DEFAULT:
        st.query_params.pop(PARAM, None)
    else:
        st.query_params[PARAM] = code


def picker() -> None:
    """The sidebar's language selectbox, showing this run's language."""
    codes = list(i18n.LANGUAGES)
    st.session_state[PICKER] = i18n.language()  # the picker follows a link, a class or the browser
    st.sidebar.selectbox(LABEL, codes, key=PICKER, format_func=i18n.LANGUAGES.__getitem__, on_change=_picked)
