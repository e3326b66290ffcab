"""core.release.evaluation.tuning: the grid threshold that saves the most keystrokes net of the attention cost
(worked out by hand at several prices, ties to the higher threshold), and recording a policy in a bundle's manifest (a
new version that still loads; a bad edit refused)."""

import json
import shutil

import pytest
from bundles import TEXT, tiny_model
from stubs import PRICED_TRACE, Bigram

from core.model.bundle import manifest_version, save_bundle, write_manifest
from core.model.bundle_checks import MANIFEST, BundleError
from core.model.corpus import Document, corpus_from_text
from core.model.tokenizer import CharTokenizer
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.tuning import (
    MIN_ACCEPTANCE,
    THRESHOLDS,
    record_policy,
    reprice,
    tune_bundle,
    tune_policy,
    tune_threshold,
)
from core.release.evaluation.typing_sim import Segment, TraceCut
from core.release.serving.policy import DEFAULT_POLICY, MIN_THRESHOLD, SuggestionPolicy, policy_from_manifest
from core.release.serving.transformer_predictor import load_predictor

# The hand-made trace of test_typing_sim: typing [1, 6) and [8, 12) of a 12-position stream.
TRACE = {
    1: (TraceCut(3, 0.6, True),),
    2: (TraceCut(2, 0.85, True),),
    3: (),
    4: (TraceCut(2, 0.4, True), TraceCut(4, 0.3, False)),
    5: (TraceCut(2, 0.9, False),),
    8: (TraceCut(3, 0.7, True),),
    9: (),
    10: (),
    11: (),
}
SEGMENTS = [Segment(0, 1, 6), Segment(0, 8, 12)]


def test_the_grid():
    assert THRESHOLDS[0] == MIN_THRESHOLD == 0.05 and THRESHOLDS[-1] == 0.95 and len(THRESHOLDS) == 19
    assert all(abs(b - a - 0.05) < 1e-12 for a, b in zip(THRESHOLDS, THRESHOLDS[1:]))


def test_tune_threshold_picks_the_most_keystrokes_saved_ties_to_the_higher():
    # Saved keystrokes by hand over the 9 covered characters (see test_typing_sim):
    #   t <= 0.30: 4 (at 4 the wrong 4-character cut wins, 0.3 x 3 > 0.4 x 1)
    #   0.35, 0.40: 5 (at 4 only the right 2-character cut clears)          <- best; the tie goes to 0.40
    #   0.45 .. 0.60: 4; 0.65, 0.70: 3; 0.75 .. 0.85: 1; 0.90, 0.95: 0
    # At a price of 0 the net figure is the gross one.
    best, rows = tune_threshold(TRACE, 12, SEGMENTS, attention_cost=0.0)
    assert best == 0.4
    saved = {r["threshold"]: round(r["keystrokes_saved_per_100"] * 9 / 100) for r in rows}
    want = {t: 4 for t in THRESHOLDS if t <= 0.3} | {0.35: 5, 0.4: 5}
    want |= {t: 4 for t in (0.45, 0.5, 0.55, 0.6)} | {0.65: 3, 0.7: 3, 0.75: 1, 0.8: 1, 0.85: 1, 0.9: 0, 0.95: 0}
    assert saved == want
    row = next(r for r in rows if r["threshold"] == 0.4)
    assert row["keystrokes_saved_per_100"] == pytest.approx(100 * 5 / 9, rel=1e-12)
    assert row["shown_per_100"] == pytest.approx(100 * 3 / 9, rel=1e-12) and row["acceptance_rate"] == 1.0
    assert next(r for r in rows if r["threshold"] == 0.95)["acceptance_rate"] is None  # nothing shown


PRICED = PRICED_TRACE


