"""The Start page's join block: the address learners type to reach a class server, in large type, and its QR code.

Shown only when LAB_JOIN_URL is set (the class server sets it for its workers). The value is treated as untrusted
all the same: shown only if short and shaped http(s)://host[:port]/, escaped, and the QR code is drawn offline by
segno, never by an outside service, large enough to scan from the back of a room when projected.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping

import segno
import streamlit as st

from ui import projector
from ui.text import escape_markdown

ENV = "LAB_JOIN_URL"
MAX_CHARS = 100  # far above any address a learner would type
QR_PX = 280
PROJECTOR_QR_PX = 520
JOIN_TEXT = "**Join this class:** type this address in your browser, or scan the code."
_SHAPE = re.compile(r"(https?)://([A-Za-z0-9](?:[A-Za-z0-9.-]{0,62}[A-Za-z0-9])?)(?::([0-9]{1,5}))?/?")


def join_url(environ: Mapping[str, str] | None = None) -> str | None:
    """LAB_JOIN_URL normalised to end with "/"; None when unset; ValueError (saying what to set, never echoing the
    value) when it is too long or not an address of the shape http(s)://host[:port]/."""
    raw = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not raw:
        return None
    match = _SHAPE.fullmatch(raw) if len(raw) <= MAX_CHARS else None
    if match is None or (match.group(3) is not None and not 1 <= int(match.group(3)) <= 65535):
        raise ValueError(
            f"{ENV} is not an address like http://192.168.1.20:8501/ (at most {MAX_CHARS} characters), so the join "
            "address is not shown; set it to the address learners type, or unset it"
        )
    return raw if raw.endswith("/") else raw + "/"


def qr_png(url: str, width_px: int) -> tuple[bytes, int]:
    """The QR code of `url` as PNG bytes, whole pixels per module, at most `width_px` wide; and its width."""
    qr = segno.make(url, error="m", micro=False)
    modules = qr.symbol_size(scale=1, border=4)[0]  # the symbol with its quiet zone
    scale = max(1, width_px // modules)
    out = io.BytesIO()
    qr.save(out, kind="png", scale=scale, border=4, dark="#000000", light="#ffffff")
    return out.getvalue(), int(scale * modules)


def show(*, narrow: bool = False) -> None:
    """The join block, when LAB_JOIN_URL is set: the address in large type (and as code to copy), and its QR code.

    `narrow`: the block sits in a column beside the page's picture (the Start page), so it is one column with the
    QR code first: projected, the code is what must fit on the first screen, and the address follows it."""
    try:
        url = join_url()
    except ValueError as e:
        st.warning(str(e))
        return
    if url is None:
        return
    png, width = qr_png(url, PROJECTOR_QR_PX if projector.on() else QR_PX)
    with st.container(border=True, key="join_block"):
        if narrow:  # the code, then the address to copy, on the first screen; the address in large type after
            st.markdown(JOIN_TEXT)
            st.image(png, width=width, caption="QR code of the join address")
            st.code(url, language=None)
            st.title(escape_markdown(url), anchor=False)  # escaped: large type, never a link or markup
            return
        if projector.on():  # one column: the address on one line, the code below it at its full projected size
            address_col = code_col = st.container()
        else:
            address_col, code_col = st.columns([3, 2], vertical_alignment="center")
        with address_col:
            st.markdown(JOIN_TEXT)
            st.title(escape_markdown(url), anchor=False)  # escaped: large type, never a link or markup
            st.code(url, language=None)  # the same address, to copy
        with code_col:
            st.image(png, width=width, caption="QR code of the join address")
