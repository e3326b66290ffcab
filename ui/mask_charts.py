"""A boolean mask drawn and tabled for the Masks page: cells say in words whether a key may be read.

True = may attend. Forbidden cells are grey gaps with their word printed, so colour is never the only channel.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from core.i18n import _
from ui import charts

Mask = Sequence[Sequence[bool]]


def mask_figure(
    rows: Mask,
    *,
    title: str,
    x_labels: Sequence[str],
    y_labels: Sequence[str],
    yes: str,
    no: str,
    x_title: str | None = None,
    y_title: str | None = None,
    text: Sequence[Sequence[str]] | None = None,
    height: int | None = None,
) -> go.Figure:
    """A bool matrix as a heatmap whose cells say `yes` or `no` in words (forbidden cells are grey gaps).
    The axis titles default to "key s" and "query t" in the reader's language."""
    z = [[1.0 if ok else None for ok in row] for row in rows]
    text = [[yes if ok else no for ok in row] for row in rows] if text is None else text
    return charts.heatmap(
        z,
        title=title,
        x_labels=x_labels,
        y_labels=y_labels,
        x_title=_("key s") if x_title is None else x_title,
        y_title=_("query t") if y_title is None else y_title,
        zmin=0,
        zmax=1,
        show_values=True,
        height=height,
        trace=dict(text=[list(row) for row in text], showscale=False),
    )


def mask_table(
    rows: Mask,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    yes: str,
    no: str,
    row_name: str | None = None,
    col_name: str | None = None,
) -> pd.DataFrame:
    """One row per cell: (row label, column label, `yes` or `no`); the headers default to "query t", "key s"."""
    row_name = _("query t") if row_name is None else row_name
    col_name = _("key s") if col_name is None else col_name
    mask = _("mask")
    return pd.DataFrame.from_records(
        [
            {row_name: r, col_name: c, mask: yes if rows[i][j] else no}
            for i, r in enumerate(row_labels)
            for j, c in enumerate(col_labels)
        ]
    )
