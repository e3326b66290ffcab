"""Projector mode: the same pages in large type, for a teacher projecting the lab to a class.

A sidebar toggle bound to the URL, so a teacher's link opens in it. It changes only presentation, never a number:
the sidebar starts collapsed, the type is scaled, columns of charts stack, every figure gets larger text, thicker
lines and a height that fits a 1080 px screen (colour-blind-safe colours with 3:1 contrast on white), and tables
are drawn as static rows in the page's large type, since the interactive grid draws on a canvas in its own small
type.

Every page's own CSS lives here too, projected or not: its fonts (Chinese in local faces, FONT_FAMILY,
on the page and on every chart) and a phone's layout (picture first, large enough text and targets).
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.i18n import _
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
TOP_REM = 3  # room above a page's title (Streamlit's default is 6rem: about 110 px of nothing on every page)
# The page's and every chart's fonts: Streamlit's own Latin face first, then the Chinese faces common systems have
# (Debian and Ubuntu's fonts-noto-cjk, Adobe's Source Han Sans, macOS's PingFang and Hiragino, Windows' Microsoft
# YaHei). All local: no font is fetched from anywhere (a classroom may have no internet).
FONT_FAMILY = (
    '"Source Sans", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans GB", '
    '"Microsoft YaHei", sans-serif'
)
CJK_FAMILIES = tuple(face.strip(' "') for face in FONT_FAMILY.split(",")[1:-1])  # the Chinese faces, in order
# Text that keeps a face of its own: code, maths (KaTeX's), icons (a ligature font: a name in another face would
# show its name), and charts (Plotly sets each text's face from the figure, see fonts()).
_OWN_FACE = "code, code *, pre, pre *, kbd, samp, .katex, .katex *, [data-testid='stIconMaterial'], .js-plotly-plot *"
PHONE_PX = 640  # Streamlit stacks columns on a screen narrower than this: a phone, held upright
PHONE_TEXT_PX = 14  # no text on a phone's page is smaller (Streamlit sets inline code at 0.75em: 12 px)
TARGET_PX = 24  # WCAG 2.2's minimum target size (2.5.8, AA), for a finger on a phone
_CONTROL = "input,textarea,button,[role=slider]"  # a widget a learner changes
_HOLDS_PICTURE = ":is(.st-key-picture,:has(.st-key-picture))"  # the page's picture, or a box around it
_ABOVE_PICTURE = '[data-testid="stMain"] :is([data-testid="stVerticalBlock"], [data-testid="stHorizontalBlock"])'
_CHART = ":has(.stPlotlyChart)"
_FIRST_CHART = f"{_CHART}:not({_CHART}~*)"
# Every page, projected or not: the title near the top, and the fonts. On a phone, and there only (the laptop and
# projector layouts do not change):
# - the picture first. In each box around the page's picture, the picture (1) comes before the controls that precede
#   it (2), after the title and the text above it (0), and before what follows it (3: the other sections). Inside the
#   picture, its chart (1) and its summary (2) come before the controls above the chart (3), and its folded parts (the
#   data table, 4) after them. CSS order only moves boxes: the controls still drive the picture, just above them;
# - charts set side by side in a horizontal container, one to a row, each as wide as the screen;
# - text at least PHONE_TEXT_PX and every control at least TARGET_PX in both directions: sliders' thumbs, the labels
#   of radio buttons and checkboxes (the label is what a finger taps), and small icon buttons (help, tabs' scrolling).
# A rule that must win a tie of specificity comes later (and the class twice makes one such a tie).
_PAGE_CSS = f"""<style>
[data-testid="stMainBlockContainer"] {{ padding-top: {TOP_REM}rem; }}
body, body :not({_OWN_FACE}) {{ font-family: {FONT_FAMILY}; }}
@media (max-width: {PHONE_PX}px) {{
  {_ABOVE_PICTURE}:has(.st-key-picture) > :has({_CONTROL}):not({_HOLDS_PICTURE}) {{ order: 2; }}
  {_ABOVE_PICTURE} > {_HOLDS_PICTURE} {{ order: 1; }}
  {_ABOVE_PICTURE}:has(.st-key-picture) > {_HOLDS_PICTURE} ~ :not({_HOLDS_PICTURE}) {{ order: 3; }}
  .st-key-picture > :has({_CONTROL}):not({_CHART}) {{ order: 3; }}
  .st-key-picture > {_FIRST_CHART} {{ order: 1; }}
  .st-key-picture.st-key-picture > {_CHART} ~ * {{ order: 2; }}
  .st-key-picture.st-key-picture > {_CHART} ~ :has([data-testid='stExpander']) {{ order: 4; }}
  [data-testid="stMain"] [data-testid="stHorizontalBlock"] > :not([data-testid="stColumn"]){_CHART} {{
    flex: 1 1 100%; min-width: 100%;
  }}
  [data-testid="stMain"] [data-testid="stMarkdownContainer"] code {{ font-size: max(0.75em, {PHONE_TEXT_PX}px); }}
  [data-testid="stSlider"] div:has(> div > input[type="range"]) {{ width: {TARGET_PX}px; height: {TARGET_PX}px; }}
  :is([data-testid="stRadio"], [data-testid="stCheckbox"]) label {{ min-height: {TARGET_PX}px; align-items: center; }}
  [data-testid="stMain"] button {{ min-width: {TARGET_PX}px; min-height: {TARGET_PX}px; }}
}}
</style>"""
_CSS = f"""<style>
html {{ font-size: {ROOT_PX}px; }}
[data-testid="stCaptionContainer"] {{ opacity: 1; }}
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
                _("Projector mode (large type)"),
                KEY,
                False,
                help=_("Large text and thick lines for a projected screen; every number stays the same."),
            )
        )


