"""Saving what the lab shows: a chart, or every chart of the current view, as one self-contained HTML file.

    chart_html(fig, summary, table) -> bytes     one chart, its summary and its data table
    begin()                                      app.py, before the page runs: a fresh list for this run
    collect(fig, summary, table)                 ui.companion.chart: each chart joins the view's list
    view_button()                                the sidebar's "Download this view" (deferred: built on click)

The files inline plotly.js (`plotly.io.to_html(include_plotlyjs=True)`), so they open with no network: a
teacher can put them on a USB stick or a class page. Summaries and tables are the page's own text, escaped
for HTML all the same (they quote learner text). PNG: each chart's camera button (Plotly's modebar) saves
it in the browser, offline.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

_VIEW = "_export_view"
MAX_CHARTS = 64  # per view file: a page draws at most a few dozen


@dataclass(frozen=True)
class Shown:
    fig: go.Figure
    summary: str
    table: pd.DataFrame


def _section(item: Shown, *, with_js: bool) -> str:
    title = item.fig.layout.title.text or ""
    fig = go.Figure(item.fig)  # a copy: the page's figure (perhaps cached) stays as it is
    # Inside the app Streamlit's chart theme grows the margins to fit the tick labels; a file on its own must ask.
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    plot = pio.to_html(fig, include_plotlyjs=with_js, full_html=False, config={"displaylogo": False})
    return (
        f"<section><h2>{html.escape(title)}</h2>{plot}<p>{html.escape(item.summary)}</p>"
        f"{item.table.to_html(index=False, escape=True, border=0)}</section>"
    )


def _document(heading: str, items: list[Shown]) -> bytes:
    body = "".join(_section(item, with_js=i == 0) for i, item in enumerate(items[:MAX_CHARTS]))
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(heading)}</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #999;padding:2px 6px}</style></head>"
        f"<body><h1>{html.escape(heading)}</h1>{body}</body></html>"
    ).encode()


def chart_html(fig: go.Figure, summary: str, table: pd.DataFrame) -> bytes:
    """One chart as an offline HTML page: the figure, its one-line summary and its data table."""
    return _document(f"Attention Lab: {fig.layout.title.text or 'chart'}", [Shown(fig, summary, table)])


def begin() -> None:
    """A new, empty list of this run's charts (the previous run's list stays with its download button)."""
    st.session_state[_VIEW] = []


def collect(fig: go.Figure, summary: str, table: pd.DataFrame) -> None:
    view = st.session_state.get(_VIEW)
    if view is not None and len(view) < MAX_CHARTS:
        view.append(Shown(fig, summary, table))


def view_button(title: str) -> None:
    """A sidebar button that saves every chart this run draws as one offline HTML file (built on click)."""
    view = st.session_state.setdefault(_VIEW, [])  # the same list object the page's charts fill
    with st.sidebar:
        st.download_button(
            "Download this view (HTML, works offline)",
            lambda: _document(f"Attention Lab: {title}", view),
            file_name=f"attention-lab-{''.join(c if c.isalnum() else '-' for c in title.lower())}.html",
            mime="text/html",
            key="export_view",
            on_click="ignore",
            help="Every chart on this page with its summary and data table, in one file that opens without a network.",
        )
