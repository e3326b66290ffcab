"""Widgets whose state lives in the URL, so a teacher's link reproduces what the class sees.

Streamlit binds a keyed widget to a query parameter of the same name (`bind="query-params"`) and
silently drops a value it cannot use. These wrappers add what a shared link needs on top: when the
link carried a value that is not usable, the page says which one and that the default is shown.
The note stays until the learner changes that widget. A link is anyone's text: the note quotes at most
MAX_QUOTED_CHARS of it, escaped, so a crafted value cannot become markdown (an image from another host).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from ui.text import escape_markdown

_NOTE = "_url_note_{}"
MAX_QUOTED_CHARS = 80  # of a bad link value quoted back in the note
MAX_WHY_CHARS = 200  # of the list of usable values (options can come from the learner's text)


def quoted(text: str, limit: int) -> str:
    """`text` for a note: cut to `limit` characters (an ellipsis says so), unprintable characters (a newline
    would start a new markdown block) shown as U+FFFD, then escaped for markdown."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return escape_markdown("".join(c if c.isprintable() else "\ufffd" for c in cut))


def _clear_note(key: str) -> None:
    st.session_state.pop(_NOTE.format(key), None)


def _check_link_value(key: str, label: str, default: Any, usable: Callable[[str], bool], why: str) -> None:
    """Remember a bad link value for `key` (seen before Streamlit drops it) and show the note."""
    raw = st.query_params.get_all(key)
    if raw and not all(usable(r) for r in raw):
        st.session_state[_NOTE.format(key)] = ", ".join(raw)[: MAX_QUOTED_CHARS + 1]  # one more: the cut is seen
    bad = st.session_state.get(_NOTE.format(key))
    if bad is not None:
        st.caption(
            f"The link set '{quoted(label, MAX_QUOTED_CHARS)}' to '{quoted(bad, MAX_QUOTED_CHARS)}', which "
            f"is not usable ({quoted(why, MAX_WHY_CHARS)}); showing the default "
            f"{quoted(str(default), MAX_QUOTED_CHARS)}."
        )


def _number_in(kind: type, lo: float, hi: float) -> Callable[[str], bool]:
    def usable(raw: str) -> bool:
        try:
            x = kind(raw)
        except ValueError:
            return False
        return lo <= x <= hi

    return usable


def slider(
    label: str, key: str, min_value: float, max_value: float, default: float, step: float | None = None, **kw
) -> Any:
    kind = type(default)
    _check_link_value(
        key, label, default, _number_in(kind, min_value, max_value), f"a number from {min_value} to {max_value}"
    )
    return st.slider(
        label,
        min_value,
        max_value,
        default,
        step,
        key=key,
        bind="query-params",
        on_change=_clear_note,
        args=(key,),
        **kw,
    )


def number_input(
    label: str, key: str, min_value: float, max_value: float, default: float, step: float | None = None, **kw
) -> Any:
    kind = type(default)
    _check_link_value(
        key, label, default, _number_in(kind, min_value, max_value), f"a number from {min_value} to {max_value}"
    )
    return st.number_input(
        label,
        min_value,
        max_value,
        default,
        step,
        key=key,
        bind="query-params",
        on_change=_clear_note,
        args=(key,),
        **kw,
    )


def selectbox(label: str, key: str, options: Sequence[Any], default: Any, **kw) -> Any:
    names = [str(o) for o in options]
    _check_link_value(key, label, default, lambda raw: raw in names, "one of " + ", ".join(names))
    return st.selectbox(
        label,
        options,
        index=list(options).index(default),
        key=key,
        bind="query-params",
        on_change=_clear_note,
        args=(key,),
        **kw,
    )


def radio(label: str, key: str, options: Sequence[Any], default: Any, **kw) -> Any:
    names = [str(o) for o in options]
    _check_link_value(key, label, default, lambda raw: raw in names, "one of " + ", ".join(names))
    return st.radio(
        label,
        options,
        index=list(options).index(default),
        key=key,
        bind="query-params",
        on_change=_clear_note,
        args=(key,),
        **kw,
    )


def toggle(label: str, key: str, default: bool, **kw) -> bool:
    _check_link_value(key, label, default, lambda raw: raw.lower() in ("true", "false"), "true or false")
    return st.toggle(label, default, key=key, bind="query-params", on_change=_clear_note, args=(key,), **kw)


def text_input(label: str, key: str, default: str, **kw) -> str:
    """One line of text bound to the URL. Once a callback has set the key in session state (an Accept button),
    no default is passed: Streamlit warns when a widget gets both."""
    value = None if key in st.session_state else default
    return st.text_input(label, value, key=key, bind="query-params", **kw) or ""


def text_area(label: str, key: str, default: str, **kw) -> str:
    """Multi-line text (code prompts span lines); bound to the URL like the other widgets (see text_input)."""
    value = None if key in st.session_state else default
    return st.text_area(label, value, key=key, bind="query-params", **kw) or ""