@pytest.mark.parametrize(
    "cost, best",
    [
        (0.0, 0.1),  # 5 saved at 0.05 and 0.10 (two wrong suggestions shown), 2 at 0.15 .. 0.50, 0 above
        (1.0, 0.1),  # net 5 - 2 = 3 beats 2
        (1.5, 0.5),  # net 5 - 3 = 2 ties 2: the higher threshold, fewer suggestions
        (2.0, 0.5),  # net 5 - 4 = 1 loses to 2
    ],
)
def test_the_price_of_attention_moves_the_tuned_threshold(cost, best):
    # price alone (no acceptance floor): at 0.10 only 2 of the 4 suggestions shown are taken
    chosen, rows = tune_threshold(PRICED, 10, [Segment(0, 1, 10)], attention_cost=cost, min_acceptance=0.0)
    assert chosen == best
    by_threshold = {r["threshold"]: r for r in rows}
    # net = gross - cost x (shown - accepted), per 100 of the 9 characters covered, worked out by hand
    assert by_threshold[0.1]["net_keystrokes_saved_per_100"] == pytest.approx(100 * (5 - 2 * cost) / 9, rel=1e-12)
    assert by_threshold[0.1]["keystrokes_saved_per_100"] == pytest.approx(100 * 5 / 9, rel=1e-12)
    assert by_threshold[0.5]["net_keystrokes_saved_per_100"] == pytest.approx(100 * 2 / 9, rel=1e-12)
    assert by_threshold[0.55]["net_keystrokes_saved_per_100"] == 0.0
    # and the same identity from the row's own shown and acceptance figures
    for r in rows:
        wrong = r["shown_per_100"] * (1 - (r["acceptance_rate"] or 0.0))
        assert r["net_keystrokes_saved_per_100"] == pytest.approx(r["keystrokes_saved_per_100"] - cost * wrong)
    assert [r["threshold"] for r in rows if r["chosen"]] == [best] and all(r["attention_cost"] == cost for r in rows)


@pytest.mark.parametrize("cost", [0.0, 0.3, 1.0, 1.5, 2.0, 7.25])
def test_repricing_the_grid_equals_tuning_at_that_price(cost):
    """The Release page re-prices one measured grid as its price slider moves: it must give, row for row and in
    the choice (ties included: 1.5 ties two thresholds), what replaying the typist at that price gives."""
    _, measured = tune_threshold(PRICED, 10, [Segment(0, 1, 10)], attention_cost=1.0)
    _, direct = tune_threshold(PRICED, 10, [Segment(0, 1, 10)], attention_cost=cost)
    assert reprice(measured, cost) == direct


@pytest.mark.parametrize(
    "floor, best",
    [
        (0.0, 0.1),  # net 5 - 2 = 3 at 0.05 and 0.10 (2 of 4 shown taken) beats 2 at 0.15 .. 0.50 (1 of 1)
        (0.5, 0.1),  # 0.10 reaches the floor exactly
        (0.6, 0.5),  # it does not: the most net keystrokes among 0.15 .. 0.50, the tie to the higher
        (1.0, 0.5),
    ],
)
def test_the_tuning_keeps_to_thresholds_whose_suggestions_are_taken(floor, best):
    chosen, rows = tune_threshold(PRICED, 10, [Segment(0, 1, 10)], attention_cost=1.0, min_acceptance=floor)
    assert chosen == best and [r["threshold"] for r in rows if r["chosen"]] == [best]
    assert reprice(rows, 1.0, floor) == rows
    assert MIN_ACCEPTANCE == 0.6 and tune_threshold(PRICED, 10, [Segment(0, 1, 10)])[0] == 0.5  # the default


def test_when_no_threshold_reaches_the_floor_the_most_net_keystrokes_win():
    # a right 5-character cut at 1 (saves 4, typing goes on at 6), a wrong one at 6: half of what is shown is taken
    # at every threshold up to 0.90, net 4 - 1 = 3; 0.95 shows nothing (no acceptance, so it reaches no floor)
    trace = {1: (TraceCut(5, 0.9, True),), 2: (), 3: (), 4: (), 5: (), 6: (TraceCut(2, 0.9, False),)}
    best, rows = tune_threshold(trace, 7, [Segment(0, 1, 7)])
    assert best == 0.9 and {r["acceptance_rate"] for r in rows} == {0.5, None}


def test_repricing_refuses_a_price_out_of_bounds():
    _, rows = tune_threshold(PRICED, 10, [Segment(0, 1, 10)])
    with pytest.raises(ValueError, match="attention_cost"):
        reprice(rows, -1.0)


