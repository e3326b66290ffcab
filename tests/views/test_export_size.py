"""A chart's offline file says its size before the download (issue 25: about 4.8 MB each, plotly.js inlined, heavy
for 30 downloads on school Wi-Fi): ui.export.chart_html_size against the length of the file itself."""

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest
from streamlit.testing.v1 import AppTest

from ui import charts, export, projector

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")


def big_heatmap():
    z = [[(t * s) % 7 / 7 if s <= t else None for s in range(48)] for t in range(48)]
    labels = [f"{i} <tok & '{i}'>" for i in range(48)]
    fig = charts.heatmap(
        charts.masked(z, [[s <= t for s in range(48)] for t in range(48)]),
        title="w <b>",
        x_labels=labels,
        y_labels=labels,
    )
    table = pd.DataFrame(
        {
            "query t": [f'{t} é"<' for t in range(48) for _ in range(48)],
            "weight": [np.nan if s > t else z[t][s] for t in range(48) for s in range(48)],
            "masked": [s > t for t in range(48) for s in range(48)],
            "note": [None, "a&b"] * (48 * 24),
        }
    )
    return fig, table


CASES = {
    "bars": (charts.bars(["a", "b"], [0.25, 0.75], title="weights", y_title="weight"), pd.DataFrame({"w": [0.25]})),
    "big heatmap": big_heatmap(),
    "projected": (projector.restyle(big_heatmap()[0]), big_heatmap()[1]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_size_said_is_the_files_size(case):
    fig, table = CASES[case]
    summary = "a summary with <script> & 'quotes'"
    real = len(export.chart_html(fig, summary, table))
    assert abs(export.chart_html_size(fig, summary, table) - real) <= 500  # the margins the file asks for
    assert real > len(pio.to_html(fig, include_plotlyjs=True, full_html=False))  # the library is in it: MBs


def test_size_text():
    assert export.size_text(4_815_814) == "4.8 MB"
    assert export.size_text(5_218_776) == "5.2 MB"
    assert export.size_text(310_400) == "310 kB"


def one_chart():
    import pandas as pd

    from ui import charts, companion

    fig = charts.bars(["a", "b"], [0.25, 0.75], title="weights", y_title="weight")
    companion.chart(fig, pd.DataFrame({"token": ["a", "b"], "weight": [0.25, 0.75]}), "two weights", key="k")


def test_the_button_says_the_size_before_the_download():
    at = AppTest.from_function(one_chart, default_timeout=30).run()
    assert not at.exception
    fig = charts.bars(["a", "b"], [0.25, 0.75], title="weights", y_title="weight")
    table = pd.DataFrame({"token": ["a", "b"], "weight": [0.25, 0.75]})
    size = export.size_text(len(export.chart_html(projector.readable(fig), "two weights", table)))
    labels = [b.proto.label for b in at.get("download_button")]
    assert f"Download the chart as HTML ({size}, works offline)" in labels, labels
