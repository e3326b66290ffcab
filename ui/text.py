"""What pages write around their charts: user and model text made inert for markdown, links to other
pages that may not be registered, and the pass/fail line of a check.

User text (uploads, prompts, file names, model output, error messages quoting them) is data: it goes
through `escape_markdown` before it reaches st.markdown, st.warning and friends (CONTRIBUTING.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from core import i18n
from core.i18n import _

ROOT = Path(__file__).resolve().parent.parent
# Every character markdown (or Streamlit's `:colour[...]` / `:emoji:` directives) gives a meaning to; `&` starts
# an HTML entity (`&#33;` would render as a character the text does not hold).
MARKDOWN_SPECIAL = "\\`*_{}[]()#+-.!|<>$~:&"
# GFM turns a bare URL (`http://`, `www.`) or e-mail address into a link *after* parsing, whatever the escapes, so
# a crafted link value would render as a link to another host. An invisible word joiner (U+2060, no line break)
# inside `://`, after `www` and before `@` keeps the text as it reads and leaves no link.
WORD_JOINER = "\u2060"
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)", re.IGNORECASE)


def escape_markdown(text) -> str:
    """`text` (anything, through str) made inert for st.markdown: every markup character preceded by a backslash,
    and a WORD_JOINER where GFM would otherwise make a bare URL or e-mail address a link.

    A backslash before ASCII punctuation renders as the character itself and the joiner is invisible, so the
    reader sees `text` unchanged.
    """
    return "".join("\\" + c if c in MARKDOWN_SPECIAL else c for c in _AUTOLINK.sub(WORD_JOINER, str(text)))


def number(value: float, digits: int = 3) -> str:
    """A figure for a sentence: `digits` decimals in the reader's language (i18n.number), or "n/a" for NaN (an
    average over no rows: a one-token text)."""
    return _("n/a") if value != value else i18n.number(value, digits)


def code_points(chars: Iterable[str]) -> str:
    """Characters named for a sentence, each with its code point: 'é (U+00E9), ∑ (U+2211)', escaped."""
    return ", ".join(f"{escape_markdown(c)} (U+{ord(c):04X})" for c in chars)


def link_if_registered(page: str, label: str) -> bool:
    """st.page_link to `page` (a path from the repository root) when the file exists and app.py registered it;
    False otherwise, so the page can say where to find it instead."""
    if not (ROOT / page).is_file():
        return False
    try:
        st.page_link(page, label=label)
    except StreamlitPageNotFoundError:  # the file exists but is not (yet) in the navigation
        return False
    return True


def verdict(passed: bool, if_passed: str, if_failed: str) -> None:
    """A check's outcome: `if_passed` in a success box, or `if_failed` in an error box.

    The two messages say in words which way it went, so colour is never the only channel.
    """
    if passed:
        st.success(if_passed)
    else:
        st.error(if_failed)


def explain_encoding(enc, nothing_to: str, unknown_note: str = "") -> None:
    """The notes every page that feeds text to the model owes the reader (`enc`: the text's Prompt):
    an empty text stops the page ('...so there is nothing to <nothing_to>', a verb phrase the caller translates),
    unseen characters are listed, and a text longer than the context says what was cut."""
    if enc.empty:
        st.info(
            _("The text is empty, so there is nothing to {action}. Type at least one character above.").format(
                action=nothing_to
            )
        )
        st.stop()
    if enc.unknown_chars:
        st.warning(
            _("These characters were not in the training text and became `<unk>`: {characters}.").format(
                characters=code_points(enc.unknown_chars)
            )
            + (" " + unknown_note if unknown_note else "")
        )
    if enc.truncated:
        st.info(
            _(
                "The text has {length} characters but the model reads at most {context}: the first {cut} were cut "
                "and the last {shown} are shown."
            ).format(length=enc.n_tokens, context=enc.context_length, cut=enc.dropped, shown=enc.T)
        )
