"""A short contents list at the top of a tall page: one link per section header.

    contents([("1. Four tokens, one causal mask", "masks-causal"), ...])

Each section's header is given the same anchor (`st.header(title, anchor="masks-causal")`), so a link
scrolls to it and a teacher can share a link to one section (`.../masks#masks-causal`).
Titles are the page's own text, escaped for markdown all the same.
"""

from __future__ import annotations

import re

import streamlit as st

from ui.text import escape_markdown

_ANCHOR = re.compile(r"[a-z0-9-]{1,64}")


def contents(sections: list[tuple[str, str]]) -> None:
    """Render 'On this page' with a markdown link to each (title, anchor)."""
    for _, anchor in sections:
        if not _ANCHOR.fullmatch(anchor):
            raise ValueError(f"anchor {anchor!r} must be 1-64 of a-z, 0-9 and '-'")
    lines = "\n".join(f"- [{escape_markdown(title)}](#{anchor})" for title, anchor in sections)
    st.markdown(f"**On this page**\n\n{lines}")
