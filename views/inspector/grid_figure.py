"""The Attention inspector's small multiples: one weight heatmap per (layer, head), one colour scale.

A pure figure builder (data in, figure out). Every layer's heads in a row each, or (`one_layer`, the projector's
view) only the selected layer's heads, in a near-square grid of larger maps. The subplot layout (axes domains,
titles) depends only on which layers are drawn, the number of heads and whether ticks are drawn: it is made once
with plotly's make_subplots and kept, and every figure is then built from plain dicts in one validation. Building it
with add_trace and update_* calls on every rerun cost about 350 ms on the shipped model (4 × 4 heads); this takes a
tenth.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import math
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core import i18n
from core.i18n import _
from ui import charts

GRID_ROW_HEIGHT = 200  # pixels per layer in the small multiples
GRID_TICKS_UP_TO = 16  # tokens; longer texts draw the small multiples without tick labels
GRID_GAPS_UP_TO = 40  # tokens; longer texts draw the small multiples without cell borders
COLORBAR_PX = 64  # the bottom margin that holds the colour bar, its ticks and its title


@functools.lru_cache(maxsize=16)
def _skeleton(layers: tuple[int, ...], H: int, cols: int, show_ticks: bool, lang: str, bar_below: bool) -> dict:
    """The layout of the maps of `layers` × H heads, `cols` to a row, without its data, its title or the selected
    head (never mutated), its words in `lang` (this run's language). A map has no frame: a line along its top would
    cross its title. `bar_below`: the colour bar lies under the maps (every layer's grid, which a phone also shows),
    else beside them (one projected layer, whose maps need the height)."""
    n_maps = len(layers) * H
    rows = math.ceil(n_maps / cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        specs=[[{} if r * cols + c < n_maps else None for c in range(cols)] for r in range(rows)],
        subplot_titles=[
            _("layer {layer}, head {head}").format(layer=layer, head=h) for layer in layers for h in range(H)
        ],
        horizontal_spacing=0.03,
        vertical_spacing=(0.25 if bar_below else 0.2) / rows,  # a title's room between rows, under the map above
    )
    fig.update_xaxes(type="category", showticklabels=show_ticks, tickfont=dict(size=9), side="top", showline=False)
    fig.update_yaxes(
        type="category", autorange="reversed", showticklabels=show_ticks, tickfont=dict(size=9), showline=False
    )
    fig.update_xaxes(ticks="" if not show_ticks else None)
    fig.update_yaxes(ticks="" if not show_ticks else None)
    # 12 px titles over maps as wide as the figure allows (the colour bar lies under the maps, not beside them): a
    # map's title fits its width on a phone (390 px) with 4 heads to a row, where 13 px titles ran into each other.
    fig.update_annotations(font=dict(size=12), yshift=16 if show_ticks else 4)
    fig.update_layout(
        coloraxis=dict(colorscale=charts.MAGNITUDE_SCALE, cmin=0, cmax=1, colorbar=dict(title=_("weight"))),
        height=90 + GRID_ROW_HEIGHT * rows,
        margin=dict(l=10, r=10, t=60, b=COLORBAR_PX if bar_below else 10),
        plot_bgcolor="#e9ecef",
    )
    if bar_below:
        fig.update_layout(
            coloraxis_colorbar=dict(orientation="h", thickness=12, len=0.5, y=0, yref="container", yanchor="bottom")
        )
    return fig.layout.to_plotly_json()


def grid_figure(
    grids: Sequence[Sequence[Sequence[Sequence[float | None]]]],
    labels: Sequence[str],
    *,
    selected: tuple[int, int],
    height: int | None = None,
    one_layer: bool = False,
) -> go.Figure:
    """Small multiples of `grids` (L x H x (T, T), None = masked), titled 'layer l, head h'; the `selected`
    (layer, head), the one enlarged below, is outlined and titled in bold. `height` caps the figure's height in
    pixels (the rows share it), so a deep model's grid still fits the page's first screen. `one_layer` draws only the
    selected layer's heads, about as many rows as columns: fewer maps, each larger (on the shipped 4 × 4 model, a
    quarter of the maps at four times the area)."""
    L, H, T = len(grids), len(grids[0]), len(labels)
    layer, h = selected
    layers = (layer,) if one_layer else tuple(range(L))
    cols = math.ceil(math.sqrt(H)) if one_layer else H
    maps = [(i, j) for i in layers for j in range(H)]  # (layer, head) of each map, row by row
    gap = 1 if T <= GRID_GAPS_UP_TO else 0  # cell borders help a short text and drown a long one
    layout = copy.deepcopy(_skeleton(layers, H, cols, T <= GRID_TICKS_UP_TO, i18n.language(), not one_layer))
    if height is not None:
        layout["height"] = min(layout["height"], height)
    # The enlarged head: its title in bold and its map outlined (a longer title would run into its neighbours').
    n = maps.index(selected) + 1
    layout["annotations"][n - 1]["text"] = "<b>" + _("layer {layer}, head {head}").format(layer=layer, head=h) + "</b>"
    axes = ("x", "y") if n == 1 else (f"x{n}", f"y{n}")
    layout["shapes"] = [
        dict(
            type="rect",
            xref=f"{axes[0]} domain",
            yref=f"{axes[1]} domain",
            x0=-0.03,
            x1=1.03,
            y0=-0.03,
            y1=1.03,
            line=dict(color=charts.OKABE_ITO[1], width=3),
        )
    ]
    title = (
        _("attention weights of layer {layer}'s {heads} heads, T = {T}; outlined: enlarged below").format(
            layer=layer, heads=H, T=T
        )
        if one_layer
        else _("attention weights of every layer (rows) and head (columns), T = {T}; outlined: enlarged below").format(
            T=T
        )
    )
    layout["title"] = dict(text=title, x=0.0, xanchor="left")
    x, y = list(labels), list(labels)
    hover = _("query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>")
    cells = [charts.cells(grids[i][j]) for i, j in maps]
    # Plotly.react redraws every trace whose arrays are new objects (each rerun sends new ones) unless
    # datarevision says the data is unchanged: choosing another head changes only the bold title.
    digest = hashlib.blake2b(digest_size=8)
    for z in cells:
        digest.update(z.tobytes())
    digest.update("\x00".join(labels).encode())
    layout["datarevision"] = digest.hexdigest()
    data = [
        dict(
            type="heatmap",
            z=z,
            x=x,
            y=y,
            coloraxis="coloraxis",
            xgap=gap,
            ygap=gap,
            hoverongaps=False,
            hovertemplate=_("layer {layer}, head {head}").format(layer=i, head=j) + "<br>" + hover,
            xaxis=f"x{n}" if n > 1 else "x",
            yaxis=f"y{n}" if n > 1 else "y",
        )
        for n, ((i, j), z) in enumerate(zip(maps, cells, strict=True), start=1)
    ]
    return charts.figure(data, layout)
