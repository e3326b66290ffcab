"""Projector mode fits the room (issue 25): every text a projected chart can draw is at least 16 px, set on the
figure itself (Streamlit's theme would otherwise size ticks, legends and colour bars in its own small type), and
no projected chart is taller than ui.projector.MAX_HEIGHT_PX; in the normal view no text is under 12 px.

The check reads the figure JSON a page sends, so it holds every figure of every page, whoever built it."""

from pathlib import Path

import plotly.graph_objects as go
import pytest
from apptest import APP, figures, page_file, predict
from plotly.subplots import make_subplots
from streamlit.testing.v1 import AppTest

from ui import projector

LABEL = "test bundle (tiny)"
VIEWS = Path(APP).parent / "views"
PAGES = sorted([p.stem for p in VIEWS.glob("*.py")] + [p.parent.name for p in VIEWS.glob("*/page.py")])

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")


def small_texts(spec: dict, px: float) -> list[str]:
    """Where `spec` (a figure's JSON) lets Plotly draw text under `px`: a size set under it anywhere, or a text
    whose size is left to inheritance or to Streamlit's theme (its ticks, legend and colour bars are 12 px)."""
    found = []

    def sizes(value):
        return value if isinstance(value, list) else [value]

    def walk(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                here = f"{path}.{key}"
                if key.endswith("font") and isinstance(value, dict) and "size" in value:
                    if any(s is not None and s < px for s in sizes(value["size"])):
                        found.append(here)
                walk(value, here)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(spec, "figure")
    layout = spec.get("layout", {})

    def unset(font: dict | None, where: str) -> None:
        if not font or font.get("size") is None:
            found.append(f"{where} (left to the theme)")

    unset(layout.get("font"), "layout.font")
    unset(layout.get("legend", {}).get("font"), "layout.legend.font")
    for name, part in layout.items():
        if name.startswith(("xaxis", "yaxis")):
            unset(part.get("tickfont"), f"layout.{name}.tickfont")
        if name.startswith("coloraxis"):
            unset(part.get("colorbar", {}).get("tickfont"), f"layout.{name}.colorbar.tickfont")
    for i, note in enumerate(layout.get("annotations", [])):
        unset(note.get("font"), f"layout.annotations[{i}].font")
    for i, trace in enumerate(spec.get("data", [])):
        if trace.get("texttemplate") or (trace.get("text") is not None and trace.get("type") == "scatter"):
            unset(trace.get("textfont"), f"data[{i}].textfont")
        if trace.get("type") == "bar" and trace.get("text") is not None:
            if layout.get("uniformtext", {}).get("minsize", 0) < px:
                found.append(f"data[{i}] bar text may shrink to fit (layout.uniformtext.minsize)")
        if trace.get("type") == "heatmap" and trace.get("showscale", True) and "coloraxis" not in trace:
            unset(trace.get("colorbar", {}).get("tickfont"), f"data[{i}].colorbar.tickfont")
        if trace.get("marker", {}).get("showscale"):
            unset(trace["marker"]["colorbar"].get("tickfont"), f"data[{i}].marker.colorbar.tickfont")
    return found


def every_kind_of_text() -> go.Figure:
    """A figure with each kind of text the lab's builders use, several of them small."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("layer 0", "layer 1"))
    fig.add_trace(go.Heatmap(z=[[0.1, 0.9]], texttemplate="%{z}", coloraxis="coloraxis"), row=1, col=1)
    fig.add_trace(go.Bar(x=["a", "b"], y=[1, 2], text=["1", "2"]), row=1, col=2)
    fig.add_trace(go.Scatter(x=[0, 1], y=[1, 0], mode="lines+text", text=["p", "q"], textfont=dict(size=12)), 1, 2)
    fig.add_trace(
        go.Scatter(x=[0], y=[2], marker=dict(color=[1], showscale=True, colorbar=dict(title="m"))), row=1, col=2
    )
    fig.update_xaxes(tickfont=dict(size=9))
    fig.update_annotations(font=dict(size=13))
    fig.add_annotation(text="step 100", x=0, y=1, showarrow=False)
    fig.update_layout(height=900, font=dict(size=14), coloraxis=dict(colorbar=dict(title="weight")))
    return fig


def test_restyle_sets_every_text_to_at_least_16_px_and_caps_the_height():
    fig = every_kind_of_text()
    before = fig.to_plotly_json()
    assert small_texts(before, projector.MIN_PROJECTED_PX)  # the check sees the small texts ...
    big = projector.restyle(fig).to_plotly_json()
    assert small_texts(big, projector.MIN_PROJECTED_PX) == []  # ... and none is left
    assert big["layout"]["height"] == projector.MAX_HEIGHT_PX
    assert "colorbar" not in big["data"][1].get("marker", {})  # a colour bar the bars never had is not drawn for them
    assert fig.to_plotly_json() == before  # the page's figure (perhaps cached) is unchanged
    for b, p in zip(big["data"], before["data"], strict=True):
        assert b.get("z") == p.get("z") and b.get("y") == p.get("y") and b.get("text") == p.get("text")


def test_the_normal_view_raises_only_what_is_under_12_px():
    fig = every_kind_of_text()
    shown = projector.readable(fig).to_plotly_json()
    layout = shown["layout"]
    assert layout["xaxis"]["tickfont"]["size"] == layout["xaxis2"]["tickfont"]["size"] == projector.MIN_TEXT_PX
    assert layout["annotations"][0]["font"]["size"] == 13 and layout["font"]["size"] == 14  # not made larger
    sized = [s for s in small_texts(shown, projector.MIN_TEXT_PX) if "left to the theme" not in s]
    assert sized == []
    plain = go.Figure(go.Bar(x=["a"], y=[1]), layout=dict(font=dict(size=14)))
    assert projector.readable(plain) is plain  # nothing to raise: the figure itself, no copy


def visit(page: str, bundle: Path) -> AppTest:
    """views/<page>.py opened from a projector link, with the test bundle selected, every predict-first question
    answered so that the charts behind it are drawn too."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["lab_session_bundles"] = [(LABEL, str(bundle))]
    at.session_state["lab_bundle"] = LABEL
    at.query_params["projector"] = "true"
    at.run()
    at.switch_page(page_file(page)).run()
    assert not at.exception, [e.value for e in at.exception]
    for key in [r.key for r in at.radio if r.key and r.key.endswith("_predict_answer")]:
        at = predict(at, key.removesuffix("_answer"))
    return at


@pytest.mark.parametrize("view", PAGES)  # not "page": pytest-playwright owns that name
def test_every_projected_chart_of_every_page_has_large_text(view, trained_bundle_path):
    at = visit(view, trained_bundle_path)
    assert at.sidebar.toggle(key="projector").value is True
    for fig in figures(at):
        title = fig["layout"].get("title", {}).get("text")
        assert small_texts(fig, projector.MIN_PROJECTED_PX) == [], title
        assert fig["layout"]["height"] <= projector.MAX_HEIGHT_PX, title


def test_only_small_maps_get_wide_cell_gaps():
    """Two pixels between cells read on a projector, but on a 27 x 27 map in a small subplot they leave more gap
    than colour (the Inspector's grid looked striped)."""
    from ui import charts

    def map_of(n):
        return charts.heatmap(
            [[0.5] * n] * n, title="w", x_labels=list(map(str, range(n))), y_labels=list(map(str, range(n)))
        )

    assert projector.restyle(map_of(4)).data[0].xgap == 2
    assert projector.restyle(map_of(4)).layout.yaxis.showgrid is False  # no dark grid line through the gaps
    assert projector.restyle(map_of(27)).data[0].xgap == map_of(27).data[0].xgap == 1
