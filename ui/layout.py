"""Picture first: the one layout every lab page follows, so the class sees a computed result on the first screen.

A page opens on a short title, the controls that drive its picture, and the picture; what explains comes after,
folded, one click away, so the default page is at most about two screens at 1440x900, in projector mode too (a
browser test finds the picture by its container key). A teaching case of something going wrong (a NaN row, an
unseen character) is a labelled callout, never an error box, which a projected room reads as a crash.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import streamlit as st

from core.i18n import _

PICTURE_KEY = "picture"  # the container's CSS class is st-key-picture


@contextmanager
def picture() -> Iterator[None]:
    """The page's main computed picture: keep it, and the controls that drive it, on the first screen."""
    with st.container(key=PICTURE_KEY):
        yield


def more(labels: Sequence[str]) -> list:
    """The page's other sections, one click away: st.tabs(labels)."""
    return list(st.tabs(list(labels)))


def lesson_case(title: str, body: str) -> None:
    """A teaching case of what goes wrong, in a bordered, labelled callout (not st.error / st.warning).

    `title` and `body` are the page's own markdown; a value from a link or an upload must be escaped by the
    caller (`escape_markdown`) before it goes in."""
    with st.container(border=True):
        # No :material/ icon: its font would load from outside.
        st.markdown(_("**What goes wrong: {title}**").format(title=title))
        st.markdown(body)
