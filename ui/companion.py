"""Every chart comes with a one-line text summary and its data table (with a CSV download).

People who do not read charts, and screen readers, get the same numbers as the picture.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

PLOTLY_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}


def chart(fig: go.Figure, table: pd.DataFrame, summary: str, *, key: str, table_open: bool = False) -> None:
    """Render `fig`, then `summary` as a caption, then `table` in an expander with a CSV button."""
    st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, alt=summary)
    st.caption(summary)
    with st.expander("Data table for this chart", expanded=table_open):
        st.dataframe(table, hide_index=True, key=f"{key}_table")
        st.download_button(
            "Download the table as CSV",
            table.to_csv(index=False).encode("utf-8"),
            file_name=f"{key}.csv",
            mime="text/csv",
            key=f"{key}_csv",
            on_click="ignore",
        )


def matrix_table(
    z, row_labels, col_labels, *, row_name: str = "query t", col_name: str = "key s", value_name: str = "value"
) -> pd.DataFrame:
    """A long table (row, column, value) of a matrix; None cells read 'masked'.

    Values are formatted text (6 decimals) so one column can hold numbers and 'masked' alike.
    """
    records = []
    for i, r in enumerate(row_labels):
        for j, c in enumerate(col_labels):
            v = z[i][j]
            records.append({row_name: r, col_name: c, value_name: "masked" if v is None else f"{float(v):.6f}"})
    return pd.DataFrame.from_records(records)