def test_with_nothing_to_gain_the_highest_threshold_wins():
    best, rows = tune_threshold({1: (), 2: (TraceCut(3, 0.9, False),)}, 3, [Segment(0, 1, 3)])
    assert best == 0.95 and all(r["keystrokes_saved_per_100"] == 0 for r in rows)


def test_tune_policy_on_a_stub_by_hand():
    # "ab ab ac" is short: typed whole (positions 1..7) whatever the seed. Cuts by position (test_typing_sim):
    # 1 "b " .25 ok; 3 "ab" .25 ok / "ab " .125 ok; 5 " ab" .125 wrong; 6 "ab" .25 / "ab " .125 wrong; 7 "b " wrong.
    # t <= .125: 1 accepted (Tab, 1 saved), at 3 "ab" and "ab " tie (.25 x 1 = .125 x 2): the shorter, accepted,
    #            then 5, 6, 7 shown and wrong: 2 saved, 5 shown.
    # .125 < t <= .25: the same 2 saved, 4 shown (not 5). t > .25: nothing. Most saved: 2, at .05 .. .25 -> .25.
    # Net at a price c: 2 - 3c at t <= .125, 2 - 2c at .125 < t <= .25, 0 above: at c = 0.5, .25 still (net 1);
    # at the default c = 1, .25 nets 0, a tie with showing nothing: the highest threshold, 0.95.
    free = SuggestionPolicy(attention_cost=0.0)
    policy, rows = tune_policy(Bigram(), [Document("d", "ab ab ac")], EvalConfig(), free)
    assert policy == SuggestionPolicy(threshold=0.25, tuned=True, attention_cost=0.0)
    half, _ = tune_policy(Bigram(), [Document("d", "ab ab ac")], EvalConfig(), free.with_attention_cost(0.5))
    assert half.threshold == 0.25
    default, priced = tune_policy(Bigram(), [Document("d", "ab ab ac")], EvalConfig(), DEFAULT_POLICY)
    assert default == SuggestionPolicy(threshold=0.95, tuned=True)
    assert {r["threshold"]: r["net_keystrokes_saved_per_100"] for r in priced}[0.1] == pytest.approx(-100 / 7)
    by_threshold = {r["threshold"]: r for r in rows}
    assert by_threshold[0.1]["keystrokes_saved_per_100"] == pytest.approx(200 / 7, rel=1e-12)
    assert by_threshold[0.1]["shown_per_100"] == pytest.approx(500 / 7, rel=1e-12)
    assert by_threshold[0.25]["shown_per_100"] == pytest.approx(400 / 7, rel=1e-12)
    assert by_threshold[0.25]["acceptance_rate"] == 0.5
    assert by_threshold[0.3]["keystrokes_saved_per_100"] == 0.0
    with pytest.raises(ValueError, match="at least one validation document"):
        tune_policy(Bigram(), [], EvalConfig())


CORPUS = corpus_from_text("toy.py", "\n\n".join(f"def add{i}(a, b):\n    return a + b * {i}\n" for i in range(30)))


@pytest.fixture
def bundle(tmp_path):
    model, tok = tiny_model(seed=0, spread=20.0)
    assert tok.chars == CharTokenizer.from_text(TEXT).chars
    return save_bundle(tmp_path / "b", model, tok, metrics={}, command=["test"], corpus=CORPUS)


def test_record_policy_writes_the_policy_and_a_new_version_that_loads(bundle):
    before = json.loads((bundle / MANIFEST).read_text())
    assert policy_from_manifest(before) == DEFAULT_POLICY  # nothing recorded yet
    policy = SuggestionPolicy(threshold=0.35, tuned=True)
    manifest = record_policy(bundle, policy)
    on_disk = json.loads((bundle / MANIFEST).read_text())
    assert on_disk == manifest and on_disk["generation"]["suggestion"] == {
        "version": 1,
        "threshold": 0.35,
        "max_chars": 24,
        "min_chars": 2,
        "tuned": True,
        "attention_cost": 1.0,
    }
    assert {k: v for k, v in on_disk["generation"].items() if k != "suggestion"} == before["generation"]
    assert on_disk["version"] != before["version"] and on_disk["version"] == manifest_version(on_disk)
    predictor, loaded = load_predictor(bundle)
    assert loaded["version"] == on_disk["version"] and policy_from_manifest(loaded) == policy
    assert predictor.kind == "transformer"


