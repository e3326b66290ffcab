"""ui.export: a chart or a whole view as one offline HTML file, with its summary and table escaped."""

import re

import pandas as pd
import pytest
from apptest import figures, open_page

from ui import charts, export

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")


def test_a_chart_file_inlines_plotly_and_escapes_the_page_text():
    fig = charts.bars(["a", "b"], [0.25, 0.75], title="weights <b>", y_title="weight")
    table = pd.DataFrame({"token": ["<img src=x onerror=alert(1)>", "b"], "weight": [0.25, 0.75]})
    page = export.chart_html(fig, "a summary with <script>alert(1)</script>", table).decode("utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("plotly.js v") == 1  # the library itself is in the file, once
    assert not re.search(r"<script[^>]*\bsrc=", page), "no script is fetched from anywhere"
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "0.75" in page


def test_the_view_collects_every_chart_the_page_draws():
    at = open_page("temperature")
    collected = at.session_state["_export_view"]
    titles = [s.fig.layout.title.text for s in collected]
    assert titles == [f["layout"]["title"]["text"] for f in figures(at)]
    assert at.sidebar.get("download_button")  # the sidebar's "Download this view"
    page = export._document("Attention Lab: Temperature", collected).decode("utf-8")
    assert page.count("<section>") == len(collected) and page.count("plotly.js v") <= 1