def on() -> bool:
    return bool(st.session_state.get(KEY, False))


def sidebar_state() -> Literal["collapsed", "auto"]:
    """The sidebar's state for st.set_page_config, which runs before the toggle: collapsed while projecting (the
    toggle's value, or on a first visit the link's), else Streamlit's "auto". Streamlit applies a change of this
    value (turning the mode on collapses the sidebar) and otherwise leaves the sidebar where the user put it."""
    if KEY in st.session_state:
        projecting = bool(st.session_state[KEY])
    else:
        projecting = st.query_params.get(KEY, "").lower() == "true"
    return "collapsed" if projecting else "auto"


def style() -> None:
    """The page's spacing, and its large type and full-contrast captions (Streamlit greys them to 60% opacity, faint
    when projected) while projector mode is on."""
    st.html(_PAGE_CSS + (_CSS if on() else ""))


# Walked on the figure's plain spec (fig.to_plotly_json()), not property by property through go.Figure: Plotly's
# property objects validate and wrap every access (readable took 58 ms on the Inspector's grid, restyle three times
# that). The result is built without validation; tests/views/test_figure_path.py holds both to the go.Figure versions.
Spec = dict[str, Any]


def _at(node: Spec, *path: str) -> Spec:
    """The dict at `path` under `node`, created (empty) where missing, as a Plotly property object would be."""
    for name in path:
        child = node.get(name)
        if not isinstance(child, dict):
            child = node[name] = {} if child is None else {"text": child}  # a title given as a string
        node = child
    return node


def _get(node: Spec, *path: str) -> Any:
    """The value at `path` under `node`, None where missing (reading creates nothing)."""
    value: Any = node
    for name in path:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


@functools.cache
def _trace_has(kind: str) -> frozenset[str]:
    """Which of the font-bearing properties a trace of type `kind` has (asked of Plotly once per type)."""
    trace = go.Figure(data=[{"type": kind}]).data[0]
    names = {n for n in ("colorbar", "textfont", "insidetextfont", "outsidetextfont") if n in trace}
    if "marker" in trace and "colorbar" in trace.marker:
        names.add("marker.colorbar")
    return frozenset(names)


