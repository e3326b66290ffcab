"""The classroom in Chromium (issue 13): projector mode readable at projector resolutions, a link that pins the
model in a fresh browser, and a view exported as HTML that renders with the network blocked. The class screens (issue
38): the join address once, on one line, on the Start page's first screen, and the teacher's Reveal and New round on
the first screen of a laptop."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from .conftest import (
    APP_IDLE_TIMEOUT_MS,
    SHOTS_DIR,
    open_page,
    save_screenshot,
    streamlit_server,
    wait_for_app_idle,
    wait_until,
    when_idle,
)
from .test_follow import join, open_session, sidebar

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


JOIN_URL = "http://192.168.100.200:8501/"  # longer than most: the type must shrink to keep it on one line


@pytest.fixture(scope="module")
def join_server(tmp_path_factory):
    """A server of this module's own that announces a join address (ui.join), warm-up off."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAB_JOIN_URL", JOIN_URL)
        with streamlit_server(tmp_path_factory.mktemp("class-screens"), warmup=False) as server:
            yield server


@pytest.mark.parametrize("width,height,query", [(1440, 900, ""), (1920, 1080, "?projector=true")])
def test_the_join_address_is_shown_once_on_one_line_on_the_first_screen(browser, join_server, width, height, query):
    context = browser.new_context(viewport={"width": width, "height": height}, reduced_motion="reduce")
    try:
        page = context.new_page()
        open_page(page, join_server.url, "/" + query)
        text = page.locator('[data-testid="stMain"]').inner_text().replace("\u2060", "")  # word joiners: unseen
        assert text.count(JOIN_URL) == 1
        block = page.locator(".st-key-join_block")
        address = block.locator("[data-join-address]")
        assert address.inner_text() == JOIN_URL and block.locator("a").count() == 0  # words, never a link
        lines = address.evaluate(
            """el => { const r = document.createRange(); r.selectNodeContents(el);
                       return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; }"""
        )
        fits = address.evaluate("el => el.scrollWidth <= el.parentElement.clientWidth")
        assert lines == 1 and fits, (lines, fits)
        for shown in (address, block.locator("img")):  # the address and its QR code on the first screen
            box = shown.bounding_box()
            assert box is not None and box["y"] + box["height"] <= height, (shown, box)
        sizes = address.evaluate("el => [el, document.body].map(e => parseFloat(getComputedStyle(e).fontSize))")
        assert sizes[0] > 1.2 * sizes[1], sizes  # still larger than the page's text
        SHOTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS_DIR / f"join-address-{width}x{height}.png"))
    finally:
        context.close()


def test_the_teachers_reveal_and_new_round_are_on_a_laptops_first_screen(browser, join_server):
    """Read one row asks its question beside its picture: with the room's chart drawn, the teacher's two controls
    are still inside a 1440x900 screen, above the chart."""
    contexts = [browser.new_context(viewport={"width": 1440, "height": 900}, reduced_motion="reduce") for _ in range(2)]
    try:
        teacher, learner = (c.new_page() for c in contexts)
        open_page(teacher, join_server.url, "/read_row")
        code = open_session(teacher)
        open_page(learner, join_server.url, "/read_row")
        join(learner, code)
        choices = learner.get_by_role("radiogroup", name="Your prediction")
        when_idle(learner, choices.locator("label").first).click()  # any answer: the room's chart is what matters
        when_idle(learner, learner.get_by_role("button", name="Check my prediction")).click()
        wait_for_app_idle(learner)

        chart = teacher.locator('[data-testid="stPlotlyChart"]').filter(has_text="The room's answers")
        wait_until(teacher, lambda: chart.count() == 1, APP_IDLE_TIMEOUT_MS, lambda: "the room's chart never showed")
        wait_for_app_idle(teacher)
        teacher.evaluate("() => document.querySelectorAll('*').forEach(el => { el.scrollTop = 0; })")  # first screen
        boxes = [teacher.get_by_role("button", name=n).bounding_box() for n in ("Reveal to everyone", "New round")]
        top_of_chart = chart.bounding_box()["y"]
        for box in boxes:
            assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= 900, box
            assert box["y"] + box["height"] <= top_of_chart, (box, top_of_chart)  # above the chart
        expect(sidebar(teacher).locator("p[data-session-code]")).to_have_text(code)
        SHOTS_DIR.mkdir(parents=True, exist_ok=True)
        teacher.screenshot(path=str(SHOTS_DIR / "class-room-controls-1440x900.png"))
    finally:
        for c in contexts:
            c.close()
