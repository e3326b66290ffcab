"""The figure path (issue 26) held to the plain computation.

- ui.projector's readable() and restyle() on plain dicts equal the go.Figure versions they replaced (kept below as
  the reference, unchanged but for their names), on every chart every page draws;
- every spec every page sends, built without Plotly's validation (ui.charts.figure), is what validation would have
  sent: go.Figure(spec) validates it and gives it back unchanged;
- ui.figure_cache: every page, normal and projected, draws the same elements with the cache off, on, and on again
  (every chart a hit), and a cached figure, shared by every session, is never changed by a page run.
"""

import json

import plotly.graph_objects as go
import plotly.io as pio
import pytest
from apptest import PAGES, figures, fresh_visit, signatures

from ui import figure_cache, projector
from ui.projector import (
    CELL_TEXT_PX,
    FONT_PX,
    GAPPED_CELLS,
    HIGH_CONTRAST,
    LINE_PX,
    MARKER_SCALE,
    MAX_HEIGHT_PX,
    MIN_PROJECTED_PX,
    MIN_TEXT_PX,
    PALE,
    TICK_PX,
    TITLE_PX,
)

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")


# The reference: ui/projector.py's go.Figure versions before issue 26 (commit 7a68661), renamed old_*.
from typing import Any  # noqa: E402


def _old_font_floor(font: Any, px: int) -> None:
    """Raise `font.size` (a number, or one per point) to at least `px`; an unset size is set to `px`."""
    size = font.size
    if size is None:
        font.size = px
    elif isinstance(size, (int, float)):
        font.size = max(size, px)
    else:
        font.size = [px if v is None else max(v, px) for v in size]


def _old_fonts(fig: go.Figure) -> list[Any]:
    """Every font of `fig` that sizes text on the chart, beyond the layout's own (which the others inherit)."""
    layout = fig.layout
    found = [layout.title.font, layout.legend.font, layout.legend.title.font, layout.hoverlabel.font]
    for axis in [*fig.select_xaxes(), *fig.select_yaxes()]:
        found += [axis.tickfont, axis.title.font]
    for name in layout:
        if name.startswith("coloraxis"):
            found += [layout[name].colorbar.tickfont, layout[name].colorbar.title.font]
    found += [a.font for a in layout.annotations]
    for trace in fig.data:
        # Only a colour bar that is drawn: touching an unused one (a bar chart's marker.colorbar) makes Plotly draw it.
        if "colorbar" in trace and trace.showscale is not False and trace.coloraxis is None:
            found += [trace.colorbar.tickfont, trace.colorbar.title.font]
        marker = getattr(trace, "marker", None)
        if marker is not None and "colorbar" in marker and marker.showscale:
            found += [marker.colorbar.tickfont, marker.colorbar.title.font]
        for name in ("textfont", "insidetextfont", "outsidetextfont"):
            if name in trace:
                found.append(trace[name])
    return found


def _old_floor_text(fig: go.Figure, px: int) -> None:
    """Make every text of `fig` at least `px`, in place."""
    _old_font_floor(fig.layout.font, px)
    for font in _old_fonts(fig):
        _old_font_floor(font, px)
    if any(t.type in ("bar", "funnel", "waterfall") for t in fig.data):  # Plotly shrinks bar text to fit the bar
        fig.update_layout(uniformtext_minsize=px, uniformtext_mode="show")


def _old_too_small(fig: go.Figure, px: int) -> bool:
    """Whether a size set anywhere in `fig` is under `px` (an unset one inherits Streamlit's theme: 12 px)."""
    sizes = [f.size for f in [fig.layout.font, *_old_fonts(fig)]]
    return any(v is not None and v < px for s in sizes for v in (s if isinstance(s, (list, tuple)) else [s]))


def old_readable(fig: go.Figure) -> go.Figure:
    """`fig`, or a copy with every text at least MIN_TEXT_PX when a builder set one smaller; `fig` is not changed."""
    if not _old_too_small(fig, MIN_TEXT_PX):
        return fig
    out = go.Figure(fig)
    _old_floor_text(out, MIN_TEXT_PX)
    return out


