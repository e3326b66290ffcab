"""A class through the proxy (`python -m core serve --class --workers 2`): a real browser opens the lab through HAProxy,
sees the Start page with the join address and a QR code that scans to it, and moves to a lab page over the websocket
that HAProxy carries. Screenshots go to /tmp/serve-shots/."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from PIL import Image

from tests.e2e.conftest import VIEWPORT, open_page, wait_for_app_idle
from ui.join import PROJECTOR_QR_PX

zxingcpp = pytest.importorskip("zxingcpp", reason="zxing-cpp (a dev dependency) scans the QR code as a phone would")

SHOTS = Path("/tmp/serve-shots")
JOIN = ".st-key-join_block"


def scanned(png: bytes) -> list[str]:
    return [r.text for r in zxingcpp.read_barcodes(Image.open(io.BytesIO(png)))]


def test_the_lab_through_the_proxy_shows_the_join_address_and_moves_to_a_lab_page(browser, class_server):
    join_url = class_server.url + "/"
    context = browser.new_context(viewport=VIEWPORT, reduced_motion="reduce", service_workers="block")
    sockets: list[str] = []
    try:
        page = context.new_page()
        page.on("websocket", lambda ws: sockets.append(ws.url))
        open_page(page, class_server.url, "/")
        assert page.locator('[data-testid="stException"]').count() == 0
        block = page.locator(JOIN)
        assert join_url in block.inner_text()
        qr = block.locator("img")
        assert qr.count() == 1 and scanned(qr.screenshot()) == [join_url]
        laptop_width = qr.bounding_box()["width"]
        worker = {c["name"]: c["value"] for c in context.cookies()}.get("LABWORKER")
        assert worker in ("w1", "w2")  # HAProxy pinned this browser to one worker
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "start-through-proxy.png"))

        page.locator('[data-testid="stSidebarNav"] a', has_text="Masks").first.click()
        page.wait_for_url(re.compile(r"/masks"), timeout=60_000)
        wait_for_app_idle(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.locator("h1").first.inner_text().strip() != ""
        assert page.locator('[data-testid="stPlotlyChart"]').count() > 0  # the page ran on the worker and drew
        page.screenshot(path=str(SHOTS / "masks-through-proxy.png"))
        assert sockets and all(s.startswith(class_server.url.replace("http", "ws", 1)) for s in sockets), sockets
        assert {c["name"]: c["value"] for c in context.cookies()}.get("LABWORKER") == worker  # the same worker

        open_page(page, class_server.url, "/?projector=true")  # what a teacher projects
        projected = page.locator(JOIN).locator("img")
        assert projected.bounding_box()["width"] >= max(1.5 * laptop_width, 0.9 * PROJECTOR_QR_PX)  # whole modules
        assert scanned(projected.screenshot()) == [join_url]
        page.screenshot(path=str(SHOTS / "start-projector.png"))
    finally:
        context.close()
