"""Projected pictures that only a browser can measure (issue 38): what the class must see together is on the first
screen, at a size read from the back of a room.

- Score geometry: the scores and the weights softmax makes of them (the point of the page) both lie inside the first
  screen, side by side, on a laptop (1440x900) and projected (1920x1080, ?projector=true).
- Attention inspector, projected: each small map of the grid gives every one of its T x T cells at least
  MIN_CELL_PX in both directions (16 maps of 27 x 27 cells were about 160 x 90 px each, 3 px a row).
"""

from __future__ import annotations

import pytest

from .conftest import open_page
from .test_first_screen import SCREENS

MIN_CELL_PX = 8  # a map cell smaller than this is a speck on a projected screen
DEFAULT_T = 27  # tokens in the inspector's default text, "def add(a, b): return a + b"

_CHARTS_JS = """() => [...document.querySelectorAll('.st-key-picture .js-plotly-plot')].map(c => {
  const r = c.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right};
})"""
# Each subplot's plot area: Plotly's drag rectangle, one per pair of axes.
_MAPS_JS = """() => [...document.querySelectorAll('.st-key-picture .js-plotly-plot .nsewdrag')].map(d => {
  const r = d.getBoundingClientRect(); return {width: r.width, height: r.height, bottom: r.bottom};
})"""


def _measure(browser, base_url: str, path: str, screen: str, script: str) -> list[dict]:
    viewport, query = SCREENS[screen]
    context = browser.new_context(viewport=viewport, reduced_motion="reduce", service_workers="block")
    try:
        page = context.new_page()
        open_page(page, base_url, path + ("?" + query if query else ""))
        return page.evaluate(script)
    finally:
        context.close()


@pytest.mark.parametrize("screen", list(SCREENS))
def test_score_geometry_shows_the_scores_and_the_weights_side_by_side_on_the_first_screen(browser, base_url, screen):
    viewport = SCREENS[screen][0]
    charts = _measure(browser, base_url, "/score_geometry", screen, _CHARTS_JS)
    assert len(charts) == 2, f"expected the scores and the weights in the picture, found {len(charts)} charts"
    scores, weights = charts
    for name, box in (("scores", scores), ("weights", weights)):
        assert 0 <= box["top"] and box["bottom"] <= viewport["height"] + 1, (
            f"{screen}: the {name} span y = {box['top']:.0f} to {box['bottom']:.0f} px, outside the first screen "
            f"(0 to {viewport['height']} px)"
        )
        assert box["right"] <= viewport["width"] + 1, f"{screen}: the {name} run past the right edge"
    assert scores["right"] <= weights["left"], f"{screen}: the weights are not beside the scores: {charts}"


def test_projected_inspector_maps_give_every_cell_room(browser, base_url):
    maps = _measure(browser, base_url, "/inspector", "projector", _MAPS_JS)
    assert maps, "no map in the inspector's picture"
    least = DEFAULT_T * MIN_CELL_PX
    for i, box in enumerate(maps):
        assert box["width"] >= least and box["height"] >= least, (
            f"map {i} is {box['width']:.0f} x {box['height']:.0f} px: under {MIN_CELL_PX} px for each of its "
            f"{DEFAULT_T} rows and columns ({least} px)"
        )
        assert box["bottom"] <= SCREENS["projector"][0]["height"] + 1, f"map {i} ends below the first screen"
