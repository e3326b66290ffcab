"""Projector mode: the same pages in large type, for a teacher projecting the lab to a class.

A sidebar toggle bound to the URL (`?projector=true`), so a teacher's link opens in projector mode. It
changes only presentation, never a number:
- `sidebar_state()` (app.py's set_page_config, before any widget) starts the sidebar collapsed while the mode is
  on, so the page gets the whole projected width; its arrow in the top corner opens it again, toggle included;
- `style()` scales the page's type (every size in Streamlit's theme is relative to the root font size) and
  stacks a row of columns when two of them hold charts, so each chart gets the full width (a row of controls
  beside a chart stays a row: the picture and its controls fit one screen);
- `restyle(fig)` gives a copy of a Plotly figure larger text: every text the figure can draw (cell values, ticks,
  axis and legend titles, annotations, colour bars, hover labels) at least MIN_PROJECTED_PX, thicker lines and
  outlines, a white background with dark grid lines, and a height of at most MAX_HEIGHT_PX so a picture and its
  controls fit a 1080 px screen. Colours stay colour-blind safe: Cividis and purple-orange for matrices, and for
  categories the Okabe-Ito colours that keep at least 3:1 contrast on white (yellow and sky blue are dropped).
  ui.companion.chart applies it to every chart while the toggle is on, and `readable(fig)` otherwise (no text
  under MIN_TEXT_PX);
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
MIN_PROJECTED_PX = 16  # no text on a projected chart is smaller (issue 25)
MIN_TEXT_PX = 12  # nor on a chart in the normal view
MAX_HEIGHT_PX = 620  # a projected chart, so that it and the controls above it fit a 1080 px screen
CELL_TEXT_PX = 18  # heatmap cell values and bar labels
TICK_PX = 18  # axis tick labels
FONT_PX = 20  # titles of axes, legends, hover
TITLE_PX = 24
LINE_PX = 4
PALE = ("#56B4E9", "#F0E442")  # Okabe-Ito sky blue and yellow: under 3:1 on white
MARKER_SCALE = 1.5  # markers (points, arrowheads) grow by half, as the lines do
GAPPED_CELLS = 16  # a projected heatmap of at most this many rows gets 2 px between cells
HIGH_CONTRAST = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00")  # Okabe-Ito, ≥ 3:1 on white
ROOT_PX = 22  # the page's root font size (Streamlit's default is 16)
TABLE_PX = 520  # a projected table taller than this scrolls
# A row of columns whose first column and another one hold charts (two charts side by side): stacked when projected.
_COLUMN = '[data-testid="stColumn"]'
_CHART_ROW = (
    f'[data-testid="stHorizontalBlock"]:has(> {_COLUMN}:first-child .stPlotlyChart)'
    f":has(> {_COLUMN}:not(:first-child) .stPlotlyChart)"
)
_CSS = f"""<style>
html {{ font-size: {ROOT_PX}px; }}
{_CHART_ROW} {{ flex-direction: column; }}
{_CHART_ROW} > [data-testid="stColumn"] {{ width: 100% !important; flex: 1 1 100% !important; }}
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


def sidebar_state() -> str:
    """The sidebar's state for st.set_page_config, which runs before the toggle: collapsed while projecting (the
    toggle's value, or on a first visit the link's), else Streamlit's "auto". Streamlit applies a change of this
    value (turning the mode on collapses the sidebar) and otherwise leaves the sidebar where the user put it."""
    if KEY in st.session_state:
        projecting = bool(st.session_state[KEY])
    else:
        projecting = st.query_params.get(KEY, "").lower() == "true"
    return "collapsed" if projecting else "auto"


def style() -> None:
    """The page's large type, while projector mode is on."""
    if on():
        st.html(_CSS)


def _font_floor(font: Any, px: int) -> None:
    """Raise `font.size` (a number, or one per point) to at least `px`; an unset size is set to `px`."""
    size = font.size
    if size is None:
        font.size = px
    elif isinstance(size, (int, float)):
        font.size = max(size, px)
    else:
        font.size = [px if v is None else max(v, px) for v in size]


