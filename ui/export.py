"""Saving what the lab shows: a chart, or every chart of the current view, as one self-contained HTML file.

The files inline plotly.js, so they open with no network: a teacher can put them on a USB stick or a class page.
That library is most of a chart's file (4.8 MB), so each button says the file's size before the download, and a
view's file holds one copy of it for all its charts. The view's file is built only on click. Summaries and tables
are escaped for HTML all the same, since they quote learner text.
"""

from __future__ import annotations

import functools
import html
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

from core import i18n
from core.i18n import _

_VIEW = "_export_view"
MAX_CHARTS = 64  # per view file: a page draws at most a few dozen
_PLOT_CONFIG = {"displaylogo": False}


@dataclass(frozen=True)
class Shown:
    fig: go.Figure
    summary: str
    table: pd.DataFrame


def _table(table: pd.DataFrame) -> str:
    """The data table as HTML, every header and cell escaped (they quote learner text); the values as str() gives
    them, as the CSV does."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in table.itertuples(index=False, name=None)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _plot(fig: go.Figure, *, with_js: bool) -> str:
    fig = go.Figure(fig)  # a copy: the page's figure (perhaps cached) stays as it is
    # Inside the app Streamlit's chart theme grows the margins to fit the tick labels; a file on its own must ask.
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return pio.to_html(fig, include_plotlyjs=with_js, full_html=False, config=_PLOT_CONFIG)


def _section(item: Shown, *, with_js: bool) -> str:
    title = item.fig.layout.title.text or ""
    return (
        f"<section><h2>{html.escape(title)}</h2>{_plot(item.fig, with_js=with_js)}"
        f"<p>{html.escape(item.summary)}</p>{_table(item.table)}</section>"
    )


_HEAD = (  # the file's language is the reader's: a screen reader voices it in that language
    "<!DOCTYPE html><html lang='{lang}'><head><meta charset='utf-8'><title>{title}</title>"
    "<style>body{{font-family:sans-serif;max-width:1100px;margin:auto}}table{{border-collapse:collapse}}"
    "td,th{{border:1px solid #999;padding:2px 6px}}</style></head><body><h1>{title}</h1>"
)


def _document(heading: str, items: list[Shown], lang: str | None = None) -> bytes:
    """The file of `items` under `heading`, in language `lang` (the current run's when None)."""
    body = "".join(_section(item, with_js=i == 0) for i, item in enumerate(items[:MAX_CHARTS]))
    head = _HEAD.format(lang=lang or i18n.language(), title=html.escape(heading))
    return (head + body + "</body></html>").encode()


_ESCAPE_GROWTH = {"&": 4, "<": 3, ">": 3, '"': 5, "'": 5}  # html.escape: &amp; &lt; &gt; &quot; &#x27;


def _escaped_size(text: str) -> int:
    return len(text.encode()) + sum(grow * text.count(c) for c, grow in _ESCAPE_GROWTH.items())


def table_size(table: pd.DataFrame) -> int:
    """len(_table(table).encode()), counted a column at a time (a 10,000-row table: milliseconds, not tens)."""
    rows, cols = table.shape
    size = len("<table><thead><tr></tr></thead><tbody></tbody></table>") + len("<tr></tr>") * rows
    size += len("<td></td>") * rows * cols + len("<th></th>") * cols
    size += sum(_escaped_size(str(c)) for c in table.columns)
    return size + sum(_escaped_size("".join(map(str, table[c].tolist()))) for c in table.columns)


@functools.cache
def _plot_overhead() -> tuple[int, int]:
    """What a plot's HTML adds to its figure's JSON, without and with the inlined plotly.js (bytes, measured once
    on an empty figure: the library is the same for every chart)."""
    empty = go.Figure()
    json_size = len(pio.to_json(empty).encode())
    return tuple(len(_plot(empty, with_js=js).encode()) - json_size for js in (False, True))  # type: ignore[return-value]


def _chart_heading(fig: go.Figure) -> str:
    return _("Attention Lab: {title}").format(title=fig.layout.title.text or _("chart"))


def chart_html_size(
    fig: go.Figure, summary: str, table: pd.DataFrame, plot_bytes: int | None = None, table_bytes: int | None = None
) -> int:
    """The size of chart_html(fig, summary, table) in bytes, within a few hundred (the margins the file asks for),
    computed without building the file: most of it is plotly.js, measured once. `plot_bytes`: the length of
    `fig`'s JSON and `table_bytes` table_size(table), when the caller knows them (the figure cache measures both once
    per spec)."""
    heading = html.escape(_chart_heading(fig))
    title = html.escape(fig.layout.title.text or "")
    head = _HEAD.format(lang=i18n.language(), title=heading)
    wrapper = f"{head}<section><h2>{title}</h2><p>{html.escape(summary)}</p></section></body></html>"
    plot = (len(pio.to_json(fig).encode()) if plot_bytes is None else plot_bytes) + _plot_overhead()[1]
    return len(wrapper.encode()) + plot + (table_size(table) if table_bytes is None else table_bytes)


def size_text(n_bytes: int) -> str:
    """A file's size for a button: '4.8 MB', '310 kB' (decimal units, as browsers' download lists show them)."""
    if n_bytes >= 1e6:
        return _("{size} MB").format(size=i18n.number(n_bytes / 1e6, 1))
    return _("{size} kB").format(size=str(max(1, round(n_bytes / 1e3))))


def chart_html(fig: go.Figure, summary: str, table: pd.DataFrame, *, lang: str | None = None) -> bytes:
    """One chart as an offline HTML page: the figure, its one-line summary and its data table, its own words in
    `lang` (the current run's when None; a download built on click runs outside the page's run)."""
    with i18n.speaking(lang or i18n.language()):
        return _document(_chart_heading(fig), [Shown(fig, summary, table)])


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
    heading, lang = _("Attention Lab: {title}").format(title=title), i18n.language()  # the file is built on click
    with st.sidebar:
        st.download_button(
            _("Download this view (HTML, works offline)"),
            lambda: _document(heading, view, lang),
            file_name=f"attention-lab-{''.join(c if c.isalnum() else '-' for c in title.lower())}.html",
            mime="text/html",
            key="export_view",
            on_click="ignore",
            help=_(
                "Every chart on this page with its summary and data table, in one file that opens without a network."
            ),
        )
