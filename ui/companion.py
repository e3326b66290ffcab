"""Every chart comes with a one-line text summary and its data table (with a CSV download), and can be saved
as an offline HTML file (PNG from the chart's camera button).

People who do not read charts, and screen readers, get the same numbers as the picture.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core import i18n
from core.i18n import _
from ui import charts, export, figure_cache, projector

PLOTLY_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}


def chart(fig: go.Figure, table: pd.DataFrame, summary: str, *, key: str, table_open: bool = False) -> None:
    """Render `fig` (restyled for a projector when that mode is on, no text under 12 px otherwise), then `summary`
    as a caption, then `table` in an expander with a CSV button.

    The figure and the table's Arrow form that are sent are built once per server for each spec (the figure cache)
    and shared: nothing here changes them."""
    projected = projector.on()
    shown, rows = figure_cache.final(fig, projected), figure_cache.table(table)
    fig = shown.fig
    st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG | {"toImageButtonOptions": {"filename": key}}, alt=summary)
    export.collect(fig, summary, table)
    st.caption(summary)
    html_size = export.size_text(export.chart_html_size(fig, summary, table, shown.plot_bytes, rows.html_bytes))
    lang = i18n.language()  # the downloads are built on click, outside this run: in its language all the same
    with st.expander(_("Data table for this chart"), expanded=table_open):
        # Projected, the rows become a styled static table (ui.projector.dataframe), made from the DataFrame.
        projector.dataframe(table if projected else rows.arrow, hide_index=True, key=f"{key}_table")
        st.download_button(
            _("Download the table as CSV"),
            # Deferred: the CSV is written when the button is pressed, not on every rerun of the page.
            lambda: table.to_csv(index=False).encode("utf-8"),
            file_name=f"{key}.csv",
            mime="text/csv",
            key=f"{key}_csv",
            on_click="ignore",
        )
        st.download_button(
            # The file carries its own plotly.js (about 4.8 MB): say so before a class downloads it on school Wi-Fi.
            _("Download the chart as HTML ({size}, works offline)").format(size=html_size),
            lambda: export.chart_html(fig, summary, table, lang=lang),
            file_name=f"{key}.html",
            mime="text/html",
            key=f"{key}_html",
            on_click="ignore",
        )


def matrix_table(
    z,
    row_labels,
    col_labels,
    *,
    row_name: str | None = None,
    col_name: str | None = None,
    value_name: str | None = None,
) -> pd.DataFrame:
    """A long table (row, column, value) of a matrix; None cells read 'masked'. The headers default to "query t",
    "key s" and "value", and every word and decimal sign is the reader's language's.

    Values are formatted text (6 decimals) so one column can hold numbers and 'masked' alike.
    """
    rows, cols = list(row_labels), list(col_labels)
    masked = i18n._(charts.MASKED_TEXT)
    return pd.DataFrame(
        {
            _("query t") if row_name is None else row_name: [r for r in rows for _c in cols],  # row-major
            _("key s") if col_name is None else col_name: cols * len(rows),
            _("value") if value_name is None else value_name: [
                masked if v is None else i18n.formatted(float(v), ".6f")
                for row in z[: len(rows)]
                for v in row[: len(cols)]
            ],
        }
    )
