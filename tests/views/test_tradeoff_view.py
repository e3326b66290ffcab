"""The Release page's trade-off view: its curve draws core.release.evaluation.tuning's own figures, marks the
threshold the tuning chose, and says the same in its summary and table."""

import math

import pytest
from stubs import PRICED_SEGMENTS, PRICED_TRACE

from core.release.evaluation.tuning import THRESHOLDS, tune_threshold
from core.release.evaluation.typing_sim import Segment, TraceCut, simulate_typing
from views.release import tradeoff_view

TRACE, SEGMENTS = PRICED_TRACE, PRICED_SEGMENTS  # tests/stubs.py: worked out on paper there


def trace_named(fig, name):
    return next(t for t in fig.data if t.name == name)


@pytest.mark.parametrize("cost, floor, best", [(1.0, 0.0, 0.1), (1.0, 0.6, 0.5), (2.0, 0.6, 0.5)])
def test_the_curve_is_the_tunings_grid_with_its_choice_marked(cost, floor, best):
    threshold, rows = tune_threshold(TRACE, 10, SEGMENTS, attention_cost=cost, min_acceptance=floor)
    assert threshold == best
    fig = tradeoff_view.figure(rows)
    net = trace_named(fig, tradeoff_view.NET)
    assert list(net.x) == list(THRESHOLDS)
    # each point against the typist replayed at that threshold: 100 x sum(net) / characters covered
    for t, y in zip(net.x, net.y):
        typed = simulate_typing(TRACE, 10, SEGMENTS, t, cost)
        assert y == pytest.approx(100 * typed["net"].sum() / typed["covered"].sum(), rel=1e-12)
    gross = trace_named(fig, tradeoff_view.GROSS)
    assert list(gross.y) == [r["keystrokes_saved_per_100"] for r in rows]
    acceptance = trace_named(fig, f"{tradeoff_view.ACCEPTANCE} (right axis)")
    assert acceptance.yaxis == "y2" and list(acceptance.y) == [r["acceptance_rate"] for r in rows]
    star = trace_named(fig, f"chosen: {best:g}")
    assert list(star.x) == [best] and star.y[0] == tradeoff_view.chosen(rows)["net_keystrokes_saved_per_100"]
    assert any(s.x0 == s.x1 == best for s in fig.layout.shapes)  # the dashed line at the chosen threshold
    assert any(s.yref == "y2" and s.y0 == s.y1 == 0.6 for s in fig.layout.shapes)  # the floor, on acceptance's axis
    # colour-blind safe: every series from the Okabe-Ito palette, told apart by dash or marker too
    lines = [t for t in fig.data if t.mode != "markers"]
    assert all(t.line.color in tradeoff_view.charts.OKABE_ITO for t in lines)
    assert len({(t.line.dash, t.marker.symbol) for t in lines}) == len(lines)


def test_summary_and_table_carry_the_same_numbers():
    _, rows = tune_threshold(TRACE, 10, SEGMENTS, attention_cost=2.0)
    text = tradeoff_view.summary(rows)
    # at 0.5: 2 saved over 9 characters, one shown and taken; the most gross (5 at 0.10) nets 5 - 2 x 2 = 1
    assert (
        "the tuning chose threshold 0.5, the most net keystrokes where at least 60% of the suggestions shown are "
        "taken: 22.2 keystrokes net"
        in text
        and "100% of them accepted" in text
    )
    assert "the most gross saving, 55.6 at threshold 0.1, nets 11.1" in text
    table = tradeoff_view.table(rows)
    assert list(table["threshold"]) == list(THRESHOLDS) and table["chosen"].sum() == 1
    assert table.loc[table["chosen"], "threshold"].item() == 0.5
    assert math.isclose(table.loc[table["chosen"], tradeoff_view.NET].item(), 200 / 9)


def test_rows_without_exactly_one_choice_are_refused():
    _, rows = tune_threshold(TRACE, 10, SEGMENTS)
    with pytest.raises(ValueError, match="exactly one chosen threshold"):
        tradeoff_view.figure([{**r, "chosen": True} for r in rows])


def test_the_summary_says_when_no_threshold_reaches_the_floor():
    # half of what is shown is taken at every threshold that shows anything (tests/release/test_tuning.py)
    trace = {1: (TraceCut(5, 0.9, True),), 2: (), 3: (), 4: (), 5: (), 6: (TraceCut(2, 0.9, False),)}
    _, rows = tune_threshold(trace, 7, [Segment(0, 1, 7)])
    assert "threshold 0.9, the most net keystrokes, though no threshold has 60% of its suggestions taken" in (
        tradeoff_view.summary(rows)
    )
