"""The picture is the page: every lab page opens on its computed picture, inside the first screen.

At 1440x900 (a laptop) and at 1920x1080 in projector mode (a projector; sidebar collapsed), the chart inside
the page's picture container (ui.layout.picture, CSS class st-key-picture) lies within the viewport, and at
1440x900 the page's whole height with its defaults is at most MAX_SCREENS screens. Viewport screenshots land
in /tmp/attention-lab-shots/first-screen-*.png for people to look at.
"""

from __future__ import annotations

import pytest

from .conftest import SHOTS_DIR, discover_pages, open_page

SCREENS = {
    "laptop": ({"width": 1440, "height": 900}, ""),
    "projector": ({"width": 1920, "height": 1080}, "projector=true"),
}
MAX_SCREENS = 2.5
MAX_TITLE_TOP_REM = 3.5  # the title starts near the top: Streamlit's default left about 110 px empty (issue 38)
ROOT_PX = {"laptop": 16, "projector": 22}  # ui/projector.py scales the root font when projecting
# Pages that are not a lab with a picture, and why.
NO_PICTURE = {"checkpoint": "the checkpoint is a quiz: its questions are the page"}
PAGES = discover_pages()

_MEASURE_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const chart = document.querySelector('.st-key-picture .js-plotly-plot');
  const box = chart ? chart.getBoundingClientRect() : null;
  return {
    height: main ? main.scrollHeight : null,
    chart: box ? {top: box.top, bottom: box.bottom, left: box.left, right: box.right} : null,
    scrolled: main ? main.scrollTop : 0,
    title: document.querySelector('h1') ? document.querySelector('h1').getBoundingClientRect().top : null,
    caption: [...document.querySelectorAll('[data-testid="stCaptionContainer"]')].map(c => getComputedStyle(c).opacity),
  };
}"""


def _url(path: str, query: str) -> str:
    return path + ("?" + query if query else "")


@pytest.mark.parametrize("screen", list(SCREENS))
@pytest.mark.parametrize("app_page", PAGES, ids=[p.stem for p in PAGES])
def test_picture_on_the_first_screen(browser, base_url, app_page, screen):
    viewport, query = SCREENS[screen]
    context = browser.new_context(viewport=viewport, reduced_motion="reduce", service_workers="block")
    try:
        page = context.new_page()
        open_page(page, base_url, _url(app_page.url, query))
        SHOTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS_DIR / f"first-screen-{screen}-{app_page.stem}.png"))
        found = page.evaluate(_MEASURE_JS)
    finally:
        context.close()
    if screen == "laptop":
        limit = MAX_SCREENS * viewport["height"]
        assert found["height"] is not None and found["height"] <= limit, (
            f"{app_page.title} is {found['height']} px tall at 1440x900, over {MAX_SCREENS} screens ({limit:.0f} px)"
        )
    assert found["title"] is not None and found["title"] <= MAX_TITLE_TOP_REM * ROOT_PX[screen], (
        f"{app_page.title} in {screen} view: its title starts {found['title']:.0f} px down the page"
    )
    if screen == "projector":  # grey captions are faint on a projector: full contrast there
        assert all(float(o) == 1.0 for o in found["caption"]), f"{app_page.title}: captions at {found['caption']}"
    if app_page.stem in NO_PICTURE:
        return
    box = found["chart"]
    assert box is not None, f"{app_page.title} has no chart inside its picture container (ui.layout.picture)"
    assert found["scrolled"] == 0
    assert 0 <= box["top"] and box["bottom"] <= viewport["height"] + 1, (
        f"{app_page.title} in {screen} view: its picture spans y = {box['top']:.0f} to {box['bottom']:.0f} px, "
        f"outside the first screen (0 to {viewport['height']} px)"
    )
    assert box["right"] <= viewport["width"] + 1, f"{app_page.title}: the picture runs past the right edge"
