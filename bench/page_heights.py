"""Each page's height and where its picture lies, at 1440x900 and projected at 1920x1080 (docs/CLASSROOM.md's
"Page heights").

Run:  .venv/bin/python bench/page_heights.py [--json out.json]

It serves the lab as tests/e2e does (conftest's `streamlit_server`, warm-up on) and opens every page of app.py's
navigation in Debian's Chromium, once at 1440x900 and once at 1920x1080 with `?projector=true`. Per page, after
the page is idle (conftest's `open_page`): the scrollHeight of Streamlit's main container (the page's height),
the bounding box of the first chart inside `ui.layout.picture()` (or, on a checkout older than it, of the page's
first chart), and how many error and warning boxes it shows. Run it on two checkouts to compare them; it measures
layout, not time, and asserts nothing (tests/e2e/test_first_screen.py holds the limits).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from conftest import CHROMIUM_ARGS, chromium_path, discover_pages, open_page, streamlit_server  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

SCREENS = {
    "1440x900": ({"width": 1440, "height": 900}, ""),
    "1920x1080 projector": ({"width": 1920, "height": 1080}, "?projector=true"),
}
MEASURE_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const chart = document.querySelector('.st-key-picture .js-plotly-plot') || document.querySelector('.js-plotly-plot');
  const box = chart ? chart.getBoundingClientRect() : null;
  return {
    height: main ? main.scrollHeight : null,
    picture: box ? [Math.round(box.top), Math.round(box.bottom)] : null,
    errors: document.querySelectorAll('[data-testid="stAlertContentError"]').length,
    warnings: document.querySelectorAll('[data-testid="stAlertContentWarning"]').length,
  };
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    out: dict[str, dict] = {}
    with streamlit_server(Path(tempfile.mkdtemp())) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for screen, (viewport, query) in SCREENS.items():
            context = browser.new_context(viewport=viewport, reduced_motion="reduce", service_workers="block")
            page = context.new_page()
            print(f"{screen}: page, height px, picture top-bottom px, error / warning boxes", flush=True)
            for app_page in discover_pages():
                open_page(page, server.url, app_page.url + query)
                found = page.evaluate(MEASURE_JS)
                out[f"{screen} {app_page.stem}"] = found
                picture = "-" if found["picture"] is None else "{}-{}".format(*found["picture"])
                boxes = f"{found['errors']} / {found['warnings']}"
                print(f"  {app_page.title:28s} {found['height']:>6} {picture:>10}  {boxes}")
            context.close()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
