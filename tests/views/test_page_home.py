"""Start here: the worked example's weights drawn on the first screen, and its code beside what it prints, run on
request, as a subprocess."""

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from core.lessons.example_run import EXAMPLE
from tests.apptest import decode, figure, open_page, table


@pytest.mark.numerics
def test_the_first_picture_is_the_worked_example_weights_computed_independently():
    """LESSON.md's draws (torch.manual_seed(2): q, k (1, 4, 3), v (1, 4, 2)), softmax written out here with math.exp."""
    with torch.random.fork_rng():
        torch.manual_seed(2)
        q, k = torch.randn(1, 4, 3), torch.randn(1, 4, 3)
    scores = (q[0].double() @ k[0].double().T / math.sqrt(3)).tolist()  # (T, S)
    expected = []
    for t in range(4):
        exps = [math.exp(scores[t][s] - max(scores[t][: t + 1])) for s in range(t + 1)]
        expected.append([e / math.fsum(exps) for e in exps] + [math.nan] * (3 - t))  # keys right of t: masked

    at = open_page("home")  # views/home.py
    heat = figure(at, "The worked example: weights")["data"][0]
    z = decode(heat["z"]).astype(float)
    np.testing.assert_allclose(z, np.array(expected), atol=1e-6)  # NaN (a masked gap) where expected is NaN
    assert heat["text"][0] == ["1.0000", "masked", "masked", "masked"]
    cells = table(at, "weight")
    assert cells["weight"].tolist()[:4] == ["1.000000", "masked", "masked", "masked"]
    assert [float(x) for x in cells["weight"].tolist()[12:]] == pytest.approx(expected[3], abs=2e-6)


def test_the_worked_example_is_shown_and_its_real_output_revealed_on_request():
    at = open_page("home")
    assert at.code[0].value == EXAMPLE.read_text(encoding="utf-8").rstrip("\n")  # st.code drops the last newline
    assert len(at.code) == 1  # no output before the button
    at.button(key="home_run_example").click().run()
    assert not at.exception
    want = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120).stdout
    assert at.code[1].value == want.rstrip("\n") and "1.0000, 0.0000, 0.0000, 0.0000" in want
