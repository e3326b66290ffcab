"""Start here: the worked example's code beside what it prints, run on request, as a subprocess."""

import subprocess
import sys

from core.lessons.example_run import EXAMPLE
from tests.apptest import open_page


def test_the_worked_example_is_shown_and_its_real_output_revealed_on_request():
    at = open_page("home")  # views/home.py
    assert at.code[0].value == EXAMPLE.read_text(encoding="utf-8").rstrip("\n")  # st.code drops the last newline
    assert len(at.code) == 1  # no output before the button
    at.button(key="home_run_example").click().run()
    assert not at.exception
    want = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120).stdout
    assert at.code[1].value == want.rstrip("\n") and "1.0000, 0.0000, 0.0000, 0.0000" in want
