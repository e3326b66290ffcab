"""Inside the model's one picture: the text flowing left to right through every stage of the model.

A pure figure builder (a ForwardTrace in, a figure out). One column per stage: the characters and their ids, the
embedding rows, each block (its heads' attention maps side by side above its MLP's hidden units), the final norm,
and the probabilities of the next character. Each column's title names the tensor it hands on and its shape (the
arrows between columns carry it); under each column, the size of the residual stream at the last position and what
the model would predict if it stopped there. Stepping dims the stages not reached yet and outlines the current one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core import i18n
from core.i18n import N_, _
from core.model.forward_trace import ForwardTrace, top_choices
from ui import charts

FLOW_HEIGHT = 330  # px: with the title and the controls, the picture ends well inside a 1440x900 screen
TOP_PROBS = 6  # bars in the prediction column
DIMMED = 0.15  # opacity of a stage not reached yet
# The stages' names (Stage.name): ids the page compares, shown through label().
TEXT_STAGE, EMBEDDING_STAGE, BLOCK_STAGE = N_("text → ids"), N_("embedding"), N_("block {layer}")
NORM_STAGE, NEXT_STAGE = N_("final norm"), N_("next character")


@dataclass(frozen=True)
class Stage:
    name: str  # what the column is, in English (an id: label() shows it)
    shape: str  # the tensor it hands on, e.g. "(17, 128)"
    stream_norm: float | None  # ‖x‖ of the residual stream at the last position after this stage (None: no stream)
    guess: tuple[str, float] | None  # what the model would predict if it stopped here: (piece, probability)


def label(name: str) -> str:
    """A stage's name (Stage.name) in the reader's language."""
    if name.startswith("block "):
        return _("block {layer}").format(layer=name.removeprefix("block "))
    return i18n._(name)


def stages(trace: ForwardTrace, pieces: Sequence[str]) -> list[Stage]:
    """The picture's columns, in order: text, embedding, block 0 .. L-1, final norm, prediction."""
    T, C = trace.embeddings.shape
    V = trace.probs.shape[0]

    def guess(row: int) -> tuple[str, float]:
        (i, p), *_rest = top_choices(trace.layer_probs[row], 1)
        return pieces[i], p

    out = [Stage(TEXT_STAGE, f"({T},)", None, None)]
    out.append(Stage(EMBEDDING_STAGE, f"({T}, {C})", float(trace.embeddings[-1].norm()), guess(0)))
    for b in trace.blocks:
        out.append(
            Stage(BLOCK_STAGE.format(layer=b.layer), f"({T}, {C})", float(b.stream[-1].norm()), guess(b.layer + 1))
        )
    out.append(Stage(NORM_STAGE, f"({T}, {C})", float(trace.final_normed[-1].norm()), None))
    (i, p), *_rest = top_choices(trace.probs, 1)
    out.append(Stage(NEXT_STAGE, f"({V},)", None, (pieces[i], p)))
    return out


def _stream_map(z, *, opacity: float, zmax: float | None = None) -> dict:
    bound = zmax if zmax is not None else max((abs(v) for row in z for v in row), default=1.0) or 1.0
    return dict(
        type="heatmap",
        z=charts.cells(z),
        colorscale=charts.SIGNED_SCALE,
        zmin=-bound,
        zmax=bound,
        showscale=False,
        opacity=opacity,
        hoverinfo="skip",
    )