def _axes(layout: Spec, letter: str) -> list[str]:
    """The names of the layout's x (or y) axes, as Figure.select_xaxes finds them: the first always, then any other."""
    name = f"{letter}axis"
    return [name] + [k for k in layout if k.startswith(name) and k[len(name) :].isdigit()]


def _fonts(spec: Spec) -> list[tuple[Spec, tuple[str, ...]]]:
    """Every font of `spec` that sizes text on the chart, beyond the layout's own (which the others inherit), as
    (parent dict, path to the font)."""
    layout = _at(spec, "layout")
    found = [
        (layout, p)
        for p in [("title", "font"), ("legend", "font"), ("legend", "title", "font"), ("hoverlabel", "font")]
    ]
    for axis in _axes(layout, "x") + _axes(layout, "y"):
        found += [(layout, (axis, "tickfont")), (layout, (axis, "title", "font"))]
    for name in ["coloraxis"] + [k for k in layout if k.startswith("coloraxis") and k[9:].isdigit()]:
        found += [(layout, (name, "colorbar", "tickfont")), (layout, (name, "colorbar", "title", "font"))]
    found += [(a, ("font",)) for a in layout.get("annotations") or ()]
    for trace in spec.get("data") or ():
        has = _trace_has(trace.get("type", "scatter"))
        # Only a colour bar that is drawn: touching an unused one (a bar chart's marker.colorbar) makes Plotly draw it.
        if "colorbar" in has and trace.get("showscale") is not False and trace.get("coloraxis") is None:
            found += [(trace, ("colorbar", "tickfont")), (trace, ("colorbar", "title", "font"))]
        if "marker.colorbar" in has and _get(trace, "marker", "showscale"):
            found += [(trace, ("marker", "colorbar", "tickfont")), (trace, ("marker", "colorbar", "title", "font"))]
        found += [(trace, (name,)) for name in ("textfont", "insidetextfont", "outsidetextfont") if name in has]
    return found


def _font_floor(font: Spec, px: int) -> None:
    """Raise `font["size"]` (a number, or one per point) to at least `px`; an unset size is set to `px`."""
    size = font.get("size")
    if size is None:
        font["size"] = px
    elif isinstance(size, (int, float, np.number)):
        font["size"] = max(size, px)
    else:
        font["size"] = [px if v is None else max(v, px) for v in size]


def _floor_text(spec: Spec, px: int) -> None:
    """Make every text of `spec` at least `px`, in place."""
    _font_floor(_at(spec, "layout", "font"), px)
    for parent, path in _fonts(spec):
        _font_floor(_at(parent, *path), px)
    if any(t.get("type") in ("bar", "funnel", "waterfall") for t in spec.get("data") or ()):
        _at(spec, "layout", "uniformtext").update(minsize=px, mode="show")  # Plotly shrinks bar text to fit the bar


def _too_small(spec: Spec, px: int) -> bool:
    """Whether a size set anywhere in `spec` is under `px` (an unset one inherits Streamlit's theme: 12 px)."""
    sizes = [_get(spec, "layout", "font", "size")] + [_get(parent, *path, "size") for parent, path in _fonts(spec)]
    return any(v is not None and v < px for s in sizes for v in (s if isinstance(s, (list, tuple)) else [s]))


def _rows(z: Any) -> int:
    """A heatmap's number of rows: to_plotly_json sends a numeric array as {dtype, bdata, shape: "rows, cols"}."""
    if isinstance(z, dict):
        return int(str(z.get("shape", "1")).split(",")[0])
    return len(z)


def _built(spec: Spec) -> go.Figure:
    return go.Figure(spec, _validate=False)


def fonts(spec: Spec) -> None:
    """Give the text of `spec` (a figure as sent) the page's faces, FONT_FAMILY, in place: the layout's font, which
    every text inherits, and its title's, which Streamlit's chart theme sets apart. A face a builder chose is kept."""
    layout = _at(spec, "layout")
    for font in (_at(layout, "font"), _at(layout, "title", "font")):
        font.setdefault("family", FONT_FAMILY)


