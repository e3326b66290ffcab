"""Where a widget move's time goes in Chromium: a CPU profile (Chrome DevTools Protocol) of one page's moves, self
time summed by script.

Run:  .venv/bin/python bench/profile_browser.py [--page embeddings --key emb_head --values 1,0] [--moves 6]

It serves the lab as tests/e2e does (conftest's `streamlit_server`, no warm-up), opens the page in Debian's Chromium,
and profiles `--moves` changes of the page's selectbox `--key` (alternating between `--values`; the first move is a
warm-up and not counted), each from the option click until the app is idle (conftest's `wait_for_app_idle`). The
profiler samples every 200 µs; samples are summed by the script they ran in (Streamlit's Plotly chunk, React, ...)
or by the native activity Chromium names ("(program)": layout, paint and other work outside JavaScript; "(idle)":
waiting, e.g. for the server). Printed per move, in ms. A profile, not a benchmark: nothing passes or fails on it.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from conftest import CHROMIUM_ARGS, VIEWPORT, chromium_path, open_page, streamlit_server, wait_for_app_idle  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402


def where(call_frame: dict) -> str:
    """The script (or Chromium's native activity) a profile sample ran in."""
    name = call_frame.get("url", "").rsplit("/", 1)[-1]
    if not name:
        return f"({call_frame.get('functionName') or 'native'})".replace("((", "(").replace("))", ")")
    if "PlotlyChart" in name:
        return "Plotly (Streamlit's PlotlyChart chunk)"
    return "Streamlit's index" if name.startswith("index.") else name


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", default="embeddings")
    parser.add_argument("--key", default="emb_head", help="the selectbox moved")
    parser.add_argument("--values", default="1,0", help="the two options alternated")
    parser.add_argument("--moves", type=int, default=6)
    args = parser.parse_args(argv)
    values = args.values.split(",")
    totals: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp, streamlit_server(Path(tmp), warmup=False) as server:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            context = browser.new_context(viewport=VIEWPORT, reduced_motion="reduce", service_workers="block")
            page = context.new_page()
            open_page(page, server.url, f"/{args.page}")
            cdp = context.new_cdp_session(page)
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 200})
            for i in range(args.moves):
                page.locator(f".st-key-{args.key}").get_by_role("combobox").click()
                option = page.get_by_role("option", name=values[i % 2], exact=True)
                cdp.send("Profiler.start")
                option.click()
                wait_for_app_idle(page)
                profile = cdp.send("Profiler.stop")["profile"]
                if i == 0:
                    continue  # warm-up
                nodes = {node["id"]: node for node in profile["nodes"]}
                for sample, delta_us in zip(profile["samples"], profile["timeDeltas"], strict=True):
                    totals[where(nodes[sample]["callFrame"])] += delta_us / 1000
            browser.close()
    counted = args.moves - 1
    print(f"{args.page}: {args.key} moved {counted} times; CPU profile, ms per move")
    for name, ms in totals.most_common(12):
        print(f"  {name:<42} {ms / counted:8.1f}")


if __name__ == "__main__":
    main()