@pytest.mark.parametrize(
    "record, words",
    [
        ({"version": 1, "threshold": 3.0, "max_chars": 24, "min_chars": 2, "tuned": True}, "threshold must lie"),
        ({"threshold": 0.5, "surprise": 1}, "generation.suggestion must be an object"),
        ({"threshold": 0.5, "version": 9}, "version 9 is not 1"),
    ],
)
def test_an_invalid_recorded_policy_is_refused_by_load_predictor(bundle, record, words):
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["generation"]["suggestion"] = record
    manifest["version"] = manifest_version(manifest)  # a consistent version: only the policy is wrong
    write_manifest(bundle, manifest)
    with pytest.raises(BundleError) as err:
        load_predictor(bundle)
    assert words in str(err.value) and "python -m core tune" in str(err.value)


def test_a_record_that_would_not_load_is_rolled_back(bundle, monkeypatch):
    before = json.loads((bundle / MANIFEST).read_text())
    monkeypatch.setattr(SuggestionPolicy, "to_dict", lambda self: {"threshold": 7.0})
    with pytest.raises(BundleError, match="threshold must lie"):
        record_policy(bundle, SuggestionPolicy(threshold=0.5))
    assert json.loads((bundle / MANIFEST).read_text()) == before
    load_predictor(bundle)  # still loads


def test_tune_bundle_records_a_grid_threshold(bundle, tmp_path):
    copy = shutil.copytree(bundle, tmp_path / "copy")
    policy, rows, manifest = tune_bundle(copy, corpus=CORPUS, config=EvalConfig(typing_chars=200, segment_chars=50))
    assert policy.tuned and policy.threshold in THRESHOLDS
    assert [r["threshold"] for r in rows] == list(THRESHOLDS)
    best = max(r["net_keystrokes_saved_per_100"] for r in rows)
    assert policy.threshold == max(r["threshold"] for r in rows if r["net_keystrokes_saved_per_100"] == best)
    assert policy.attention_cost == 1.0  # the default price, recorded


def test_tune_bundle_records_the_price_it_was_tuned_at(bundle, tmp_path):
    copy = shutil.copytree(bundle, tmp_path / "copy")
    quick = EvalConfig(typing_chars=200, segment_chars=50)
    policy, rows, manifest = tune_bundle(copy, corpus=CORPUS, config=quick, attention_cost=3.0)
    assert manifest["generation"]["suggestion"]["attention_cost"] == 3.0 and policy.attention_cost == 3.0
    assert all(r["attention_cost"] == 3.0 for r in rows)
    again, _, _ = tune_bundle(copy, corpus=CORPUS, config=quick)  # no price given: the recorded one
    assert again.attention_cost == 3.0
    with pytest.raises(ValueError, match="attention_cost must lie in 0..100"):
        tune_bundle(copy, corpus=CORPUS, config=quick, attention_cost=-1.0)
    assert (
        policy_from_manifest(load_predictor(copy)[1]) == policy
        and manifest["version"] != json.loads((bundle / MANIFEST).read_text())["version"]
    )


def test_a_short_run_is_tuned_on_about_5000_characters_and_a_long_one_on_20000():
    from core.model.train_config import SHORT_RUN_ITERS
    from core.release.evaluation.tuning import tuning_config_for
    from core.release.evaluation.typing_sim import typing_segments

    docs = [Document(f"d{i}", "x" * 5000) for i in range(21)]  # the stdlib's 21 validation documents, in size

    def typed(config):
        return sum(s.stop - s.start for s in typing_segments(docs, config))

    assert 5_000 <= typed(tuning_config_for(SHORT_RUN_ITERS)) <= 5_000 + 21 * 100  # not 21 stretches of 500
    assert typed(tuning_config_for(SHORT_RUN_ITERS + 1)) >= 20_000
