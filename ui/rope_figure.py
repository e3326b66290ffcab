"""The RoPE page's drawing of one pair: q and k before and after rotation, with the turning angles as arcs.

A pure figure builder (data in, figure out) in the shared colour-blind-safe palette; the page gives it its summary
and data table.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from core.lessons import rope as rope_lab
from ui import charts

Q_COLOUR, K_COLOUR = charts.OKABE_ITO[0], charts.OKABE_ITO[5]  # blue, vermillion


def pair_figure(rot: rope_lab.PairRotation) -> go.Figure:
    """The pair of q and of k before (dotted) and after (solid) rotation, arrows from the origin, equal axes,
    with the turning angles m·θ and n·θ drawn as arcs and labelled."""
    traces: list[dict] = []
    lengths, angles = rot.lengths, rot.angles
    reach = max(lengths.values()) or 1.0
    vectors = [
        ("q before", rot.q_before, Q_COLOUR, "dot", "q"),
        ("q after", rot.q_after, Q_COLOUR, "solid", f"q at m={rot.m}"),
        ("k before", rot.k_before, K_COLOUR, "dot", "k"),
        ("k after", rot.k_after, K_COLOUR, "solid", f"k at n={rot.n}"),
    ]
    for name, (x, y), colour, dash, tip in vectors:
        traces.append(
            dict(
                type="scatter",
                x=[0.0, x],
                y=[0.0, y],
                name=name if "before" in name else f"{name} RoPE",
                mode="lines+markers+text",
                line=dict(color=colour, dash=dash, width=3 if dash == "solid" else 2),
                marker=dict(symbol="arrow", size=[0, 16], angleref="previous", color=colour),
                text=["", tip],
                textposition="top center",
                textfont=dict(color=colour),
                hovertemplate=f"{name}<br>(%{{x:.4f}}, %{{y:.4f}})<extra></extra>",
            )
        )
    # Two concentric arcs at fixed fractions of the drawing, so a short vector does not crowd its label.
    for vec, sweep, radius, name in (("q", rot.angle_q, 0.62 * reach, "m·θ"), ("k", rot.angle_k, 0.38 * reach, "n·θ")):
        colour = Q_COLOUR if vec == "q" else K_COLOUR
        label = f"{name} = {sweep:.3f} rad" + (" (mod 2π)" if abs(sweep) >= 2 * math.pi else "")
        start = angles[f"{vec} before"]
        points = rope_lab.arc_points(start, sweep, radius)
        traces.append(
            dict(
                type="scatter",
                x=[p[0] for p in points],
                y=[p[1] for p in points],
                mode="lines+markers",
                name=f"{vec} turned by {label}",
                line=dict(color=colour, width=1.5),
                hoverinfo="skip",
                marker=dict(symbol="arrow", size=[0] * (len(points) - 1) + [11], angleref="previous", color=colour),
            )
        )
        # A short label just outside the arc's middle; the full value is in the legend and the metrics.
        middle = rope_lab.arc_points(start, sweep, radius * 1.14)[len(points) // 2]
        traces.append(
            dict(
                type="scatter",
                x=[middle[0]],
                y=[middle[1]],
                mode="text",
                text=[f"{name}={sweep:.2f}"],
                showlegend=False,
                textfont=dict(color=colour, size=12),
                hoverinfo="skip",
            )
        )
    bound = 1.3 * reach
    layout = dict(
        xaxis=dict(range=[-bound, bound], zeroline=True, zerolinecolor="#888888", title=f"feature {rot.dims[0]}"),
        yaxis=dict(
            range=[-bound, bound],
            zeroline=True,
            zerolinecolor="#888888",
            title=f"feature {rot.dims[1]}",
            scaleanchor="x",
            scaleratio=1,
        ),
        title=dict(
            text=f"pair {rot.pair} (features {rot.dims[0]}, {rot.dims[1]}): q at m = {rot.m}, k at n = {rot.n}",
            x=0.0,
            xanchor="left",
        ),
        height=480,  # with the controls above it, one screen at 1440x900 and projected (x1.4)
        margin=dict(l=10, r=10, t=50, b=10),
        font=dict(size=14),
        plot_bgcolor="#ffffff",
        legend=dict(orientation="h", yanchor="top", y=-0.2),  # below the x axis title, not over it
    )
    return charts.figure(traces, layout)
