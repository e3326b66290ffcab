"""Projector mode: the same pages in large type, for a teacher projecting the lab to a class.

A sidebar toggle bound to the URL (`?projector=true`), so a teacher's link opens in projector mode. It
changes only presentation, never a number:
- `style()` scales the page's type (every size in Streamlit's theme is relative to the root font size) and
  stacks columns that hold charts, so each chart gets the full width;
- `restyle(fig)` gives a copy of a Plotly figure larger text (cell values at least 18 px, axis ticks 18 px),
  thicker lines and outlines, and a white background with dark grid lines. Colours stay colour-blind safe:
  Cividis and purple-orange for matrices, and for categories the Okabe-Ito colours that keep at least 3:1
  contrast on white (yellow and sky blue are dropped).
ui.companion.chart applies it to every chart while the toggle is on;
- `dataframe(...)` is st.dataframe, except that in projector mode the rows are a static table in the page's large
  type (the interactive grid draws on a canvas in its own small type, whatever the page's font size), with the
  same number formats, scrolling past TABLE_PX. Every table of the lab goes through it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ui import params

KEY = "projector"
CELL_TEXT_PX = 18  # heatmap cell values and bar labels
TICK_PX = 18  # axis tick labels
FONT_PX = 20  # titles of axes, legends, hover
TITLE_PX = 24
LINE_PX = 4
HIGH_CONTRAST = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00")  # Okabe-Ito, ≥ 3:1 on white
ROOT_PX = 22  # the page's root font size (Streamlit's default is 16)
TABLE_PX = 520  # a projected table taller than this scrolls
_CSS = f"""<style>
html {{ font-size: {ROOT_PX}px; }}
[data-testid="stHorizontalBlock"]:has(.stPlotlyChart) {{ flex-direction: column; }}
[data-testid="stHorizontalBlock"]:has(.stPlotlyChart) > [data-testid="stColumn"] {{
  width: 100% !important; flex: 1 1 100% !important;
}}
[data-testid="stTable"] td, [data-testid="stTable"] th {{ font-size: {CELL_TEXT_PX}px; }}
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li {{ line-height: 1.5; }}
</style>"""


def toggle() -> bool:
    """The sidebar's projector switch (in the URL)."""
    with st.sidebar:
        return bool(
            params.toggle(
                "Projector mode (large type)",
                KEY,
                False,
                help="Large text and thick lines for a projected screen; every number stays the same.",
            )
        )


def on() -> bool:
    return bool(st.session_state.get(KEY, False))


def style() -> None:
    """The page's large type, while projector mode is on."""
    if on():
        st.html(_CSS)


def restyle(fig: go.Figure) -> go.Figure:
    """A copy of `fig` for a projector; `fig` itself (perhaps cached and shared) is not changed."""
    out = go.Figure(fig)
    height = out.layout.height
    out.update_layout(
        font=dict(size=FONT_PX, color="#000000"),
        title_font_size=TITLE_PX,
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        height=int(height * 1.4) if height else 560,
        margin_t=int((out.layout.margin.t or 50) * 1.3),
    )
    axes = dict(
        tickfont=dict(size=TICK_PX, color="#000000"),
        title_font=dict(size=FONT_PX, color="#000000"),
        gridcolor="#595959",
        linecolor="#000000",
        linewidth=2,
        showline=True,
    )
    out.update_xaxes(**axes)
    out.update_yaxes(**axes)
    out.update_traces(textfont_size=CELL_TEXT_PX, xgap=2, ygap=2, selector=dict(type="heatmap"))
    out.update_traces(textfont_size=CELL_TEXT_PX, selector=dict(type="bar"))
    for i, trace in enumerate(t for t in out.data if t.type == "scatter"):
        colour = HIGH_CONTRAST[i % len(HIGH_CONTRAST)]
        trace.update(line_width=LINE_PX, line_color=colour, marker_size=10, marker_color=colour)
    return out


def dataframe(
    data: Any, *, key: str, hide_index: bool | None = None, column_config: dict | None = None, **kwargs
) -> None:
    """st.dataframe(data, key=..., ...); in projector mode the same rows in large type (see the module docstring).

    Number formats given as st.column_config.NumberColumn(format="%.4f") apply to both."""
    if not on():
        st.dataframe(data, key=key, hide_index=hide_index, column_config=column_config, **kwargs)
        return
    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    formats = {}
    for column, config in (column_config or {}).items():
        printf = ((config or {}).get("type_config") or {}).get("format") if isinstance(config, dict) else None
        if column in frame.columns and isinstance(printf, str) and printf.startswith("%"):
            formats[column] = lambda v, f=printf: f % v if isinstance(v, (int, float)) else str(v)
    shown = frame.style.format(formats) if formats else frame
    rows_px = 48 * (len(frame) + 1)  # about one projected row
    if rows_px > TABLE_PX:
        with st.container(height=TABLE_PX, key=f"{key}_projected"):
            st.table(shown, hide_index=hide_index)
    else:
        st.table(shown, hide_index=hide_index)
