"""A chart's final figure and its data table as sent, built once per server per spec.

The same chart is asked for again and again (every rerun that did not touch it, 30 learners in the same state, a
class following the teacher), so the figure as sent is kept server-wide (st.cache_resource, shared, no copy), keyed
by a digest of the builder's spec and the projector switch; a hit costs the digest. A cached figure is shared by
every session, so nothing may change it. MAX_ENTRIES = 256 bounds the cache near 25 MB for a typical mix (an entry:
median 88 kB, at most 510 kB for the Inspector's grid, measured with tracemalloc over the 64 default figures); a
class's working set fits, least recently used first out. ENABLED switches it off (a page test runs both ways).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pyarrow as pa
import streamlit as st
from streamlit import dataframe_util

from core import i18n
from ui import export, projector

ENABLED = True
MAX_ENTRIES = 256


class Drawn(go.Figure):
    """A final figure whose dict is made once. st.plotly_chart calls to_dict() on every draw, a deep copy of every
    trace; this one returns the same dict each time, which nothing changes (pio.to_json only reads it)."""

    _spec: dict

    def to_dict(self) -> dict:
        return self._spec


@dataclass(frozen=True)
class Final:
    fig: Drawn  # what the browser is sent, and what ui.export saves
    plot_bytes: int  # len(plotly.io.to_json(fig)): the plot's share of the chart's HTML file (ui.export)


class Unhashable(Exception):
    """A value `feed` cannot write faithfully: the chart is built, not cached."""


_SCALARS = (str, int, float, bool, type(None))
_PLAIN = frozenset(_SCALARS)  # exactly these types: numpy's float64 (a float subclass) goes the array way


def feed(h: Any, value: object) -> None:  # h: a hashlib object (hashlib._Hash is private)
    """Write `value` into the digest `h` so that two values that differ never write the same bytes: containers with
    their length, every scalar with its type and the length of its repr, arrays with their dtype, shape and bytes.

    Only the types a figure spec or a table holds are written (dict, list, tuple, str, int, float, bool, None, numpy
    arrays and scalars); anything else raises Unhashable, so a value whose repr might not say all of it (a pandas
    object prints "...") never makes two specs share a key. Not pickle: the lab never imports a pickle module
    (tests/model/test_bundle.py), and a walk of a figure's few dicts is as fast (0.1 ms for the Inspector's grid)."""
    if isinstance(value, dict):
        h.update(b"{%d;" % len(value))
        for key, item in value.items():  # in order: the same spec written in another order is only a miss
            feed(h, key)
            feed(h, item)
    elif isinstance(value, list | tuple) and all(type(item) in _PLAIN for item in value):
        # A list of plain scalars (a heatmap's cell texts, a table's column) in one C call: JSON writes each of these
        # types distinctly (1, 1.0, true, "true", null, NaN) and every float exactly, so it is as faithful.
        text = json.dumps(value).encode()
        h.update(b"j%d;" % len(text))
        h.update(text)
    elif isinstance(value, list | tuple):
        h.update(b"[%d;" % len(value))
        for item in value:
            feed(h, item)
    elif isinstance(value, np.ndarray | np.generic):
        if value.dtype.hasobject:
            feed(h, value.tolist())
            return
        array = np.ascontiguousarray(value)
        h.update(f"a{array.dtype.str}{array.shape};".encode())
        h.update(array.tobytes())
    elif isinstance(value, _SCALARS):
        text = repr(value).encode()
        h.update(b"%s%d;" % (type(value).__name__.encode(), len(text)))
        h.update(text)
    else:
        raise Unhashable(type(value).__name__)


def digest(fig: go.Figure, projected: bool) -> str | None:
    """The cache key: a digest of everything the figure would draw (its own trace and layout dicts, what to_dict()
    deep-copies and to_json encodes), the projector switch and the language's number signs; None when the spec holds
    a value `feed` does not write (the figure is then built, not cached)."""
    h = hashlib.blake2b(digest_size=16, person=b"proj" if projected else b"plain")
    try:
        feed(h, (fig._data, fig._layout, i18n.plotly_separators()))
    except Unhashable:
        return None
    return h.hexdigest()


def build(fig: go.Figure, projected: bool) -> Final:
    """The plain computation: the builder's figure made readable (or projected), its dict and JSON size."""
    shown = projector.restyle(fig) if projected else projector.readable(fig)
    spec = shown.to_dict()  # a deep copy: `shown` may be the builder's own (cached, shared) figure
    spec.setdefault("layout", {})["separators"] = i18n.plotly_separators()  # 0,55 in Spanish: ticks in its signs
    projector.fonts(spec)  # Chinese in the faces the page declares, not the browser's fallback
    drawn = Drawn(spec, _validate=False)
    drawn._spec = spec
    return Final(drawn, len(pio.to_json(spec, validate=False).encode()))


@st.cache_resource(max_entries=MAX_ENTRIES, show_spinner=False)
def _cached(key: str, projected: bool, _fig: go.Figure) -> Final:
    return build(_fig, projected)


def final(fig: go.Figure, projected: bool) -> Final:
    """build(fig, projected), computed once per server for each spec while ENABLED."""
    key = digest(fig, projected) if ENABLED else None
    if key is None:
        return build(fig, projected)
    return _cached(key, projected, fig)


@dataclass(frozen=True)
class Table:
    arrow: pa.Table  # what st.dataframe sends for the DataFrame (Streamlit's own conversion)
    html_bytes: int  # the table's share of the chart's HTML file (ui.export)


def build_table(frame: pd.DataFrame) -> Table:
    """The plain computation: the DataFrame as Streamlit converts it, and its size in the HTML file."""
    return Table(dataframe_util.convert_pandas_df_to_arrow_table(frame), export.table_size(frame))


@st.cache_resource(max_entries=MAX_ENTRIES, show_spinner=False)
def _cached_table(key: str, _frame: pd.DataFrame) -> Table:
    return build_table(_frame)


def table(frame: pd.DataFrame) -> Table:
    """build_table(frame), computed once per server for each table while ENABLED (keyed by `feed` over
    its column names, dtypes, index labels and cells; a cell `feed` does not write leaves it uncached)."""
    if not ENABLED:
        return build_table(frame)
    h = hashlib.blake2b(digest_size=16, person=b"table")
    try:
        feed(h, ([str(c) for c in frame.columns], [str(t) for t in frame.dtypes], frame.index.tolist()))
        for column in frame.columns:
            feed(h, frame[column].tolist())
    except Unhashable:
        return build_table(frame)
    return _cached_table(h.hexdigest(), frame)
