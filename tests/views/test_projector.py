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
    assert not any("font-size: 22px" in str(h.proto) for h in plain.get("html"))  # a phone's rules set sizes too
    assert all(f["layout"]["font"]["family"] == projector.FONT_FAMILY for f in figures(plain) + figures(big))


def test_the_page_declares_its_chinese_faces_and_changes_layout_only_on_a_phone():
    """Every page's CSS names the fonts (Latin first, then Chinese faces, all local: no url(), no @import), and
    every rule that moves or sizes a box is inside the phone's media query: the laptop's and the projector's
    layouts are not touched."""
    css = projector._PAGE_CSS
    assert projector.FONT_FAMILY.startswith('"Source Sans", ') and projector.FONT_FAMILY.endswith(", sans-serif")
    assert all(f'"{face}"' in projector.FONT_FAMILY for face in projector.CJK_FAMILIES)
    assert f"font-family: {projector.FONT_FAMILY};" in css and "url(" not in css and "@import" not in css
    before, phone = css.split(f"@media (max-width: {projector.PHONE_PX}px)")
    assert "order:" not in before and "min-height" not in before and "flex:" not in before
    assert "order: 1;" in phone and f"min-height: {projector.TARGET_PX}px" in phone


def test_every_chart_is_sent_with_the_page_fonts_and_a_builders_own_face_is_kept():
    spec = {"layout": {"title": "a title"}, "data": []}
    projector.fonts(spec)
    assert spec["layout"]["font"]["family"] == spec["layout"]["title"]["font"]["family"] == projector.FONT_FAMILY
    assert spec["layout"]["title"]["text"] == "a title"
    own = {"layout": {"font": {"family": "monospace", "size": 14}}}
    projector.fonts(own)
    assert own["layout"]["font"] == {"family": "monospace", "size": 14}


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


def test_projector_keeps_the_colours_a_builder_chose_and_scales_per_point_markers():
    """RoPE's drawing colours q blue and k vermillion, as its labels say, and draws an arrowhead only at a vector's
    tip: projected, the same colours and the same single arrowhead, larger. A trace left to Plotly's default colour,
    or given a colour too pale for a projector, gets a high-contrast one."""
    import plotly.graph_objects as go

    fig = go.Figure(
        [
            go.Scatter(x=[0, 1], y=[0, 1], line_color="#0072B2", marker=dict(size=[0, 16], color="#0072B2")),
            go.Scatter(x=[0, 1], y=[1, 0], line_color="#D55E00"),
            go.Scatter(x=[0, 1], y=[1, 1]),
            go.Scatter(x=[0, 1], y=[0, 0], line_color="#F0E442"),
        ]
    )
    q, k, default, pale = projector.restyle(fig).data
    assert (q.line.color, q.marker.color) == ("#0072B2", "#0072B2")
    assert list(q.marker.size) == [0, 16 * projector.MARKER_SCALE]  # still no arrowhead at the tail
    assert (k.line.color, k.marker.color) == ("#D55E00", "#D55E00")
    assert default.line.color in projector.HIGH_CONTRAST
    assert pale.line.color in projector.HIGH_CONTRAST and pale.line.color not in projector.PALE
