"""The Start page's join block: the address learners type to reach a class server, once, in large type on one line,
beside its QR code.

Shown only when LAB_JOIN_URL is set (the class server sets it for its workers). The value is treated as untrusted
all the same: shown only if short and shaped http(s)://host[:port]/, escaped, and the QR code is drawn offline by
segno, never by an outside service, large enough to scan from the back of a room when projected.
"""

from __future__ import annotations

import html
import io
import os
import re
from collections.abc import Mapping

import segno
import streamlit as st

from core import i18n
from core.i18n import N_, _
from ui import projector

ENV = "LAB_JOIN_URL"
MAX_CHARS = 100  # far above any address a learner would type
QR_PX = 280
PROJECTOR_QR_PX = 520
ADDRESS_PX = 40  # the address's largest type size; smaller when it would not fit its column on one line
PROJECTOR_ADDRESS_PX = 64
JOIN_TEXT = N_("**Join this class:** type this address in your browser, or scan the code.")
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
            _(
                "{setting} is not an address like http://192.168.1.20:8501/ (at most {count} characters), so the join "
                "address is not shown; set it to the address learners type, or unset it"
            ).format(setting=ENV, count=MAX_CHARS)
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


def address_html(url: str, px: int) -> str:
    """The address in type up to `px` large, on one line: never broken inside (white-space: nowrap), and smaller when
    it would not fit its column (a monospace character is about 0.6 em wide: 100cqi, the column's width, shared by
    its characters). `url` has passed join_url; escaped anyway, and never a link."""
    fit = f"calc(100cqi / {0.62 * len(url):.2f})"
    return (
        '<div style="container-type:inline-size">'
        f'<p style="font-size:min({px}px, {fit});white-space:nowrap;font-family:monospace;font-weight:700;'
        f'line-height:1.2;margin:0" data-join-address="">{html.escape(url)}</p></div>'
    )


def address(url: str) -> None:
    """The join address as the room reads it (address_html), at the projector's size when that mode is on."""
    st.markdown(address_html(url, PROJECTOR_ADDRESS_PX if projector.on() else ADDRESS_PX), unsafe_allow_html=True)


def show(*, narrow: bool = False) -> None:
    """The join block, when LAB_JOIN_URL is set: the address once, in large type on one line, and its QR code.

    `narrow`: the block sits in a column beside the page's picture (the Start page), so it is one column, the address
    right above the QR code: projected, both fit on the first screen."""
    try:
        url = join_url()
    except ValueError as e:
        st.warning(str(e))
        return
    if url is None:
        return
    png, width = qr_png(url, PROJECTOR_QR_PX if projector.on() else QR_PX)
    with st.container(border=True, key="join_block"):
        if narrow or projector.on():  # one column: the address on one line, the code below it at its full size
            address_col = code_col = st.container()
        else:
            address_col, code_col = st.columns([3, 2], vertical_alignment="center")
        with address_col:
            st.markdown(i18n._(JOIN_TEXT))
            address(url)
        with code_col:
            st.image(png, width=width, caption=_("QR code of the join address"))
