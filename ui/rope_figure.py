"""The RoPE page's drawing of one pair: q and k before and after rotation, with the turning angles as arcs.

A pure figure builder (data in, figure out) in the shared colour-blind-safe palette; the page gives it its summary
and data table.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from core import i18n
from core.i18n import _
from core.lessons import rope as rope_lab
from ui import charts

Q_COLOUR, K_COLOUR = charts.OKABE_ITO[0], charts.OKABE_ITO[5]  # blue, vermillion


LABEL_GAP = 0.08  # an after-arrow's label starts this far (a fraction of the drawing's reach) past its tip...
MIN_LABEL_RADIUS = 0.25  # ...and no label sits closer to the origin than this fraction, where the arrows meet
Q_ARC, K_ARC = 0.7, 0.45  # the angle arcs' radii, as fractions of their own vector's length...
MIN_ARC = 0.15  # ...and never under this fraction of the drawing's reach


def away_from_origin(x: float, y: float) -> str:
    """The Plotly textposition that puts a label on the side of its point facing away from the origin."""
    length = math.hypot(x, y) or 1.0
    vertical = "top" if y / length > 0.4 else "bottom" if y / length < -0.4 else "middle"
    horizontal = "right" if x / length > 0.4 else "left" if x / length < -0.4 else "center"
    return f"{vertical} {horizontal}"


def label_points(rot: rope_lab.PairRotation, reach: float) -> list[tuple[str, float, float, str, str]]:
    """(text, x, y, textposition, colour) of the four arrow labels. A before-arrow is named beside its middle (on
    the clockwise side: RoPE turns the after-arrow the other way), an after-arrow past its tip, so when a slow pair
    hardly turns and the two arrows lie on top of each other their labels still do not."""
    out = []
    for text, (x, y), colour, after in (
        ("q", rot.q_before, Q_COLOUR, False),
        (_("q at m={m}").format(m=rot.m), rot.q_after, Q_COLOUR, True),
        ("k", rot.k_before, K_COLOUR, False),
        (_("k at n={n}").format(n=rot.n), rot.k_after, K_COLOUR, True),
    ):
        length = math.hypot(x, y) or 1.0
        ux, uy = x / length, y / length  # the arrow's direction
        if after:
            radius = max(length + LABEL_GAP * reach, MIN_LABEL_RADIUS * reach)
            out.append((text, ux * radius, uy * radius, away_from_origin(ux, uy), colour))
        else:  # off the line by LABEL_GAP, clockwise of it
            radius, off = max(0.5 * length, MIN_LABEL_RADIUS * reach), LABEL_GAP * reach
            out.append((text, ux * radius + uy * off, uy * radius - ux * off, away_from_origin(uy, -ux), colour))
    return out


def pair_figure(rot: rope_lab.PairRotation) -> go.Figure:
    """The pair of q and of k before (dotted) and after (solid) rotation, arrows from the origin, equal axes,
    with the turning angles m·θ and n·θ drawn as arcs (their values in the legend) and each arrow named once."""
    traces: list[dict] = []
    lengths, angles = rot.lengths, rot.angles
    reach = max(lengths.values()) or 1.0
    q_before, q_after, k_before, k_after = rope_lab.VECTORS  # the names core gives them (N_ messages)
    vectors = [  # (name, legend name, vector, colour, dash)
        (q_before, _("q before"), rot.q_before, Q_COLOUR, "dot"),
        (q_after, _("q after RoPE"), rot.q_after, Q_COLOUR, "solid"),
        (k_before, _("k before"), rot.k_before, K_COLOUR, "dot"),
        (k_after, _("k after RoPE"), rot.k_after, K_COLOUR, "solid"),
    ]
    for name, legend, (x, y), colour, dash in vectors:
        traces.append(
            dict(
                type="scatter",
                x=[0.0, x],
                y=[0.0, y],
                name=legend,
                mode="lines+markers",
                line=dict(color=colour, dash=dash, width=3 if dash == "solid" else 2),
                marker=dict(symbol="arrow", size=[0, 16], angleref="previous", color=colour),
                hovertemplate=f"{i18n._(name)}<br>(%{{x:.4f}}, %{{y:.4f}})<extra></extra>",
            )
        )
    # Each arc inside its own arrows (q's further out than k's when they are as long), so the labels past the tips
    # stay clear of them; its angle is written in the legend and the metrics beside the drawing.
    for vec, before, sweep, radius, angle in (
        ("q", q_before, rot.angle_q, max(Q_ARC * lengths[q_before], MIN_ARC * reach), "m·θ"),
        ("k", k_before, rot.angle_k, max(K_ARC * lengths[k_before], MIN_ARC * reach), "n·θ"),
    ):
        colour = Q_COLOUR if vec == "q" else K_COLOUR
        turned = (
            _("{vector} turned by {angle} = {sweep} rad (mod 2π)")
            if abs(sweep) >= 2 * math.pi
            else _("{vector} turned by {angle} = {sweep} rad")
        ).format(vector=vec, angle=angle, sweep=i18n.number(sweep, 3))
        start = angles[before]
        points = rope_lab.arc_points(start, sweep, radius)
        traces.append(
            dict(
                type="scatter",
                x=[p[0] for p in points],
                y=[p[1] for p in points],
                mode="lines+markers",
                name=turned,
                line=dict(color=colour, width=1.5),
                hoverinfo="skip",
                marker=dict(symbol="arrow", size=[0] * (len(points) - 1) + [11], angleref="previous", color=colour),
            )
        )
    labels = label_points(rot, reach)
    traces.append(
        dict(
            type="scatter",
            x=[x for _, x, _, _, _ in labels],
            y=[y for _, _, y, _, _ in labels],
            mode="text",
            text=[text for text, *_ in labels],
            textposition=[side for *_, side, _ in labels],
            textfont=dict(color=[colour for *_, colour in labels]),
            showlegend=False,
            hoverinfo="skip",
        )
    )
    bound = 1.3 * reach
    layout = dict(
        xaxis=dict(
            range=[-bound, bound],
            zeroline=True,
            zerolinecolor="#888888",
            title=_("feature {index}").format(index=rot.dims[0]),
        ),
        yaxis=dict(
            range=[-bound, bound],
            zeroline=True,
            zerolinecolor="#888888",
            title=_("feature {index}").format(index=rot.dims[1]),
            scaleanchor="x",
            scaleratio=1,
        ),
        title=dict(
            text=_("pair {pair} (features {first}, {second}): q at m = {m}, k at n = {n}").format(
                pair=rot.pair, first=rot.dims[0], second=rot.dims[1], m=rot.m, n=rot.n
            ),
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
