"""Widgets whose state lives in the URL, so a teacher's link reproduces what the class sees.

Streamlit silently drops a link value it cannot use; these wrappers say which one was dropped and that the default
is shown. A link is anyone's text: every value is bounded before it is used (one carried 20,000 characters in each
of 8 keys), one the lab's check refuses never reaches Streamlit's parsing (`?seed=inf` raised OverflowError), and a
quote of it is escaped. Texts are not bound by Streamlit (a 200 KB paste made a URL the server refused): the link
carries only the text's longest prefix that fits LINK_TEXT_BYTES, and the page says so.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState, get_script_run_ctx

from core import i18n
from core.i18n import _
from ui.text import escape_markdown

_NOTE = "_url_note_{}"
MAX_QUOTED_CHARS = 80  # of a bad link value quoted back in the note
MAX_WHY_CHARS = 200  # of the list of usable values (options can come from the learner's text)
MAX_LINK_VALUE_CHARS = 100  # a number or an option's name from a link; anything longer is not one
MAX_LINK_VALUES = 8  # repeated values of one key (?k=1&k=2...) looked at
# A text from a link or typed (a prompt, a sentence): the longest the pages' own tests use is a 10,000-character
# prompt; the model reads its last context_length tokens anyway.
MAX_TEXT_CHARS = 10_000
# A text's share of the link, URL-encoded. The server (uvicorn's h11) refuses a request whose line and headers pass
# 16 KB, and the page's URL comes back in the Referer header of the requests it makes: a page with two texts
# (the Inspector's comparison) then stays under 9 KB of URL in all.
LINK_TEXT_BYTES = 2_000
_URL_SAFE = frozenset(string.ascii_letters + string.digits + "*-._ ")  # one byte each in a form-encoded query
DRAWN = "_params_drawn"  # session key: the dict ui.follow gives this page's widgets, {key: Bound}
MOVED = "_params_moved"  # session key: the key of the last widget the learner moved by hand


class Bound(NamedTuple):
    """A URL-bound widget as drawn: its default, and how a value from a link (or a teacher) becomes its value."""

    default: Any
    parse: Callable[[str], Any]  # raises ValueError for a value the widget cannot take


def quoted(text: str, limit: int) -> str:
    """`text` for a note: cut to `limit` characters (an ellipsis says so), unprintable characters (a newline
    would start a new markdown block) shown as U+FFFD, then escaped for markdown."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return escape_markdown("".join(c if c.isprintable() else "\ufffd" for c in cut))


def _clear_note(key: str) -> None:
    """Every widget's on_change: the learner moved it, so a note about the link's value no longer applies."""
    st.session_state.pop(_NOTE.format(key), None)
    if _by_hand():
        st.session_state[MOVED] = key


def _by_hand() -> bool:
    """In a widget's callback: whether this run is the one the widget's own change asked for (the whole script, or
    the widget's fragment). Another fragment's run (a poll's run_every tick) also carries the browser's widget values,
    which can be older than a value just set from code (by following): that difference is not the learner's move."""
    ctx = get_script_run_ctx()
    fragments = ctx.fragment_ids_this_run if ctx is not None else None
    return not fragments or ThreadState.get().fragment_id in fragments


def _drawn(key: str, default: Any, usable: Callable[[str], bool], value: Callable[[str], Any]) -> None:
    """Record the widget for Follow the teacher (when it is listening): a value is taken only if a link's would be."""

    def parse(raw: str) -> Any:
        if len(raw) > MAX_LINK_VALUE_CHARS or not usable(raw):
            raise ValueError(f"{key} cannot take {quoted(raw, MAX_QUOTED_CHARS)}")
        return value(raw)

    drawn = st.session_state.get(DRAWN)
    if isinstance(drawn, dict):
        drawn[key] = Bound(default, parse)


def _check_link_value(key: str, label: str, default: Any, usable: Callable[[str], bool], why: str) -> bool:
    """Remember a bad link value for `key` and show the note. Returns whether the link's value (if any) may be
    handed to Streamlit: False for a value the check refused (see _bound)."""
    raw = st.query_params.get_all(key)[:MAX_LINK_VALUES]
    refused = bool(raw) and not all(len(r) <= MAX_LINK_VALUE_CHARS and usable(r) for r in raw)
    if refused:
        st.session_state[_NOTE.format(key)] = ", ".join(raw)[: MAX_QUOTED_CHARS + 1]  # one more: the cut is seen
    bad = st.session_state.get(_NOTE.format(key))
    if bad is not None:
        st.caption(
            _(
                "The link set '{label}' to '{value}', which is not usable ({why}); showing the default {default}."
            ).format(
                label=quoted(label, MAX_QUOTED_CHARS),
                value=quoted(bad, MAX_QUOTED_CHARS),
                why=quoted(why, MAX_WHY_CHARS),
                default=quoted(i18n._(str(default)), MAX_QUOTED_CHARS),  # an option marked N_ reads translated
            )
        )
    return not refused