def flow_figure(
    trace: ForwardTrace,
    pieces: Sequence[str],
    vocabulary: Sequence[str],
    *,
    current: int | None,
    height: int = FLOW_HEIGHT,
) -> go.Figure:
    """The whole model as one picture. `pieces` (T,) are the text's visible pieces, `vocabulary` (V,) every id's;
    `current` is the stage index stepped to (None: every stage at once)."""
    steps = stages(trace, vocabulary)
    L = len(trace.blocks)
    n = len(steps)  # L + 4 columns
    T = len(pieces)

    def alpha(col: int) -> float:
        return 1.0 if current is None or col <= current else DIMMED

    specs: list[list[dict | None]] = [[], []]
    for col in range(n):
        split = 2 <= col < 2 + L  # a block: attention above, MLP below
        specs[0].append({} if split else {"rowspan": 2})
        specs[1].append({} if split else None)
    widths = [0.6, 1.0, *([1.0] * L), 1.0, 1.0]
    fig = make_subplots(
        rows=2,
        cols=n,
        specs=specs,
        column_widths=widths,
        horizontal_spacing=0.028,
        vertical_spacing=0.08,
        subplot_titles=None,
    )
    # text → ids: one cell per character, its id printed (an id is a label, not a size: one colour for all)
    fig.add_trace(
        dict(
            type="heatmap",
            z=[[0.0] for _t in range(T)],
            text=[[f"{charts.plain(p)} {i}"] for p, i in zip(pieces, trace.ids)],
            texttemplate="%{text}",
            textfont=dict(size=11),
            colorscale=[[0, "#e9ecef"], [1, "#e9ecef"]],
            showscale=False,
            xgap=1,
            ygap=1,
            opacity=alpha(0),
            hoverinfo="skip",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(_stream_map(trace.embeddings.tolist(), opacity=alpha(1)), row=1, col=2)
    for b in trace.blocks:
        col = 3 + b.layer
        H = b.weights.shape[0]
        heads = b.weights.tolist()  # (H, T, T)
        # the heads side by side, one empty column between two heads; masked cells (right of the diagonal) as gaps
        z = [
            [v for h in range(H) for v in ([*(w if s <= t else None for s, w in enumerate(heads[h][t])), None])][:-1]
            for t in range(T)
        ]
        attention = dict(
            type="heatmap",
            z=charts.cells(z),
            colorscale=charts.MAGNITUDE_SCALE,
            zmin=0,
            zmax=1,
            showscale=False,
            opacity=alpha(col - 1),
            hoverinfo="skip",
        )
        fig.add_trace(attention, row=1, col=col)
        fig.add_trace(_stream_map(b.mlp_hidden.tolist(), opacity=alpha(col - 1)), row=2, col=col)
    fig.add_trace(_stream_map(trace.final_normed.tolist(), opacity=alpha(n - 2)), row=1, col=n - 1)
    top = top_choices(trace.probs, TOP_PROBS)
    fig.add_trace(
        dict(
            type="bar",
            orientation="h",
            y=[f"{charts.plain(vocabulary[i])} " for i, _p in top],
            x=[p for _i, p in top],
            text=[i18n.number(p, 2) for _i, p in top],
            textposition="outside",
            marker=dict(color=[charts.OKABE_ITO[1]] + [charts.OKABE_ITO[0]] * (len(top) - 1)),
            opacity=alpha(n - 1),
            hoverinfo="skip",
        ),
        row=1,
        col=n,
    )
    bare = dict(showticklabels=False, ticks="", showgrid=False, zeroline=False, showline=False)  # projected too
    fig.update_xaxes(**bare)
    fig.update_yaxes(**bare, autorange="reversed")
    fig.update_xaxes(range=[0, 1.15], row=1, col=n)
    fig.update_yaxes(showticklabels=True, tickfont=dict(size=13), type="category", row=1, col=n)

    titles, footers = [], []
    for col, stage in enumerate(steps):
        axis = fig.get_subplot(1, col + 1)
        x0, x1 = axis.xaxis.domain
        centre = (x0 + x1) / 2
        bold = current is not None and col == current
        name = f"<b>{label(stage.name)}</b>" if bold else label(stage.name)
        titles.append(dict(text=f"{name}<br>{stage.shape}", x=centre, y=1.0, yanchor="bottom", yshift=4))
        footer = []
        if stage.stream_norm is not None:
            footer.append(f"‖x‖ {i18n.number(stage.stream_norm, 1)}")
        if stage.guess is not None:
            piece, p = stage.guess
            footer.append(_("says '{piece}' {p}").format(piece=charts.plain(piece), p=i18n.number(p, 2)))
        if footer:
            footers.append(dict(text="<br>".join(footer), x=centre, y=0.0, yanchor="top", yshift=-4))
        if col + 1 < n:
            nxt = fig.get_subplot(1, col + 2).xaxis.domain[0]
            footers.append(dict(text="→", x=(x1 + nxt) / 2, y=0.5, yanchor="middle", font=dict(size=18)))
        if bold:
            fig.add_shape(
                type="rect", xref="paper", yref="paper", x0=x0 - 0.008, x1=x1 + 0.008, y0=-0.01, y1=1.01,
                line=dict(color=charts.OKABE_ITO[5], width=3),
            )  # fmt: skip
    for a in titles + footers:
        fig.add_annotation(dict(xref="paper", yref="paper", showarrow=False, xanchor="center", font=dict(size=13)) | a)
    for row, name, y in ((1, _("attention"), 0.77), (2, "MLP", 0.23)):  # the two halves of a block, named on its left
        fig.add_annotation(
            xref="paper", yref="paper", showarrow=False, x=fig.get_subplot(row, 3).xaxis.domain[0], xanchor="right",
            y=y, yanchor="middle", text=name, textangle=-90, font=dict(size=12), xshift=-2,
        )  # fmt: skip
    fig.update_layout(
        title=dict(
            text=_("Inside the model: your text in, the next character out"),
            x=0, xanchor="left", y=1, yref="container", pad=dict(t=6),
        ),
        height=height,
        margin=dict(l=20, r=10, t=78, b=48),
        showlegend=False,
        plot_bgcolor="#ffffff",
        bargap=0.2,
    )  # fmt: skip
    return fig
