"""Plotly figure builders shared by every page. Pure functions: data in, figure out.

Colours are chosen for colour-blind readers: Cividis for magnitudes (weights, probabilities),
the purple-orange diverging scale for signed numbers (scores), and the Okabe-Ito palette for
categories. Charts never rely on colour alone: values are printed in small heatmaps and forbidden
cells carry a "masked" label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import get_colorscale

from core import i18n
from core.i18n import N_, _

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
# As [stop, colour] pairs, the form Plotly's validation turns a scale's name into: figures are built without it
# (figure()), and plotly.js knows Cividis by name but not PuOr.
MAGNITUDE_SCALE = get_colorscale("Cividis")
SIGNED_SCALE = get_colorscale("PuOr")
MASKED_TEXT = N_("masked")  # translated where it is drawn
PATTERNS = ("", "/", ".", "x", "\\", "+")  # one bar pattern per series: never colour alone
MAX_VALUE_CELLS = 144  # a heatmap prints its values up to 12 x 12 cells by default...
MIN_VALUE_CELL_PX = 20  # ...and only while a cell is at least this tall on screen (see heatmap())
PLOTLY_HEIGHT_PX = 450  # the height Plotly gives a figure that sets none
HEATMAP_MARGIN_PX = 110  # a heatmap's top margin (title, key axis on top) and bottom margin (10, _layout's)

Matrix = Sequence[Sequence[float | None]]


def cells(z: Matrix) -> np.ndarray:
    """A matrix as float32 with None (a masked cell) as NaN, which Plotly draws as a gap.

    What a heatmap sends: float32 holds every value the lab's float32 tensors give exactly, a numeric array
    travels as 4 bytes per cell (Plotly 6+ base64) instead of about 20 characters of JSON, and Plotly
    validates and copies it as one block instead of walking a list of lists cell by cell. The numbers a
    chart prints and its hover text come from `text`, formatted from the original values.
    """
    return np.array([[np.nan if v is None else v for v in row] for row in z], dtype=np.float32).reshape(len(z), -1)


def masked(weights: Sequence[Sequence[float]], allowed: Sequence[Sequence[bool]]) -> list[list[float | None]]:
    """A (T, S) list of weights with the forbidden cells as None: heatmap() draws them as grey gaps."""
    return [[w if ok else None for w, ok in zip(row, ok_row)] for row, ok_row in zip(weights, allowed)]


def _merge(base: dict, extra: Mapping | None) -> dict:
    """`base` with `extra` merged in, nested dicts merged key by key (as Figure.update_* merges)."""
    out = dict(base)
    for key, value in (extra or {}).items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


def _layout(title: str, height: int | None = None, top: int = 50, **parts) -> dict:
    """The layout every builder shares; `parts` (axes, legend, ...) are added to it."""
    return dict(
        # Pinned to the top edge: heatmaps put their key axis (ticks and title) right under it.
        title=dict(text=title, x=0.0, xanchor="left", y=1.0, yanchor="top", yref="container", pad=dict(t=10)),
        margin=dict(l=10, r=10, t=top, b=10),
        height=height,
        font=dict(size=14),
        plot_bgcolor="#e9ecef",
        **parts,
    )


def _long_form(value):
    """A spec in the long form Plotly's validation would send: a title string becomes {"text": ...} (plotly.js 3
    reads only that form, and update_layout(title=dict(...)) merges into it), a property set to None is left out
    (validation treats None as unset). Only dicts and lists of dicts are walked, never a data array."""
    if isinstance(value, Mapping):
        return {
            k: {"text": v} if k == "title" and isinstance(v, str) else _long_form(v)
            for k, v in value.items()
            if v is not None
        }
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], Mapping):
        return [_long_form(v) for v in value]
    return value


def figure(data: Sequence[Mapping], layout: Mapping) -> go.Figure:
    """One figure from plain trace and layout dicts, not validated.

    Plotly's validation walks every property of every trace and axis (15 ms for the Inspector's grid, on
    every rerun); these specs come from this module's tested builders, and tests/views/test_figure_path.py
    validates every spec every page draws instead (the validated figure equals the one sent). A view may still
    call update_layout / update_traces on the result (updates are not validated either).
    """
    return go.Figure(data=[_long_form(trace) for trace in data], layout=_long_form(layout), _validate=False)


def heatmap(
    z: Matrix,
    *,
    title: str,
    x_labels: Sequence[str],
    y_labels: Sequence[str],
    x_title: str | None = None,  # "key s" in the reader's language
    y_title: str | None = None,  # "query t"
    signed: bool = False,
    zmin: float | None = None,
    zmax: float | None = None,
    show_values: bool | None = None,
    value_format: str = ".2f",
    height: int | None = None,
    x_axis: Mapping | None = None,
    trace: Mapping | None = None,
    layout: Mapping | None = None,
) -> go.Figure:
    """A matrix with rows top-to-bottom. None cells are drawn as grey 'masked' gaps.

    `x_axis`, `trace` and `layout` are merged into the key axis, the heatmap trace and the layout (as
    update_xaxes, update_traces and update_layout would).

    `show_values` None prints each cell's value when the map has at most MAX_VALUE_CELLS cells and a cell is at
    least MIN_VALUE_CELL_PX tall: the figure's height less its margins, over the rows. Smaller text cannot be read
    and costs the browser one SVG text node per cell; the hover and the chart's data table still give every value.
    (A cell's width depends on the column the page puts the chart in, which the server does not know: the cell
    count bounds it.) True or False is the caller's choice, as is: a lesson that reads words off its cells."""
    x_title = _("key s") if x_title is None else x_title
    y_title = _("query t") if y_title is None else y_title
    n_cells = sum(len(row) for row in z)
    if show_values is None:
        plot_px = ((layout or {}).get("height") or height or PLOTLY_HEIGHT_PX) - HEATMAP_MARGIN_PX
        show_values = n_cells <= MAX_VALUE_CELLS and plot_px >= MIN_VALUE_CELL_PX * max(len(z), 1)
    masked_text = i18n._(MASKED_TEXT)
    text = [[masked_text if v is None else i18n.formatted(v, value_format) for v in row] for row in z]
    if signed and zmin is None and zmax is None:
        finite = [abs(v) for row in z for v in row if v is not None]
        bound = max(finite, default=1.0) or 1.0
        zmin, zmax = -bound, bound
    heat = dict(
        type="heatmap",
        z=cells(z),
        x=list(x_labels),
        y=list(y_labels),
        text=text,
        texttemplate="%{text}" if show_values else None,
        hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>{_('value')} %{{text}}<extra></extra>",
        colorscale=SIGNED_SCALE if signed else MAGNITUDE_SCALE,
        zmin=zmin,
        zmax=zmax,
        xgap=1,
        ygap=1,
        hoverongaps=True,
    )
    # The key axis sits on top, under the title: leave room for title, tick labels and axis title.
    spec = _layout(
        title,
        height,
        top=HEATMAP_MARGIN_PX - 10,
        yaxis=dict(autorange="reversed", title=y_title, type="category"),
        xaxis=_merge(dict(title=x_title, side="top", type="category"), x_axis),
    )
    return figure([_merge(heat, trace)], _merge(spec, layout))