def old_restyle(fig: go.Figure) -> go.Figure:
    """A copy of `fig` for a projector; `fig` itself (perhaps cached and shared) is not changed."""
    out = go.Figure(fig)
    height = out.layout.height
    out.update_layout(
        font=dict(size=FONT_PX, color="#000000"),
        title_font_size=TITLE_PX,
        legend=dict(font_size=FONT_PX, title_font_size=FONT_PX),
        hoverlabel_font_size=FONT_PX,
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        height=min(int(height * 1.4), MAX_HEIGHT_PX) if height else min(560, MAX_HEIGHT_PX),
        margin_t=int((out.layout.margin.t or 50) * 1.3),
    )
    axes = dict(
        tickfont=dict(size=TICK_PX, color="#000000"),
        title_font=dict(size=FONT_PX, color="#000000"),
        gridcolor="#595959",
        linecolor="#000000",
        linewidth=2,
        showline=True,
    )
    if any(t.type == "heatmap" for t in out.data):
        axes["showgrid"] = False  # a map's cells are its grid: dark lines would run through every gap between them
    hidden = [name for name in out.layout if name.startswith(("xaxis", "yaxis")) and out.layout[name].showline is False]
    out.update_xaxes(**axes)
    out.update_yaxes(**axes)
    for name in hidden:  # since issue 38: an axis line the builder hid stays hidden
        out.layout[name].showline = False
    out.update_traces(textfont_size=CELL_TEXT_PX, selector=dict(type="heatmap"))
    for trace in out.data:
        # Wider cell outlines read on a projector, but on a map of many small cells (the Inspector's grid of every
        # head, a 27 x 27 map in 150 px) two pixels of gap leave more gap than colour: those keep the builder's.
        if trace.type == "heatmap" and trace.z is not None and len(trace.z) <= GAPPED_CELLS:
            trace.update(xgap=2, ygap=2)
    out.update_traces(textfont_size=CELL_TEXT_PX, selector=dict(type="bar"))
    for i, trace in enumerate(t for t in out.data if t.type == "scatter"):
        # A colour the builder chose carries meaning (RoPE's q is blue and k vermillion, as its labels say): keep it.
        # Only a trace left to Plotly's default colour gets one of the high-contrast colours.
        # Yellow and sky blue are too pale on white for a projector: those are replaced like a default colour.
        fallback = HIGH_CONTRAST[i % len(HIGH_CONTRAST)]
        line = trace.line.color if isinstance(trace.line.color, str) and trace.line.color not in PALE else None
        marker = trace.marker.color
        if isinstance(marker, str) and marker in PALE:
            marker = None
        size = trace.marker.size
        # Per-point sizes (an arrowhead only at a vector's tip) are scaled, not replaced by one size for every point.
        size = [s * MARKER_SCALE for s in size] if isinstance(size, (list, tuple)) else (size or 6) * MARKER_SCALE
        trace.update(
            line_width=LINE_PX, line_color=line or fallback, marker_size=size, marker_color=marker or line or fallback
        )
    _old_floor_text(out, MIN_PROJECTED_PX)  # annotations, colour bars, scatter labels: whatever the builder set
    return out


def as_json(fig: go.Figure) -> dict:
    return json.loads(pio.to_json(fig, validate=False))


def visit(stem: str, projected: bool):
    return fresh_visit(stem, {"projector": "true"} if projected else {})


@pytest.fixture
def built(monkeypatch):
    """Every (builder figure, projected) ui.figure_cache builds from, in order."""
    seen: list[tuple[go.Figure, bool, figure_cache.Final]] = []
    plain = figure_cache.build

    def recording(fig, projected):
        final = plain(fig, projected)
        seen.append((fig, projected, final))
        return final

    monkeypatch.setattr(figure_cache, "build", recording)
    return seen


@pytest.mark.parametrize("stem", PAGES)
def test_readable_and_restyle_on_dicts_equal_the_go_figure_versions(stem, built):
    visit(stem, False)
    assert built, "the page drew no chart"
    for fig, _, _ in built:
        validated = go.Figure(fig)  # what the old functions were given: a validated figure (numpy arrays kept)
        assert as_json(projector.readable(fig)) == as_json(old_readable(validated))
        assert as_json(projector.restyle(fig)) == as_json(old_restyle(validated))


