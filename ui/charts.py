"""Plotly figure builders shared by every page. Pure functions: data in, figure out.

Colours are chosen for colour-blind readers: Cividis for magnitudes (weights, probabilities),
the purple-orange diverging scale for signed numbers (scores), and the Okabe-Ito palette for
categories. Charts never rely on colour alone: values are printed in small heatmaps and forbidden
cells carry a "masked" label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
MAGNITUDE_SCALE = "Cividis"
SIGNED_SCALE = "PuOr"
MASKED_TEXT = "masked"

Matrix = Sequence[Sequence[float | None]]


def _layout(fig: go.Figure, title: str, height: int | None = None, top: int = 50) -> go.Figure:
    fig.update_layout(
        # Pinned to the top edge: heatmaps put their key axis (ticks and title) right under it.
        title=dict(text=title, x=0.0, xanchor="left", y=1.0, yanchor="top", yref="container", pad=dict(t=10)),
        margin=dict(l=10, r=10, t=top, b=10),
        height=height,
        font=dict(size=14),
        plot_bgcolor="#e9ecef",
    )
    return fig


def heatmap(
    z: Matrix,
    *,
    title: str,
    x_labels: Sequence[str],
    y_labels: Sequence[str],
    x_title: str = "key s",
    y_title: str = "query t",
    signed: bool = False,
    zmin: float | None = None,
    zmax: float | None = None,
    show_values: bool | None = None,
    value_format: str = ".2f",
    height: int | None = None,
) -> go.Figure:
    """A matrix with rows top-to-bottom. None cells are drawn as grey 'masked' gaps."""
    n_cells = sum(len(row) for row in z)
    show_values = n_cells <= 144 if show_values is None else show_values
    text = [[MASKED_TEXT if v is None else format(v, value_format) for v in row] for row in z]
    if signed and zmin is None and zmax is None:
        finite = [abs(v) for row in z for v in row if v is not None]
        bound = max(finite, default=1.0) or 1.0
        zmin, zmax = -bound, bound
    fig = go.Figure(
        go.Heatmap(
            z=[list(row) for row in z],
            x=list(x_labels),
            y=list(y_labels),
            text=text,
            texttemplate="%{text}" if show_values else None,
            hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>value %{{text}}<extra></extra>",
            colorscale=SIGNED_SCALE if signed else MAGNITUDE_SCALE,
            zmin=zmin,
            zmax=zmax,
            xgap=1,
            ygap=1,
            hoverongaps=True,
        )
    )
    fig.update_yaxes(autorange="reversed", title=y_title, type="category")
    fig.update_xaxes(title=x_title, side="top", type="category")
    # The key axis sits on top, under the title: leave room for title, tick labels and axis title.
    return _layout(fig, title, height, top=100)


def bars(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    y_title: str,
    x_title: str = "",
    value_format: str = ".4f",
    highlight: int | None = None,
    y_range: tuple[float, float] | None = None,
) -> go.Figure:
    """Vertical bars with their values printed; `highlight` marks one bar by colour and outline."""
    colours = [OKABE_ITO[1] if i == highlight else OKABE_ITO[0] for i in range(len(values))]
    fig = go.Figure(
        go.Bar(
            x=list(labels),
            y=list(values),
            marker=dict(
                color=colours,
                line=dict(color="#000000", width=[2 if i == highlight else 0 for i in range(len(values))]),
            ),
            text=[format(v, value_format) for v in values],
            textposition="outside",
            hovertemplate="%{x}: %{y:" + value_format + "}<extra></extra>",
        )
    )
    fig.update_xaxes(title=x_title, type="category")
    fig.update_yaxes(title=y_title, range=list(y_range) if y_range else None)
    fig.update_layout(plot_bgcolor="#ffffff")
    return _layout(fig, title)


def lines(
    x: Sequence[float],
    series: Mapping[str, Sequence[float | None]],
    *,
    title: str,
    x_title: str,
    y_title: str,
    log_y: bool = False,
    markers: bool = True,
) -> go.Figure:
    """One line per named series, each with its own colour and dash so it reads without colour."""
    dashes = ("solid", "dash", "dot", "dashdot")
    fig = go.Figure()
    for i, (name, ys) in enumerate(series.items()):
        fig.add_trace(
            go.Scatter(
                x=list(x),
                y=list(ys),
                name=name,
                mode="lines+markers" if markers else "lines",
                line=dict(color=OKABE_ITO[i % len(OKABE_ITO)], dash=dashes[i % len(dashes)]),
                connectgaps=True,
            )
        )
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, type="log" if log_y else None)
    fig.update_layout(plot_bgcolor="#ffffff", legend=dict(orientation="h", y=-0.2))
    return _layout(fig, title)