def bars(
    labels: Sequence[str],
    values: Sequence[float | None],  # None leaves a gap (give `text` for it)
    *,
    title: str,
    y_title: str,
    x_title: str = "",
    value_format: str = ".4f",
    highlight: int | None = None,
    y_range: tuple[float, float] | None = None,
    text: Sequence[str] | None = None,
) -> go.Figure:
    """Vertical bars with their values printed; `highlight` marks one bar by colour and outline.

    `text`: what each bar prints instead of its value (an empty list: nothing)."""
    colours = [OKABE_ITO[1] if i == highlight else OKABE_ITO[0] for i in range(len(values))]
    bar = dict(
        type="bar",
        x=list(labels),
        y=list(values),
        marker=dict(
            color=colours,
            line=dict(color="#000000", width=[2 if i == highlight else 0 for i in range(len(values))]),
        ),
        text=[i18n.formatted(v, value_format) if v is not None else "" for v in values]
        if text is None
        else (list(text) or None),
        textposition="outside",
        hovertemplate="%{x}: %{y:" + value_format + "}<extra></extra>",
    )
    layout = _layout(
        title,
        xaxis=dict(title=x_title, type="category"),
        yaxis=dict(title=y_title, range=list(y_range) if y_range else None),
    )
    return figure([bar], layout)


def lines(
    x: Sequence[float],
    series: Mapping[str, Sequence[float | None]],
    *,
    title: str,
    x_title: str,
    y_title: str,
    log_y: bool = False,
    markers: bool = True,
    x_axis: Mapping | None = None,
    y_axis: Mapping | None = None,
    extra: Sequence[Mapping] = (),
    shapes: Sequence[Mapping] = (),
    annotations: Sequence[Mapping] = (),
) -> go.Figure:
    """One line per named series, each with its own colour and dash so it reads without colour.

    `x_axis` / `y_axis` are merged into the axes, `extra` traces drawn after the series, `shapes` and
    `annotations` added to the layout: the whole figure in one validation."""
    dashes = ("solid", "dash", "dot", "dashdot")
    data = [
        dict(
            type="scatter",
            x=list(x),
            y=list(ys),
            name=name,
            mode="lines+markers" if markers else "lines",
            line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], dash=dashes[i % len(dashes)]),
            connectgaps=True,
        )
        for i, (name, ys) in enumerate(series.items())
    ]
    layout = _layout(
        title,
        xaxis=_merge(dict(title=x_title), x_axis),
        yaxis=_merge(dict(title=y_title, type="log" if log_y else None), y_axis),
        legend=dict(orientation="h", y=-0.2),
    )
    if shapes:
        layout["shapes"] = list(shapes)
    if annotations:
        layout["annotations"] = list(annotations)
    return figure(data + [dict(t) for t in extra], layout)


def plain(text) -> str:
    """A label for a Plotly figure: Plotly reads a subset of HTML in labels (links among it), so no < or >."""
    return str(text).replace("<", "‹").replace(">", "›")


def grouped_bars(
    categories: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    title: str,
    y_title: str,
    x_title: str = "",
    fmt: str = ".3f",
) -> go.Figure:
    """One bar per category and series (a model version), each series with its colour and its pattern (never colour
    alone); labels go through plain(), since series names may come from a file anyone could edit."""
    data = [
        dict(
            type="bar",
            name=plain(name),
            x=[plain(c) for c in categories],
            y=[None if v is None else float(v) for v in values],
            marker=dict(color=OKABE_ITO[i % len(OKABE_ITO)], pattern=dict(shape=PATTERNS[i % 6])),
            text=[_("n/a") if v is None else i18n.formatted(v, fmt) for v in values],
            textposition="outside",
        )
        for i, (name, values) in enumerate(series.items())
    ]
    layout = dict(
        title=dict(text=plain(title), x=0.0, xanchor="left"),
        barmode="group",
        xaxis=dict(title=x_title, type="category"),
        yaxis=dict(title=y_title),
        legend=dict(orientation="h", y=-0.25, title=dict(text=_("version"))),
        plot_bgcolor="#e9ecef",
        margin=dict(l=10, r=10, t=50, b=10),
        font=dict(size=14),
    )
    return figure(data, layout)
