"""core.leak: each rule of the leak detector at its boundary (a loss exactly at a threshold passes), on
hand-written histories; real runs against it are in tests/test_runs.py."""
from types import SimpleNamespace

import pytest

from core import leak


def history(*points):
    return [SimpleNamespace(step=s, val_loss=v) for s, v in points]


def test_the_floor_rule_at_its_boundary():
    floor = leak.LEAK_FLOOR_NATS
    assert not leak.leak_verdict(history((0, 4.5), (100, 1.2), (200, floor))).leaked  # exactly at the floor passes
    verdict = leak.leak_verdict(history((0, 4.5), (100, 1.2), (200, floor - 1e-9), (300, 0.1)))
    assert verdict.leaked and verdict.rule == "floor" and verdict.step == 200 and verdict.threshold == floor
    assert "impossibly good" in verdict.message


def test_the_reference_rule_compares_the_same_steps_only():
    ref = history((0, 4.5), (100, 2.4), (200, 2.2))
    assert not leak.leak_verdict(history((0, 4.5), (100, 1.2), (200, 1.5)), reference=ref).leaked  # 1.2 == 0.5 * 2.4
    verdict = leak.leak_verdict(history((0, 4.5), (100, 1.2 - 1e-9)), reference=ref)
    assert verdict.leaked and verdict.rule == "reference run" and verdict.step == 100
    assert verdict.threshold == pytest.approx(1.2)
    assert not leak.leak_verdict(history((0, 1.0), (150, 1.0)), reference=history((0, 4.5), (100, 2.4))).leaked
    assert not leak.leak_verdict(history((0, 2.0)), reference=history((0, 4.5))).leaked  # step 0 is never compared


def test_the_reference_model_rule_at_its_boundary():
    assert not leak.leak_verdict(history((0, 4.5), (400, 0.95)), reference_loss=1.9).leaked  # 0.95 == 0.5 * 1.9
    verdict = leak.leak_verdict(history((0, 4.5), (200, 1.2), (400, 0.95 - 1e-9)), reference_loss=1.9)
    assert verdict.leaked and verdict.rule == "reference model" and verdict.step == 400
    assert verdict.threshold == pytest.approx(0.95) and "shipped causal model" in verdict.message
