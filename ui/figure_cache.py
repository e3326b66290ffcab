"""A chart's final figure and its data table as sent, built once per server per spec.

Every chart goes through ui.companion.chart, which turns the builder's figure into what the browser is sent
(ui.projector's readable() or, projected, restyle()) and measures its share of the chart's HTML file. The same
spec is asked for again and again: every rerun of a page whose slider did not touch that chart, and the same
state asked by 30 learners, or by a class following the teacher. So the result is kept server-wide
(st.cache_resource: one object shared by every session, no copy), keyed by a digest of the builder's spec (its
trace and layout dicts, which hold every number, label and size, the Streamlit theme's template included) and the
projector switch. A hit costs the digest: a pickle of the builder's spec.

The cached figure is shared by every session, so nothing may change it: ui.companion.chart only hands it to
st.plotly_chart (which reads it) and to ui.export (which copies it before adding its margins). Its dict, what
st.plotly_chart sends, is made once when it is cached (`Drawn.to_dict`), not deep-copied on every draw.

Memory per entry, measured with tracemalloc over the 64 figures the 14 pages draw in their default state, normal
and projected: median 88 kB, at most 510 kB (the Inspector's 4 x 4 grid of 27 x 27 maps), about 12 times the
figure's JSON (each figure holds a property tree, its dict, and the Streamlit theme's template). MAX_ENTRIES = 256
bounds the cache near 25 MB for a typical mix and 130 MB if every entry were an Inspector grid; a class's working
set (every page's default state in both modes is 64 entries, each slider position a few more) fits it, and the
least recently used entries go first.

The chart's data table gets the same treatment: its Arrow form (what st.dataframe sends, converted from pandas
on every draw otherwise) and its share of the HTML file, keyed by a pickle of the DataFrame. A table's entry is
about the size of its Arrow bytes (30 kB for a 27 x 27 matrix's 729 rows).

ENABLED switches the cache off (tests/views/test_figure_path.py runs every page both ways and compares).
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pyarrow as pa
import streamlit as st
from streamlit import dataframe_util

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


def digest(fig: go.Figure, projected: bool) -> str:
    """The cache key: a digest of everything the figure would draw, and the projector switch.

    The figure's own trace and layout dicts (what to_dict() deep-copies and to_json encodes) pickled: 0.1 ms for the
    Inspector's grid where its JSON takes 7. Pickle writes every value (a numpy array's bytes included), so two
    specs that differ never share a key; the same spec written in another order gets a key of its own (a miss)."""
    spec = pickle.dumps((fig._data, fig._layout), protocol=pickle.HIGHEST_PROTOCOL)
    return hashlib.blake2b(spec, digest_size=16, person=b"proj" if projected else b"plain").hexdigest()


def build(fig: go.Figure, projected: bool) -> Final:
    """The plain computation: the builder's figure made readable (or projected), its dict and JSON size."""
    shown = projector.restyle(fig) if projected else projector.readable(fig)
    spec = shown.to_dict()
    drawn = Drawn(spec, _validate=False)
    drawn._spec = spec
    return Final(drawn, len(pio.to_json(spec, validate=False).encode()))


@st.cache_resource(max_entries=MAX_ENTRIES, show_spinner=False)
def _cached(key: str, projected: bool, _fig: go.Figure) -> Final:
    return build(_fig, projected)


def final(fig: go.Figure, projected: bool) -> Final:
    """build(fig, projected), computed once per server for each spec while ENABLED."""
    if not ENABLED:
        return build(fig, projected)
    return _cached(digest(fig, projected), projected, fig)


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
    """build_table(frame), computed once per server for each table while ENABLED (keyed by a pickle of it, which
    holds every cell, column name and dtype)."""
    if not ENABLED:
        return build_table(frame)
    key = hashlib.blake2b(pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL), digest_size=16).hexdigest()
    return _cached_table(key, frame)
