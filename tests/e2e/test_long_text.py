"""Links stay short (issue 25): a 200 KB paste on Autocomplete keeps the address bar short, and a reload works.

Before ui.params bounded what a text widget writes to the URL, the whole paste went into the address bar (about
280 KB once URL-encoded); the server refuses a request line that long (`Invalid HTTP request`), so a reload, or the
same link shared, failed with net::ERR_HTTP_RESPONSE_CODE_FAILURE. Here the browser does what a learner does:
paste, apply, reload, and the page must come back working, holding the prefix the link carried.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from .conftest import open_page, wait_for_app_idle
from .test_model_pages import PROMPT_LABEL, RUN_TIMEOUT_MS, body_text, plot_titles

PASTE_BYTES = 200_000
MAX_URL_BYTES = 8_192  # well under any server's or browser's limit on a request line
PROMPT_KEY = "ac_prompt"  # views/autocomplete.py
LINK_NOTE = re.compile(r"This page's link keeps the first ([\d,]+) of these ([\d,]+) characters")


def pasted_text() -> str:
    """200 KB of Python with spaces, line breaks and punctuation: characters a URL must escape (3 bytes each)."""
    block = "def main(argv):\n    total = sum(x * 2 for x in argv)  # 100%: a+b=c?\n    return total\n\n"
    return (block * (PASTE_BYTES // len(block) + 1))[:PASTE_BYTES]


def no_error_on_the_page(page) -> bool:
    return not page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count()


def test_a_200_kb_paste_keeps_the_link_short_and_the_page_reloads(page, base_url):
    text = pasted_text()
    open_page(page, base_url, "/autocomplete")
    prompt = page.get_by_label(PROMPT_LABEL)
    prompt.fill(text)
    prompt.press("Control+Enter")
    wait_for_app_idle(page, RUN_TIMEOUT_MS)

    assert no_error_on_the_page(page), body_text(page)[:2000]
    used = prompt.input_value()
    assert len(used) > 1000 and text.startswith(used)  # the page holds the paste (or its widget's bounded start)
    url = page.url
    assert len(url.encode("utf-8")) < MAX_URL_BYTES, f"the address bar holds {len(url):,} characters"
    in_link = parse_qs(urlsplit(url).query).get(PROMPT_KEY, [""])[0]
    assert in_link and used.startswith(in_link) and len(in_link) < len(used)  # a prefix of the text, not all of it
    said = LINK_NOTE.search(body_text(page))
    assert said, "the page does not say that its link keeps only part of the text"
    assert int(said.group(1).replace(",", "")) == len(in_link)
    assert int(said.group(2).replace(",", "")) == len(used)

    response = page.reload(wait_until="domcontentloaded")
    assert response is not None and response.ok, f"the reload failed: {response.status if response else 'no response'}"
    page.wait_for_selector('[data-testid="stApp"]', timeout=RUN_TIMEOUT_MS)
    wait_for_app_idle(page, RUN_TIMEOUT_MS)
    assert no_error_on_the_page(page), body_text(page)[:2000]
    assert page.get_by_label(PROMPT_LABEL).input_value() == in_link  # the link's prefix, whole
    # The app ran on it: the model read the text and drew its next-character chart in the page's picture.
    assert page.locator(".st-key-picture .js-plotly-plot").count() >= 1
    assert any("logits" in t or "next characters" in t for t in plot_titles(page)), plot_titles(page)
    assert "What the model sees" in body_text(page)