def test_restyle_on_dicts_equals_the_go_figure_version_on_the_cases_pages_rarely_draw():
    """Per-point marker sizes, pale and default colours, bars, a second axis, a drawn colour bar, an annotation."""
    fig = go.Figure(
        [
            go.Scatter(x=[0, 1], y=[0, 1], line_color="#0072B2", marker=dict(size=[0, 16], color="#0072B2")),
            go.Scatter(x=[0, 1], y=[1, 0], line_color="#F0E442", textfont_size=9),
            go.Scatter(x=[0, 1], y=[1, 1], xaxis="x2"),
            go.Bar(x=["a"], y=[1], text=["1"], marker=dict(showscale=True, color=[1])),
            go.Heatmap(z=[[1, 2]], showscale=True),
        ],
        layout=dict(annotations=[dict(text="note", font_size=8)], xaxis2=dict(title="second"), height=900),
    )
    assert as_json(projector.restyle(fig)) == as_json(old_restyle(fig))
    assert as_json(projector.readable(fig)) == as_json(old_readable(fig))


def _validated(spec: dict) -> dict:
    return json.loads(pio.to_json(go.Figure(spec), validate=False))


@pytest.mark.parametrize("projected", [False, True], ids=["normal", "projected"])
@pytest.mark.parametrize("stem", PAGES)
def test_every_chart_is_the_same_through_the_cache_and_a_valid_plotly_spec(stem, projected, built, monkeypatch):
    monkeypatch.setattr(figure_cache, "ENABLED", False)
    plain = visit(stem, projected)
    monkeypatch.setattr(figure_cache, "ENABLED", True)
    first = visit(stem, projected)
    n_built = len(built)
    again = visit(stem, projected)
    assert len(built) == n_built, "a second run of the same page built a figure again: every chart should be a hit"
    assert figures(plain) or stem == "checkpoint", "the page drew no chart"  # Checkpoint's come with its answers
    assert signatures(first._tree) == signatures(plain._tree)
    assert signatures(again._tree) == signatures(plain._tree)
    for spec in figures(plain):
        # Built without validation (ui.charts.figure): validation finds nothing to reject or rewrite.
        assert _validated(spec) == spec
    for _, _, final in built:  # shared by every session: no page run changed a cached figure
        assert pio.to_json(final.fig, validate=False).encode().__len__() == final.plot_bytes
        assert as_json(final.fig) == json.loads(pio.to_json(final.fig.to_dict(), validate=False))


def test_a_cached_figure_is_not_changed_by_drawing_or_exporting_it(built):
    from ui import export

    at = visit("read_row", False)
    assert built
    before = [pio.to_json(final.fig, validate=False) for _, _, final in built]
    at.run()
    for _, _, final in built:
        export.chart_html(final.fig, "summary", __import__("pandas").DataFrame({"a": [1]}))
    assert [pio.to_json(final.fig, validate=False) for _, _, final in built] == before


def test_the_digest_covers_every_change_a_view_makes_after_building():
    from ui import charts

    fig = charts.bars(["a", "b"], [0.1, 0.2], title="t", y_title="p")
    key = figure_cache.digest(fig, False)
    assert figure_cache.digest(fig, True) != key
    fig.update_layout(height=300)  # as views/temperature.py does after the builder
    assert figure_cache.digest(fig, False) != key


def _key(value) -> str:
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    figure_cache.feed(h, value)
    return h.hexdigest()


def test_feed_writes_values_that_differ_as_different_bytes():
    import numpy as np

    pairs = [
        (["ab", "c"], ["a", "bc"]),  # the same characters split differently
        ([1], [True]),  # equal in Python, drawn differently
        ([1], [1.0]),
        ({"a": [1, 2]}, {"a": [[1, 2]]}),
        (np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)),  # same bytes, another shape
        (np.zeros(2, np.float32), np.zeros(2, np.float64)),
        (np.array([0.1, 0.2], np.float32), np.array([0.1, 0.2000001], np.float32)),
        ([None], ["None"]),
        ("masked", ["masked"]),
    ]
    for a, b in pairs:
        assert _key(a) != _key(b), (a, b)
    assert _key({"z": np.arange(4.0), "t": ("x", 1.5)}) == _key({"z": np.arange(4.0), "t": ("x", 1.5)})


def test_a_value_feed_cannot_write_whole_leaves_the_chart_uncached():
    import pandas as pd
    import pytest as _pytest

    with _pytest.raises(figure_cache.Unhashable):
        _key([pd.Series(range(1000))])  # its repr would print "..."
    from ui import charts

    fig = charts.bars(["a", "b"], [0.1, 0.2], title="t", y_title="p")
    fig._layout["meta"] = pd.Timestamp("2026-12-02")  # a type the spec walk does not write
    assert figure_cache.digest(fig, False) is None
