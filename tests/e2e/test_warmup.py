"""The session server warms itself (ui/warmup.py): its first visitor's run starts a background session that opens
every lab page once, and the log says so with no error and no traceback."""

from __future__ import annotations

import re
import time

WARMED = re.compile(r"warm-up: (\d+) pages in [\d.]+ s, (\d+) errors")
WAIT_S = 300  # every lab page's first run on a 2-core machine also running the browser tests


def test_the_server_warms_every_lab_page_without_an_error(server, base_url):
    from ui.warmup import WARM_PAGES

    deadline = time.monotonic() + WAIT_S
    while (match := WARMED.search(server.log_path.read_text(errors="replace"))) is None:
        assert time.monotonic() < deadline, f"no warm-up line in the server log within {WAIT_S} s:\n{server.log_tail()}"
        time.sleep(1)
    assert (int(match.group(1)), int(match.group(2))) == (len(WARM_PAGES), 0), match.group(0)
    assert "Traceback" not in server.log_path.read_text(errors="replace")
