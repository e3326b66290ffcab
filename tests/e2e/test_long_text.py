"""Links stay short (issue 25): a 200 KB paste on Autocomplete keeps the address bar short, and a reload works.

Before ui.params bounded what a text widget writes to the URL, the whole paste went into the address bar (about
280 KB once URL-encoded); the server refuses a request line that long (`Invalid HTTP request`), so a reload, or the
same link shared, failed with net::ERR_HTTP_RESPONSE_CODE_FAILURE. Here the browser does what a learner does: paste
through the clipboard, apply, reload; then the longest text the box takes (ui.params.MAX_TEXT_CHARS), typed in one go,
whose link keeps only a prefix. Each time the page must come back working, holding what the link carried.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from .conftest import VIEWPORT, open_page, wait_for_app_idle
from .test_model_pages import PROMPT_LABEL, RUN_TIMEOUT_MS, body_text, plot_titles

PASTE_BYTES = 200_000
BOX_CHARS = 10_000  # ui.params.MAX_TEXT_CHARS: the most a text box takes
MAX_URL_BYTES = 8_192  # well under any server's or browser's limit on a request line
PROMPT_KEY = "ac_prompt"  # views/autocomplete.py
LINK_NOTE = re.compile(r"This page's link keeps the first ([\d,]+) of these ([\d,]+) characters")


def python_text(n: int) -> str:
    """n characters of Python with spaces, line breaks and punctuation: characters a URL must escape (3 bytes)."""
    block = "def main(argv):\n    total = sum(x * 2 for x in argv)  # 100%: a+b=c?\n    return total\n\n"
    return (block * (n // len(block) + 1))[:n]


def no_error_on_the_page(page) -> bool:
    return not page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count()


def apply(page) -> None:
    page.get_by_label(PROMPT_LABEL).press("Control+Enter")
    wait_for_app_idle(page, RUN_TIMEOUT_MS)
    assert no_error_on_the_page(page), body_text(page)[:2000]


def link_text(page) -> str:
    """The prompt as the address bar carries it ('' when it holds none), after checking the bar stays short."""
    url = page.url
    assert len(url.encode("utf-8")) < MAX_URL_BYTES, f"the address bar holds {len(url):,} characters"
    return parse_qs(urlsplit(url).query).get(PROMPT_KEY, [""])[0]


def reload_works(page, want: str) -> None:
    """Reload: the server answers, the app runs on the link's text and draws its picture, nothing fails."""
    response = page.reload(wait_until="domcontentloaded")
    assert response is not None and response.ok, f"the reload failed: {response.status if response else 'no answer'}"
    page.wait_for_selector('[data-testid="stApp"]', timeout=RUN_TIMEOUT_MS)
    wait_for_app_idle(page, RUN_TIMEOUT_MS)
    assert no_error_on_the_page(page), body_text(page)[:2000]
    assert page.get_by_label(PROMPT_LABEL).input_value() == want
    assert page.locator(".st-key-picture .js-plotly-plot").count() >= 1  # the model read it and drew its chart
    assert any("logits" in t or "next characters" in t for t in plot_titles(page)), plot_titles(page)


def test_a_200_kb_paste_keeps_the_link_short_and_the_page_reloads(browser, base_url):
    context = browser.new_context(
        viewport=VIEWPORT,
        reduced_motion="reduce",
        service_workers="block",
        permissions=["clipboard-read", "clipboard-write"],
    )
    try:
        page = context.new_page()
        open_page(page, base_url, "/autocomplete")
        prompt = page.get_by_label(PROMPT_LABEL)
        before = prompt.input_value()

        pasted = python_text(PASTE_BYTES)  # a real paste, through the clipboard
        page.evaluate("text => navigator.clipboard.writeText(text)", pasted)
        prompt.click()
        page.keyboard.press("Control+A")
        page.keyboard.press("Control+V")
        apply(page)
        used = prompt.input_value()
        # The box holds at most BOX_CHARS: it keeps the paste's start, or refuses the paste and keeps the old text.
        assert used == before or (pasted.startswith(used) and len(used) <= BOX_CHARS), len(used)
        carried = link_text(page)
        assert used.startswith(carried)
        reload_works(page, carried if carried else before)

        typed = python_text(BOX_CHARS)  # the longest text the box takes, in one go
        prompt.click()
        page.keyboard.press("Control+A")
        page.keyboard.insert_text(typed)
        apply(page)
        assert prompt.input_value() == typed
        carried = link_text(page)
        assert carried and typed.startswith(carried) and len(carried) < len(typed)  # a prefix, not all of it
        said = LINK_NOTE.search(body_text(page))
        assert said, "the page does not say that its link keeps only part of the text"
        assert (int(said.group(1).replace(",", "")), int(said.group(2).replace(",", ""))) == (len(carried), len(typed))
        reload_works(page, carried)
    finally:
        context.close()
