"""Crafted links in a real browser: query values carrying markdown images, links and HTML tags that point at
another host. Every request the page makes to a non-local host is aborted by a Playwright route and counted;
the goal is 0. The page still says, as plain text, that the value is not usable."""

from __future__ import annotations

from urllib.parse import quote, urlencode, urlsplit

import pytest

from ui.text import WORD_JOINER

from .conftest import LOCAL_HOSTS, open_page, outside_requests, save_screenshot

HOST = "198.51.100.7"  # TEST-NET-2: never a real machine
# (page, query, the key whose not-usable note must show the value as text)
CRAFTED = [
    ("/training", {"train_preset": f"a` ![p](http://{HOST}/p.png) `b"}, "train_preset"),
    (
        "/temperature",
        {"temperature": f"<img src=http://{HOST}/x>", "scores": f"![t](http://{HOST}/t.png)"},
        "temperature",
    ),
    (
        "/masks",
        {
            "mask_side": f"[click](http://{HOST}/l) <img src=http://{HOST}/s>",
            "mask_text": f"![m](http://{HOST}/m.png) <img src=http://{HOST}/x>",
        },
        "mask_side",
    ),
    (
        "/autocomplete",
        {"ac_temperature": f"![a](http://{HOST}/a.png)", "ac_k": f"<img src=http://{HOST}/k onerror=this.src+=1>"},
        "ac_temperature",
    ),
    ("/score_geometry", {"geo_T": f"<a href=http://{HOST}/g>![g](http://{HOST}/g.png)</a>"}, "geo_T"),
]


@pytest.mark.parametrize(("path", "query", "noted"), CRAFTED, ids=[c[0].strip("/") for c in CRAFTED])
def test_a_crafted_link_fetches_nothing_from_outside_and_shows_its_value_as_text(
    page, base_url, tmp_path, requests_seen, path, query, noted
):
    outside: list[str] = []

    def guard(route) -> None:
        if (urlsplit(route.request.url).hostname or "") in LOCAL_HOSTS:
            route.continue_()
        else:  # counted and never sent
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", guard)
    open_page(page, base_url, f"{path}?{urlencode(query, quote_via=quote)}")
    main = page.locator('[data-testid="stMain"]')
    # the invisible word joiner that keeps GFM from linking a bare URL is not part of what the reader sees
    notes = [n.replace(WORD_JOINER, "") for n in main.get_by_text("which is not usable").all_inner_texts()]
    value = query[noted][:80]
    assert any(f"to '{value}'" in n for n in notes), (value, notes)  # quoted back as the characters it holds
    # No element the value could have become: no attribute of any element points at the outside host.
    urls = page.eval_on_selector_all(
        "*",
        "els => els.flatMap(e => ['src', 'href', 'srcset', 'xlink:href', 'data', "
        "'poster', 'action'].map(a => e.getAttribute(a)).filter(Boolean))",
    )
    assert [u for u in urls if HOST in u] == []
    save_screenshot(page, tmp_path, f"link-injection-{path.strip('/')}")
    assert outside == []
    assert outside_requests(requests_seen) == []
