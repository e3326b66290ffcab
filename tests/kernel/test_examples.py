"""examples/attention_by_hand.py runs and prints the weights the hand-check computes independently."""

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from core import handcheck

pytestmark = pytest.mark.numerics

ROOT = Path(__file__).resolve().parents[2]


def test_attention_by_hand_prints_the_hand_checked_weights():
    run = subprocess.run(
        [sys.executable, "examples/attention_by_hand.py"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    printed = [[float(x) for x in re.findall(r"-?\d+\.\d+", line)] for line in run.stdout.strip().splitlines()]

    # The same draws as the script, then the pure-Python oracle (no torch arithmetic).
    torch.manual_seed(2)
    q, k, v = torch.randn(1, 4, 3), torch.randn(1, 4, 3), torch.randn(1, 4, 2)
    trace = handcheck.scaled_dot_product_attention(
        q[0].tolist(), k[0].tolist(), v[0].tolist(), handcheck.causal_mask(4)
    )

    assert len(printed) == 4 and all(len(r) == 4 for r in printed), run.stdout
    for got_row, want_row in zip(printed, trace.weights):
        for got, want in zip(got_row, want_row):
            assert math.isclose(got, want, abs_tol=5e-5), (got, want)  # printed with 4 decimals
    assert printed[0] == [1.0, 0.0, 0.0, 0.0]
