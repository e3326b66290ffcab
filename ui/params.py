"""Widgets whose state lives in the URL, so a teacher's link reproduces what the class sees.

Streamlit binds a keyed widget to a query parameter of the same name (`bind="query-params"`) and
silently drops a value it cannot use. These wrappers add what a shared link needs on top: when the
link carried a value that is not usable, the page says which one and that the default is shown.
The note stays until the learner changes that widget. A link is anyone's text: the note quotes at most
MAX_QUOTED_CHARS of it, escaped, so a crafted value cannot become markdown (an image from another host).

Every value read from a link is bounded before it is used (a link once carried 20,000 characters in each of 8
keys): a number's or an option's value longer than MAX_LINK_VALUE_CHARS is unusable without being parsed, and a
text widget holds at most MAX_TEXT_CHARS (Streamlit cuts a longer link value, and the page says so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from ui.text import escape_markdown

_NOTE = "_url_note_{}"
MAX_QUOTED_CHARS = 80  # of a bad link value quoted back in the note
MAX_WHY_CHARS = 200  # of the list of usable values (options can come from the learner's text)
MAX_LINK_VALUE_CHARS = 100  # a number or an option's name from a link; anything longer is not one
MAX_LINK_VALUES = 8  # repeated values of one key (?k=1&k=2...) looked at
# A text from a link or typed (a prompt, a sentence): the longest the pages' own tests use is a 10,000-character
# prompt; the model reads its last context_length tokens anyway.
MAX_TEXT_CHARS = 10_000


def quoted(text: str, limit: int) -> str:
    """`text` for a note: cut to `limit` characters (an ellipsis says so), unprintable characters (a newline
    would start a new markdown block) shown as U+FFFD, then escaped for markdown."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return escape_markdown("".join(c if c.isprintable() else "\ufffd" for c in cut))


def _clear_note(key: str) -> None:
    st.session_state.pop(_NOTE.format(key), None)


def _check_link_value(key: str, label: str, default: Any, usable: Callable[[str], bool], why: str) -> None:
    """Remember a bad link value for `key` (seen before Streamlit drops it) and show the note."""
    raw = st.query_params.get_all(key)[:MAX_LINK_VALUES]
    if raw and not all(len(r) <= MAX_LINK_VALUE_CHARS and usable(r) for r in raw):
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


def _check_link_text(key: str, label: str) -> None:
    """Note a link text longer than MAX_TEXT_CHARS (the widget's max_chars cuts it) and show the note."""
    raw = st.query_params.get_all(key)[-1:]  # Streamlit uses a repeated key's last value
    if raw and len(raw[0]) > MAX_TEXT_CHARS:
        st.session_state[_NOTE.format(key)] = len(raw[0])
    size = st.session_state.get(_NOTE.format(key))
    if isinstance(size, int):
        st.caption(
            f"The link set '{quoted(label, MAX_QUOTED_CHARS)}' to a text of {size:,} characters; only its first "
            f"{MAX_TEXT_CHARS:,} are used."
        )


def text_input(label: str, key: str, default: str, **kw) -> str:
    """One line of text bound to the URL, at most MAX_TEXT_CHARS. Once a callback has set the key in session state
    (an Accept button), no default is passed: Streamlit warns when a widget gets both."""
    _check_link_text(key, label)
    value = None if key in st.session_state else default
    kw.setdefault("max_chars", MAX_TEXT_CHARS)
    return st.text_input(label, value, key=key, bind="query-params", on_change=_clear_note, args=(key,), **kw) or ""


def text_area(label: str, key: str, default: str, **kw) -> str:
    """Multi-line text (code prompts span lines); bound to the URL like the other widgets (see text_input)."""
    _check_link_text(key, label)
    value = None if key in st.session_state else default
    kw.setdefault("max_chars", MAX_TEXT_CHARS)
    return st.text_area(label, value, key=key, bind="query-params", on_change=_clear_note, args=(key,), **kw) or ""
