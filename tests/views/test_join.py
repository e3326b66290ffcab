"""The Start page's join block (ui/join.py): shown only when LAB_JOIN_URL is set, only for an address of the shape
http(s)://host[:port]/, and its QR code decodes (by zxing-cpp, an independent decoder) to exactly that address."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from tests.apptest import open_page
from ui.join import ADDRESS_PX, MAX_CHARS, PROJECTOR_QR_PX, QR_PX, address_html, join_url, qr_png

zxingcpp = pytest.importorskip("zxingcpp", reason="zxing-cpp (a dev dependency) decodes the QR codes")


def decoded(png: bytes) -> list[str]:
    return [r.text for r in zxingcpp.read_barcodes(Image.open(io.BytesIO(png)))]


@pytest.mark.parametrize(
    "given, shown",
    [
        ("http://192.168.1.20:8501/", "http://192.168.1.20:8501/"),
        ("  https://lab.school-x.example  ", "https://lab.school-x.example/"),
        ("http://vm:8501", "http://vm:8501/"),
    ],
)
def test_an_address_of_the_right_shape_is_shown_with_one_final_slash(given, shown):
    assert join_url({"LAB_JOIN_URL": given}) == shown


@pytest.mark.parametrize(
    "given",
    [
        "javascript:alert(1)",
        "![x](http://evil.example/p.png)",
        "http://evil.example/p.png",  # a path: an address learners type has none
        "http://user@evil.example/",
        "ftp://10.0.0.1/",
        "http://10.0.0.1:0/",
        "http://10.0.0.1:99999/",
        "http://-bad-.example/",
        "http://10.0.0.1:8501/\n<script>",
        "http://" + "a" * MAX_CHARS + ".example/",
    ],
)
def test_anything_else_is_refused_without_echoing_it(given):
    with pytest.raises(ValueError, match="LAB_JOIN_URL is not an address like") as err:
        join_url({"LAB_JOIN_URL": given})
    assert "evil" not in str(err.value) and "script" not in str(err.value)


def test_unset_means_no_join_block():
    assert join_url({}) is None and join_url({"LAB_JOIN_URL": "   "}) is None


@pytest.mark.parametrize("width", [QR_PX, PROJECTOR_QR_PX])
def test_the_qr_code_decodes_to_the_address_at_whole_pixels_per_module(width):
    url = "http://192.168.100.200:8501/"
    png, shown = qr_png(url, width)
    image = Image.open(io.BytesIO(png))
    assert image.size == (shown, shown)
    # Along the diagonal, the first dark pixel is the finder pattern's corner, after the four-module quiet zone: the
    # module's width in pixels. Whole pixels per module, and less than one pixel per module short of the width asked.
    first_dark = next(y for y in range(shown) if image.convert("L").getpixel((y, y)) < 128)
    scale, rest = divmod(first_dark, 4)
    assert rest == 0 and shown % scale == 0 and 0 <= width - shown < shown // scale
    assert decoded(png) == [url]


def test_the_start_page_shows_the_join_address_once_on_one_line_and_its_qr_code(monkeypatch, fresh_streamlit_caches):
    url = "http://10.20.30.40:8501/"
    monkeypatch.setenv("LAB_JOIN_URL", url)
    at = open_page("home")
    shown = [str(el.value) for kind in ("markdown", "title", "code") for el in at.get(kind) if url in str(el.value)]
    assert shown == [address_html(url, ADDRESS_PX)]  # once, and only as the one-line address
    assert len(at.title) == 1  # the page's own
    assert len(at.get("image")) == 1
    assert not at.warning


def test_the_address_is_one_escaped_line_that_is_never_a_link():
    shown = address_html('http://a.example/"><a href="http://evil.example/">x</a>', 40)
    assert "white-space:nowrap" in shown and "font-size:min(40px," in shown
    assert "<a " not in shown and "&lt;a href=&quot;http://evil.example/&quot;&gt;" in shown


def test_a_bad_join_address_is_a_warning_and_no_qr_code(monkeypatch, fresh_streamlit_caches):
    monkeypatch.setenv("LAB_JOIN_URL", "![x](http://evil.example/p.png)")
    at = open_page("home")
    assert len(at.title) == 1 and not at.get("image")
    assert [w.value for w in at.warning] and "evil" not in at.warning[0].value


def test_without_the_setting_the_start_page_has_no_join_block(monkeypatch, fresh_streamlit_caches):
    monkeypatch.delenv("LAB_JOIN_URL", raising=False)
    at = open_page("home")
    assert len(at.title) == 1 and not at.get("image") and not at.warning