def _fonts(fig: go.Figure) -> list[Any]:
    """Every font of `fig` that sizes text on the chart, beyond the layout's own (which the others inherit)."""
    layout = fig.layout
    found = [layout.title.font, layout.legend.font, layout.legend.title.font, layout.hoverlabel.font]
    for axis in [*fig.select_xaxes(), *fig.select_yaxes()]:
        found += [axis.tickfont, axis.title.font]
    for name in layout:
        if name.startswith("coloraxis"):
            found += [layout[name].colorbar.tickfont, layout[name].colorbar.title.font]
    found += [a.font for a in layout.annotations]
    for trace in fig.data:
        # Only a colour bar that is drawn: touching an unused one (a bar chart's marker.colorbar) makes Plotly draw it.
        if "colorbar" in trace and trace.showscale is not False and trace.coloraxis is None:
            found += [trace.colorbar.tickfont, trace.colorbar.title.font]
        marker = getattr(trace, "marker", None)
        if marker is not None and "colorbar" in marker and marker.showscale:
            found += [marker.colorbar.tickfont, marker.colorbar.title.font]
        for name in ("textfont", "insidetextfont", "outsidetextfont"):
            if name in trace:
                found.append(trace[name])
    return found


def _floor_text(fig: go.Figure, px: int) -> None:
    """Make every text of `fig` at least `px`, in place."""
    _font_floor(fig.layout.font, px)
    for font in _fonts(fig):
        _font_floor(font, px)
    if any(t.type in ("bar", "funnel", "waterfall") for t in fig.data):  # Plotly shrinks bar text to fit the bar
        fig.update_layout(uniformtext_minsize=px, uniformtext_mode="show")


def _too_small(fig: go.Figure, px: int) -> bool:
    """Whether a size set anywhere in `fig` is under `px` (an unset one inherits Streamlit's theme: 12 px)."""
    sizes = [f.size for f in [fig.layout.font, *_fonts(fig)]]
    return any(v is not None and v < px for s in sizes for v in (s if isinstance(s, (list, tuple)) else [s]))


def readable(fig: go.Figure) -> go.Figure:
    """`fig`, or a copy with every text at least MIN_TEXT_PX when a builder set one smaller; `fig` is not changed."""
    if not _too_small(fig, MIN_TEXT_PX):
        return fig
    out = go.Figure(fig)
    _floor_text(out, MIN_TEXT_PX)
    return out


def restyle(fig: go.Figure) -> go.Figure:
    """A copy of `fig` for a projector; `fig` itself (perhaps cached and shared) is not changed."""
    out = go.Figure(fig)
    height = out.layout.height
    out.update_layout(
        font=dict(size=FONT_PX, color="#000000"),
        title_font_size=TITLE_PX,
        legend=dict(font_size=FONT_PX, title_font_size=FONT_PX),
        hoverlabel_font_size=FONT_PX,
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        height=min(int(height * 1.4), MAX_HEIGHT_PX) if height else min(560, MAX_HEIGHT_PX),
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
    if any(t.type == "heatmap" for t in out.data):
        axes["showgrid"] = False  # a map's cells are its grid: dark lines would run through every gap between them
    out.update_xaxes(**axes)
    out.update_yaxes(**axes)
    out.update_traces(textfont_size=CELL_TEXT_PX, selector=dict(type="heatmap"))
    for trace in out.data:
        # Wider cell outlines read on a projector, but on a map of many small cells (the Inspector's grid of every
        # head, a 27 x 27 map in 150 px) two pixels of gap leave more gap than colour: those keep the builder's.
        if trace.type == "heatmap" and trace.z is not None and len(trace.z) <= GAPPED_CELLS:
            trace.update(xgap=2, ygap=2)
    out.update_traces(textfont_size=CELL_TEXT_PX, selector=dict(type="bar"))
    for i, trace in enumerate(t for t in out.data if t.type == "scatter"):
        # A colour the builder chose carries meaning (RoPE's q is blue and k vermillion, as its labels say): keep it.
        # Only a trace left to Plotly's default colour gets one of the high-contrast colours.
        # Yellow and sky blue are too pale on white for a projector: those are replaced like a default colour.
        fallback = HIGH_CONTRAST[i % len(HIGH_CONTRAST)]
        line = trace.line.color if isinstance(trace.line.color, str) and trace.line.color not in PALE else None
        marker = trace.marker.color
        if isinstance(marker, str) and marker in PALE:
            marker = None
        size = trace.marker.size
        # Per-point sizes (an arrowhead only at a vector's tip) are scaled, not replaced by one size for every point.
        size = [s * MARKER_SCALE for s in size] if isinstance(size, (list, tuple)) else (size or 6) * MARKER_SCALE
        trace.update(
            line_width=LINE_PX, line_color=line or fallback, marker_size=size, marker_color=marker or line or fallback
        )
    _floor_text(out, MIN_PROJECTED_PX)  # annotations, colour bars, scatter labels: whatever the builder set
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