def _bound(widget: Callable[..., Any], key: str, link_ok: bool, *args: Any, **kw: Any) -> Any:
    """`widget(*args, key=key, ...)` bound to the link, except in a run whose link value was refused: then it is
    drawn unbound (Streamlit does not parse the value, and drops a binding it had) and the value leaves the link,
    so the next run, bound again, finds the widget's own value. The widget keeps its state: binding is not part
    of a keyed widget's identity."""
    value = widget(*args, key=key, bind="query-params" if link_ok else None, on_change=_clear_note, args=(key,), **kw)
    if not link_ok and key in st.query_params:
        del st.query_params[key]
    return value


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
    usable = _number_in(kind, min_value, max_value)
    why = _("a number from {low} to {high}").format(low=min_value, high=max_value)  # as a link writes them
    link_ok = _check_link_value(key, label, default, usable, why)
    _drawn(key, default, usable, kind)
    return _bound(st.slider, key, link_ok, label, min_value, max_value, default, step, **kw)


def number_input(
    label: str, key: str, min_value: float, max_value: float, default: float, step: float | None = None, **kw
) -> Any:
    kind = type(default)
    usable = _number_in(kind, min_value, max_value)
    why = _("a number from {low} to {high}").format(low=min_value, high=max_value)
    link_ok = _check_link_value(key, label, default, usable, why)
    _drawn(key, default, usable, kind)
    return _bound(st.number_input, key, link_ok, label, min_value, max_value, default, step, **kw)


def _link_names(options: Sequence[Any], kw: dict[str, Any]) -> list[str]:
    """How each option is written in the link: as Streamlit binds it, the option through the widget's format_func
    (a preset's link reads 'baby: 4 layers, ...', not 'baby')."""
    fmt = kw.get("format_func", str)
    return [str(fmt(o)) for o in options]


def _option_index(raw: str, options: Sequence[Any], kw: dict[str, Any], names: list[str]) -> int | None:
    """Which option a link's value names: as this run writes it (`names`), else as a link written in another of the
    lab's languages does (a format_func that translates writes the reader's words into the link); None if none."""
    if raw in names:
        return names.index(raw)
    here = i18n.language()
    for code in i18n.LANGUAGES:
        if code != here:
            with i18n.speaking(code):
                theirs = _link_names(options, kw)
            if raw in theirs:
                return theirs.index(raw)
    return None


def _adopt_other_language(key: str, options: Sequence[Any], kw: dict[str, Any], names: list[str]) -> bool:
    """A link value naming an option in another language (a link shared from a reader of that language, or the
    reader's own link after switching language) is not one Streamlit can read: the widget takes the option it names,
    drawn unbound this run as for a refused value, and the link names it in this run's words. Returns whether the
    widget may be bound to the link in this run."""
    raw = st.query_params.get_all(key)[-1:]  # Streamlit uses a repeated key's last value
    if not raw or raw[0] in names or len(raw[0]) > MAX_LINK_VALUE_CHARS:
        return True
    index = _option_index(raw[0], options, kw, names)
    if index is None:
        return True  # not an option in any language: _check_link_value has refused it
    st.session_state[key] = options[index]
    return False


def _choice(widget: Callable[..., Any], label: str, key: str, options: Sequence[Any], default: Any, kw: dict) -> Any:
    names = _link_names(options, kw)

    def usable(raw: str) -> bool:
        return _option_index(raw, options, kw, names) is not None

    link_ok = _check_link_value(key, label, default, usable, _("one of {options}").format(options=", ".join(names)))

    def parse(raw: str) -> Any:
        index = _option_index(raw, options, kw, names)
        if index is None:
            raise ValueError(f"not one of the options: {raw[:MAX_QUOTED_CHARS]!r}")
        return options[index]

    _drawn(key, default, usable, parse)
    adopted = link_ok and not _adopt_other_language(key, options, kw, names)
    value = _bound(widget, key, link_ok and not adopted, label, options, index=list(options).index(default), **kw)
    if adopted and value != default:
        st.query_params[key] = names[list(options).index(value)]  # Streamlit writes it so from the next run on
    return value