def readable(fig: go.Figure) -> go.Figure:
    """`fig`, or a copy with every text at least MIN_TEXT_PX when a builder set one smaller; `fig` is not changed."""
    spec = fig.to_plotly_json()  # a deep copy
    if not _too_small(spec, MIN_TEXT_PX):
        return fig
    _floor_text(spec, MIN_TEXT_PX)
    return _built(spec)


def restyle(fig: go.Figure) -> go.Figure:
    """A copy of `fig` for a projector; `fig` itself (perhaps cached and shared) is not changed."""
    spec = fig.to_plotly_json()  # a deep copy
    layout, data = _at(spec, "layout"), spec.setdefault("data", [])
    _at(layout, "font").update(size=FONT_PX, color="#000000")
    _at(layout, "title", "font")["size"] = TITLE_PX
    _at(layout, "legend", "font")["size"] = FONT_PX
    _at(layout, "legend", "title", "font")["size"] = FONT_PX
    _at(layout, "hoverlabel", "font")["size"] = FONT_PX
    layout.update(plot_bgcolor="#ffffff", paper_bgcolor="#ffffff")
    height = layout.get("height")
    layout["height"] = min(int(height * 1.4), MAX_HEIGHT_PX) if height else min(560, MAX_HEIGHT_PX)
    _at(layout, "margin")["t"] = int((_get(layout, "margin", "t") or 50) * 1.3)
    heatmaps = [t for t in data if t.get("type") == "heatmap"]
    for axis in _axes(layout, "x") + _axes(layout, "y"):
        _at(layout, axis, "tickfont").update(size=TICK_PX, color="#000000")
        _at(layout, axis, "title", "font").update(size=FONT_PX, color="#000000")
        _at(layout, axis).update(gridcolor="#595959", linecolor="#000000", linewidth=2)
        if layout[axis].get("showline") is not False:  # a builder that hid an axis line (a map's frame) keeps it hidden
            layout[axis]["showline"] = True
        if heatmaps:
            layout[axis]["showgrid"] = False  # a map's cells are its grid: dark lines would run through every gap
    for trace in heatmaps:
        _at(trace, "textfont")["size"] = CELL_TEXT_PX
        # Wider cell outlines read on a projector, but on a map of many small cells (the Inspector's grid of every
        # head, a 27 x 27 map in 150 px) two pixels of gap leave more gap than colour: those keep the builder's.
        if trace.get("z") is not None and _rows(trace["z"]) <= GAPPED_CELLS:
            trace.update(xgap=2, ygap=2)
    for trace in data:
        if trace.get("type") == "bar":
            _at(trace, "textfont")["size"] = CELL_TEXT_PX
    for i, trace in enumerate(t for t in data if t.get("type", "scatter") == "scatter"):
        # A colour the builder chose carries meaning (RoPE's q is blue and k vermillion, as its labels say): keep it.
        # Only a trace left to Plotly's default colour gets one of the high-contrast colours.
        # Yellow and sky blue are too pale on white for a projector: those are replaced like a default colour.
        fallback = HIGH_CONTRAST[i % len(HIGH_CONTRAST)]
        line_color = _get(trace, "line", "color")
        line = line_color if isinstance(line_color, str) and line_color not in PALE else None
        marker = _get(trace, "marker", "color")
        if isinstance(marker, str) and marker in PALE:
            marker = None
        size = _get(trace, "marker", "size")
        # Per-point sizes (an arrowhead only at a vector's tip) are scaled, not replaced by one size for every point.
        per_point = isinstance(size, (list, tuple, np.ndarray))
        size = [s * MARKER_SCALE for s in size] if per_point else (size or 6) * MARKER_SCALE
        if marker is None or isinstance(marker, str):
            marker = marker or line or fallback  # a colour per point (an array) is kept as it is
        _at(trace, "line").update(width=LINE_PX, color=line or fallback)
        _at(trace, "marker").update(size=size, color=marker)
    _floor_text(spec, MIN_PROJECTED_PX)  # annotations, colour bars, scatter labels: whatever the builder set
    return _built(spec)


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
