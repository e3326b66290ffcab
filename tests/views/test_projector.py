"""Projector mode (ui.projector): bound to the URL, larger type on every chart, and never a changed number."""

import numpy as np
import pandas as pd
import pytest
from apptest import decode, figures, fresh_visit, predict

from ui import projector

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")


def heatmaps(at):
    return [t for f in figures(at) for t in f["data"] if t["type"] == "heatmap"]


def test_projector_mode_from_a_link_enlarges_text_and_keeps_every_value():
    plain = fresh_visit("score_geometry", {"geo_T": "12"})
    big = fresh_visit("score_geometry", {"geo_T": "12", "projector": "true"})
    assert big.sidebar.toggle(key="projector").value is True
    for p, b in zip(heatmaps(plain), heatmaps(big), strict=True):
        assert b["textfont"]["size"] >= 16  # the issue: cell text at least 16 px
        np.testing.assert_array_equal(decode(b["z"]), decode(p["z"]))  # the same numbers, bit for bit
        assert b["text"] == p["text"]
    for f in figures(big):
        for name, axis in f["layout"].items():
            if name.startswith(("xaxis", "yaxis")):
                assert axis["tickfont"]["size"] >= 14, name  # axis text at least 14 px
    assert any("font-size: 22px" in str(h.proto) for h in big.get("html"))
    assert not any("font-size" in str(h.proto) for h in plain.get("html"))


def test_a_bad_projector_link_value_is_explained_and_ignored():
    at = fresh_visit("temperature", {"projector": "loud"})
    assert at.sidebar.toggle(key="projector").value is False
    assert any("not usable" in c.value for c in at.sidebar.caption)


def test_projector_mode_shows_every_table_in_large_type_with_the_same_rows():
    """The grid draws on a canvas in its own small type: projected, the same rows become a static table the page's
    CSS enlarges (ui.projector.dataframe), value for value."""
    plain = predict(fresh_visit("temperature", {}), "temperature_predict")
    big = predict(fresh_visit("temperature", {"projector": "true"}), "temperature_predict")
    assert len(plain.dataframe) >= 2 and len(plain.table) == 0
    assert len(big.dataframe) == 0 and len(big.table) == len(plain.dataframe)
    for p, b in zip(plain.dataframe, big.table, strict=True):
        pd.testing.assert_frame_equal(b.value.reset_index(drop=True), p.value.reset_index(drop=True))
    assert any(
        "stTable" in str(h.proto) and f"font-size: {projector.CELL_TEXT_PX}px" in str(h.proto) for h in big.get("html")
    )
