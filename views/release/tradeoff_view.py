"""The Release page's trade-off: what each suggestion threshold buys at a price of attention.

Net and gross keystrokes saved per 100 characters and the acceptance rate against the threshold, from the
simulated typist on the bundle's validation documents (cached per version, price and corpus). A team that prices a
glance higher reads off its own optimum here and records it with `python -m core tune --attention-cost C`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core import i18n
from core.i18n import N_, _
from core.model.corpus import Corpus
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.tuning import MIN_ACCEPTANCE, kept_on, tradeoff
from ui import charts
from ui.companion import chart

# The series' names and the table's columns, shown translated (_()).
NET = N_("net keystrokes saved per 100 chars")
GROSS = N_("gross keystrokes saved per 100 chars")
ACCEPTANCE = N_("acceptance rate")
COLUMNS = {  # row key of core.release.evaluation.tuning.tune_threshold -> the table's column
    "threshold": N_("threshold"),
    "net_keystrokes_saved_per_100": NET,
    "keystrokes_saved_per_100": GROSS,
    "acceptance_rate": ACCEPTANCE,
    "shown_per_100": N_("suggestions shown per 100 chars"),
    "attention_cost": N_("attention cost (keystrokes per suggestion not taken)"),
    "chosen": N_("chosen"),
}


@st.cache_data(max_entries=8, show_spinner=False)
def measured(
    path: str,
    version: str,
    attention_cost: float | None,
    typing_chars: int,
    corpus_key: str | None,
    _corpus: Corpus | None,
) -> list[dict]:
    """The grid's rows for the bundle at `path` (its version, the price and the corpus key the cache): the typist
    replays `typing_chars` characters of the validation documents, a pass of the model over each (minutes for
    the shipped model at the command line's 20,000; run it on request). `attention_cost` None: the bundle's price;
    `_corpus` None: the bundle's own corpus."""
    _, rows = tradeoff(
        path, corpus=_corpus, config=EvalConfig(typing_chars=typing_chars), attention_cost=attention_cost
    )
    return rows


def chosen(rows: Sequence[dict]) -> dict:
    """The row of the threshold the tuning chose."""
    found = [r for r in rows if r["chosen"]]
    if len(found) != 1:
        raise ValueError(f"the trade-off needs exactly one chosen threshold, got {len(found)}")  # a bug, not shown
    return found[0]


def figure(rows: Sequence[dict]) -> go.Figure:
    """Net and gross keystrokes saved against the threshold (left axis), acceptance on the right with the tuning's
    floor (MIN_ACCEPTANCE) a dotted line, the chosen threshold a dashed line and a star; each series has its own
    colour, dash and marker (never colour alone)."""
    x = [r["threshold"] for r in rows]
    best = chosen(rows)
    acceptance = dict(
        type="scatter",
        x=x,
        y=[r["acceptance_rate"] for r in rows],
        name=_("{series} (right axis)").format(series=_(ACCEPTANCE)),
        yaxis="y2",
        mode="lines+markers",
        marker=dict(symbol="square"),
        line=dict(color=charts.OKABE_ITO[2], dash="dot"),
    )
    star = dict(
        type="scatter",
        x=[best["threshold"]],
        y=[best["net_keystrokes_saved_per_100"]],
        name=_("chosen: {threshold}").format(threshold=i18n.formatted(best["threshold"])),
        mode="markers",
        marker=dict(symbol="star", size=16, color=charts.OKABE_ITO[7]),
    )
    fig = charts.lines(
        x,
        {
            _(NET): [r["net_keystrokes_saved_per_100"] for r in rows],
            _(GROSS): [r["keystrokes_saved_per_100"] for r in rows],
        },
        title=_("What each threshold buys at {price} keystroke(s) per suggestion not taken").format(
            price=i18n.formatted(best["attention_cost"])
        ),
        x_title=_("suggestion threshold (shown when its probability reaches it)"),
        y_title=_("keystrokes saved per 100 characters"),
        extra=[acceptance, star],
        shapes=[
            dict(
                type="line",
                yref="paper",
                y0=0,
                y1=1,
                x0=best["threshold"],
                x1=best["threshold"],
                line=dict(color=charts.OKABE_ITO[7], dash="dash"),
            ),
            dict(type="line", xref="paper", x0=0, x1=1, y0=0, y1=0, line=dict(color="#000000", width=1)),
            dict(  # the acceptance the tuning keeps to (core.release.evaluation.tuning.MIN_ACCEPTANCE)
                type="line",
                xref="paper",
                yref="y2",
                x0=0,
                x1=1,
                y0=MIN_ACCEPTANCE,
                y1=MIN_ACCEPTANCE,
                line=dict(color=charts.OKABE_ITO[2], width=1, dash="dot"),
            ),
        ],
        annotations=[
            dict(
                xref="paper",
                yref="y2",
                x=0.01,
                y=MIN_ACCEPTANCE,
                xanchor="left",
                yanchor="bottom",
                showarrow=False,
                text=_(
                    "{percent}% taken: the tuning chooses among thresholds whose acceptance reaches this line"
                ).format(percent=i18n.number(100 * MIN_ACCEPTANCE, 0)),
            )
        ],  # fmt: skip
    )
    fig.update_layout(  # round ticks of its own (0, 0.2, ... 1), and no second set of grid lines across the plot
        yaxis2=dict(
            title=_(ACCEPTANCE), overlaying="y", side="right", range=[0, 1], tickmode="linear", tick0=0, dtick=0.2,
            showgrid=False,
        )
    )  # fmt: skip
    return fig


def table(rows: Sequence[dict]) -> pd.DataFrame:
    return pd.DataFrame([{_(column): r[key] for key, column in COLUMNS.items()} for r in rows])


def summary(rows: Sequence[dict]) -> str:
    best = chosen(rows)
    acceptance = (
        _("none shown")
        if best["acceptance_rate"] is None
        else _("{percent}% of them accepted").format(percent=i18n.number(100 * best["acceptance_rate"], 0))
    )
    floor = i18n.number(100 * MIN_ACCEPTANCE, 0)
    reason = (
        _("the most net keystrokes where at least {floor}% of the suggestions shown are taken")
        if kept_on(best)
        else _("the most net keystrokes, though no threshold has {floor}% of its suggestions taken")
    ).format(floor=floor)
    free = max(rows, key=lambda r: (r["keystrokes_saved_per_100"], r["threshold"]))
    return _(
        "At a price of {price} keystroke(s) for each suggestion shown and not taken, the tuning chose threshold "
        "{threshold}, {reason}: {net} keystrokes net per 100 characters ({gross} gross, {shown} suggestions shown, "
        "{acceptance}); the most gross saving, {free_gross} at threshold {free_threshold}, nets {free_net}."
    ).format(
        price=i18n.formatted(best["attention_cost"]),
        threshold=i18n.formatted(best["threshold"]),
        reason=reason,
        net=i18n.number(best["net_keystrokes_saved_per_100"], 1),
        gross=i18n.number(best["keystrokes_saved_per_100"], 1),
        shown=i18n.number(best["shown_per_100"], 1),
        acceptance=acceptance,
        free_gross=i18n.number(free["keystrokes_saved_per_100"], 1),
        free_threshold=i18n.formatted(free["threshold"]),
        free_net=i18n.number(free["net_keystrokes_saved_per_100"], 1),
    )


def render(rows: Sequence[dict], *, key: str = "rel_tradeoff") -> None:
    """The trade-off chart with its one-line summary and its data table (the chart's companion)."""
    chart(figure(rows), table(rows), summary(rows), key=key)
