"""The classroom in Chromium (issue 13): projector mode readable at projector resolutions, a link that pins the
model in a fresh browser, and a view exported as HTML that renders with the network blocked."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from .conftest import SHOTS_DIR, open_page, save_screenshot

MIN_CELL_PX, MIN_TICK_PX = 16, 14  # the floor for heatmap cell text and axis text

SIZES = """() => {
  const px = el => parseFloat(getComputedStyle(el).fontSize);
  const cells = [...document.querySelectorAll('.js-plotly-plot .heatmaplayer text')].map(px);
  const ticks = [...document.querySelectorAll('.js-plotly-plot .xtick text, .js-plotly-plot .ytick text')].map(px);
  const tables = [...document.querySelectorAll('[data-testid="stTable"] td')].map(px);
  return {cells: cells, ticks: ticks, tables: tables};
}"""


@pytest.mark.parametrize("width,height", [(1440, 900), (1920, 1080)])
def test_projector_mode_draws_heatmap_text_large_enough_to_read(browser, base_url, tmp_path, width, height):
    context = browser.new_context(viewport={"width": width, "height": height}, reduced_motion="reduce")
    try:
        page = context.new_page()
        open_page(page, base_url, "/score_geometry?geo_T=12&projector=true")
        page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
        sizes = page.evaluate(SIZES)
        assert len(sizes["cells"]) >= 144, "the 12 × 12 score matrix prints its values"
        assert min(sizes["cells"]) >= MIN_CELL_PX and min(sizes["ticks"]) >= MIN_TICK_PX, sizes
        assert sizes["tables"] and min(sizes["tables"]) >= MIN_CELL_PX, "table cells are as large as chart cells"
        save_screenshot(page, tmp_path, f"projector-score-geometry-{width}x{height}")
    finally:
        context.close()


def test_a_link_pins_the_model_in_a_fresh_browser(browser, base_url):
    first = browser.new_context()
    try:
        page = first.new_page()
        open_page(page, base_url, "/temperature")
        version = parse_qs(urlparse(page.url).query)["model"][0]
        link = page.url
    finally:
        first.close()
    fresh = browser.new_context()
    try:
        page = fresh.new_page()
        open_page(page, base_url, link.removeprefix(base_url.rstrip("/")))
        expect(page.locator('[data-testid="stSidebar"]').get_by_text(f"Version {version}")).to_be_visible()
        open_page(page, base_url, "/temperature?model=0123456789abcdef")
        expect(page.get_by_text("which this server does not have")).to_be_visible()
    finally:
        fresh.close()


def test_an_exported_view_renders_with_the_network_blocked(page, base_url, browser, tmp_path):
    open_page(page, base_url, "/temperature")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download this view (HTML, works offline)").click()
    saved = tmp_path / "view.html"
    download.value.save_as(saved)
    offline = browser.new_context()
    try:
        requested: list[str] = []
        offline.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith("file:")
                else (requested.append(route.request.url) or route.abort())
            ),
        )
        view = offline.new_page()
        view.goto(saved.as_uri())
        expect(view.locator(".js-plotly-plot .main-svg").first).to_be_visible(timeout=30_000)
        assert view.locator("section").count() == view.locator(".js-plotly-plot").count() >= 1
        assert requested == [], f"the exported file asked the network for {requested}"
        SHOTS_DIR.mkdir(parents=True, exist_ok=True)
        view.screenshot(path=str(SHOTS_DIR / "exported-temperature-view.png"), full_page=True)
    finally:
        offline.close()
