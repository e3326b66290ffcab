"""Projector mode fits the room, in a real browser (issue 25): a projector link opens with the sidebar collapsed and
its toggle one click away, and every text Plotly draws on the page's charts is at least 16 px as rendered."""

from __future__ import annotations

import pytest

from ui.projector import MIN_PROJECTED_PX

from .conftest import SHOTS_DIR, open_page

PROJECTOR = {"width": 1920, "height": 1080}
_SIDEBAR_OPEN_JS = (
    """() => document.querySelector('[data-testid="stSidebar"]').getAttribute('data-collapsed') === 'false'"""
)

# Every visible text of every chart, with its rendered font size (Plotly sets it on each SVG text).
_CHART_TEXTS_JS = """() => [...document.querySelectorAll('.js-plotly-plot svg text')]
  .filter(t => t.textContent.trim() && t.getBBox().width > 0 && getComputedStyle(t).display !== 'none')
  .map(t => ({text: t.textContent.trim().slice(0, 40), px: parseFloat(getComputedStyle(t).fontSize)}))"""


@pytest.mark.parametrize("path", ["/temperature", "/inspector"])
def test_a_projector_link_opens_with_the_sidebar_collapsed_and_large_chart_text(browser, base_url, path):
    context = browser.new_context(viewport=PROJECTOR, reduced_motion="reduce", service_workers="block")
    try:
        page = context.new_page()
        open_page(page, base_url, path + "?projector=true")
        SHOTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS_DIR / f"projector-room{path.replace('/', '-')}.png"))
        sidebar = page.locator('[data-testid="stSidebar"]')
        assert sidebar.get_attribute("data-collapsed") == "true"  # the page has the whole projected width
        assert sidebar.bounding_box()["x"] + sidebar.bounding_box()["width"] <= 0  # out of sight

        texts = page.evaluate(_CHART_TEXTS_JS)
        assert texts, "no chart text found"
        small = [t for t in texts if t["px"] < MIN_PROJECTED_PX]
        assert not small, f"{len(small)} of {len(texts)} chart texts under {MIN_PROJECTED_PX} px: {small[:8]}"

        page.locator('[data-testid="stExpandSidebarButton"]').click()  # the arrow in the top corner
        page.wait_for_function(_SIDEBAR_OPEN_JS)
        assert page.get_by_text("Projector mode (large type)").is_visible()  # the toggle, one click away
    finally:
        context.close()