def selectbox(label: str, key: str, options: Sequence[Any], default: Any, **kw) -> Any:
    return _choice(st.selectbox, label, key, options, default, kw)


def radio(label: str, key: str, options: Sequence[Any], default: Any, **kw) -> Any:
    return _choice(st.radio, label, key, options, default, kw)


def toggle(label: str, key: str, default: bool, **kw) -> bool:
    link_ok = _check_link_value(key, label, default, lambda raw: raw.lower() in ("true", "false"), _("true or false"))
    _drawn(key, default, lambda raw: raw.lower() in ("true", "false"), lambda raw: raw.lower() == "true")
    return _bound(st.toggle, key, link_ok, label, default, **kw)


def link_prefix(text: str) -> str:
    """The longest prefix of `text` whose form encoding (as the browser writes a query: a space as `+`, every other
    byte but letters, digits and `*-._` as `%XX`) takes at most LINK_TEXT_BYTES."""
    size = 0
    for i, c in enumerate(text[:LINK_TEXT_BYTES]):  # no character encodes to less than one byte
        size += 1 if c in _URL_SAFE else 3 * len(c.encode("utf-8", "surrogatepass"))
        if size > LINK_TEXT_BYTES:
            return text[:i]
    return text[:LINK_TEXT_BYTES]


def _start_text(key: str, label: str, default: str) -> None:
    """The widget's first value: the link's text (its prefix that fits a link; a note when it was longer), else
    `default`. Once the key is in session state (typed, or set by a callback such as an Accept button) it stays."""
    if key in st.session_state:
        return
    raw = st.query_params.get_all(key)[-1:]  # Streamlit uses a repeated key's last value
    if not raw:
        st.session_state[key] = default
        return
    kept = link_prefix(raw[0])
    if len(kept) < len(raw[0]):
        st.session_state[_NOTE.format(key)] = (len(raw[0]), len(kept))
    st.session_state[key] = kept


def _text_from_link(raw: str) -> str:
    if link_prefix(raw) != raw:
        raise ValueError(f"a text of {len(raw):,} characters is longer than a link carries")
    return raw


def _link_text(key: str, label: str, text: str, default: str) -> None:
    """Write `text`'s link prefix to the URL (nothing for the default), and the notes about the link."""
    kept = link_prefix(text)
    if text == default:
        if key in st.query_params:
            del st.query_params[key]
    elif st.query_params.get_all(key) != [kept]:
        st.query_params[key] = kept
    said = st.session_state.get(_NOTE.format(key))
    if isinstance(said, tuple):
        st.caption(
            _(
                "The link set '{label}' to a text of {length} characters, more than a link carries; only its first "
                "{kept} are used."
            ).format(label=quoted(label, MAX_QUOTED_CHARS), length=i18n.integer(said[0]), kept=i18n.integer(said[1]))
        )
    elif len(kept) < len(text):
        st.caption(
            _(
                "This page's link keeps the first {kept} of these {length} characters (a link stays short enough to "
                "open anywhere); the page itself uses them all."
            ).format(kept=i18n.integer(len(kept)), length=i18n.integer(len(text)))
        )


def _text_widget(widget: Callable[..., str | None], label: str, key: str, default: str, kw: dict) -> str:
    _start_text(key, label, default)
    drawn = st.session_state.get(DRAWN)
    if isinstance(drawn, dict):  # a text as a link carries it: its prefix that fits (the link's own rule)
        drawn[key] = Bound(default, _text_from_link)
    kw.setdefault("max_chars", MAX_TEXT_CHARS)
    text = widget(label, key=key, on_change=_clear_note, args=(key,), **kw) or ""
    _link_text(key, label, text, default)
    return text


def text_input(label: str, key: str, default: str, **kw) -> str:
    """One line of text, at most MAX_TEXT_CHARS, whose link prefix is in the URL (see the module docstring)."""
    return _text_widget(st.text_input, label, key, default, kw)


def text_area(label: str, key: str, default: str, **kw) -> str:
    """Multi-line text (code prompts span lines), in the URL like text_input."""
    return _text_widget(st.text_area, label, key, default, kw)
