"""The reader's language in a real browser (issue 39): the browser's preferred language by default, a link's
?lang= above it, and a choice in the sidebar kept in the address from page to page, so a shared link keeps it."""

from __future__ import annotations

from .conftest import VIEWPORT, open_page, wait_for_app_idle


def title(page) -> str:
    return page.locator('[data-testid="stMain"] h1').first.inner_text().strip()


def test_the_browser_language_then_the_link_then_the_picker_kept_across_pages(browser, base_url):
    context = browser.new_context(viewport=VIEWPORT, reduced_motion="reduce", service_workers="block", locale="es-ES")
    try:
        page = context.new_page()
        open_page(page, base_url, "/masks")
        assert title(page) == "Máscaras"  # a Spanish browser, no link language: Spanish

        open_page(page, base_url, "/masks?lang=en")
        assert title(page) == "Masks"  # the link's language wins over the browser's

        picker = page.get_by_label("Language · Idioma · 语言")
        picker.click()
        page.get_by_role("option", name="中文").click()
        wait_for_app_idle(page)
        assert title(page) == "掩码" and "lang=zh" in page.url  # the choice is in the address, to be shared

        page.locator('[data-testid="stSidebarNav"] a').filter(has_text="温度").click()
        wait_for_app_idle(page)
        assert title(page) == "温度" and "lang=zh" in page.url  # and stays there on the next page
    finally:
        context.close()
