"""The Release page: its rubric is check_release's own, a model trained without the causal mask is refused
with its causality figure while `current` stays put, a passing model is promoted and rolled back (the log
table gains each row), and the baseline comparison holds evaluate_bundle's numbers."""
import random
import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import ui.models
from apptest import APP, all_text, decode, figures, open_page
from core.bundle import load_bundle, save_bundle
from core.corpus import load_corpus
from core.evaluation import EvalConfig, evaluate_bundle
from core.registry import promote, read_current, read_log
from core.release import ReleasePolicy, causality_check, check_release
from core.runs import train_and_save
from core.training import TrainConfig

COMPARE = EvalConfig(max_positions=4000, typing_chars=600, latency_samples=10)  # the caps the page states
# Setting up an earlier version through the registry's own API: the full gate with small evaluation caps.
SETUP_POLICY = ReleasePolicy(evaluation=EvalConfig(max_positions=512, typing_chars=200, latency_samples=0))
LATENCY_ROWS = {"latency p50 ms (cached)", "latency p95 ms (cached)", "latency p50 ms (uncached)",
                "latency p95 ms (uncached)"}


def copy_text(lines: int = 1200) -> str:
    """Random five-letter words, each written twice ("cagfe cagfe"). After the space the next five characters
    are fixed by characters six back, which a 5-gram (four characters of context) cannot see and a tiny
    transformer learns to copy in a few hundred steps: a model that passes the default gate in seconds."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefgh") for _ in range(5)) for _ in range(lines)]
    pairs = [f"{w} {w}" for w in words]
    return "\n".join("\n".join(pairs[i:i + 6]) + "\n" for i in range(0, len(pairs), 6))


def _config(iters: int, causal: bool) -> TrainConfig:
    return TrainConfig(batch_size=16, max_iters=iters, warmup_iters=10, eval_interval=iters, eval_iters=1,
                       learning_rate=1e-2, min_lr=1e-3, causal=causal, num_threads=1)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("release_page")
    (root / "copy.txt").write_text(copy_text())
    corpus = load_corpus(root / "copy.txt")
    command = ["tests/test_page_release.py"]
    _, good = train_and_save(corpus, "tiny", _config(300, True), root / "good", command=command)
    _, leak = train_and_save(corpus, "tiny", _config(100, False), root / "leak", command=command)
    # An earlier known-good version: the same weights under other metrics, so another version hash.
    a = load_bundle(good)
    older = save_bundle(root / "older", a.model, a.tokenizer, metrics={"run": "older"}, command=command,
                        corpus=corpus, train_config=_config(300, True))
    return {"good": good, "leak": leak, "older": older}


@pytest.fixture
def registry(bundles, tmp_path, monkeypatch, fresh_streamlit_caches):
    """A fresh registry whose current version is `older`, promoted through core.registry."""
    reg = tmp_path / "registry"
    result = promote(bundles["older"], reg, policy=SETUP_POLICY)
    assert result.promoted, result.reason
    monkeypatch.setattr(ui.models, "REGISTRY_DIR", reg)
    return reg


def open_release(path) -> AppTest:
    """The Release page with the bundle at `path` selected in the sidebar."""
    return open_page("release", timeout=120, bundle=("bundle under test", path))


def click(at, key) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def table(at, first_column: str):
    """The page's dataframe whose first column is `first_column`."""
    found = [d.value for d in at.dataframe if list(d.value.columns)[0] == first_column]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def rubric_table(at):
    """The rubric as the page shows it, in full, in a static table (index: the check; cells escaped markdown)."""
    [rubric] = at.table
    return rubric.value.reset_index().map(lambda cell: re.sub(r"\\(.)", r"\1", cell))  # the page's markdown escapes


def shown(at) -> str:
    """The page's text with the markdown escapes the page puts on file text removed."""
    return re.sub(r"\\(.)", r"\1", all_text(at))


def version(path) -> str:
    return load_bundle(path).version


def test_the_rubric_table_is_check_releases_rubric_for_the_selected_bundle(bundles, registry):
    at = click(open_release(bundles["good"]), "rel_run_checks")
    expected = check_release(bundles["good"]).rubric  # the default policy, computed apart from the page
    assert expected.passed, expected.failures()
    rubric = rubric_table(at)
    assert rubric[["check", "result", "figure", "threshold", "detail"]].to_dict("records") == expected.table()
    assert all(rubric["guards against"].str.len() > 20)  # every check is explained, including any new one
    assert f"{len(expected.checks)} of {len(expected.checks)} checks pass" in shown(at)


def test_a_model_trained_without_the_mask_is_refused_with_its_causality_figure_and_current_stays(bundles, registry):
    before = read_current(registry)
    at = open_release(bundles["leak"])
    assert "This bundle is marked unsafe" in at.error[0].value  # said at the top, before anything is pressed
    click(at, "rel_run_checks")
    rows = rubric_table(at).set_index("check")
    figure = causality_check(load_bundle(bundles["leak"]).model).figure  # measured again, apart from the page
    assert rows.loc["causality", "result"] == "FAIL" and rows.loc["causality", "figure"] == figure
    assert f"failed: marked safe (false); causality ({figure})" in shown(at)

    click(at, "rel_promote")
    text = shown(at)
    assert "Refused: version " + version(bundles["leak"]) in text and "causality" in text
    assert read_current(registry) == before  # not a field of the pointer moved
    assert not (registry / "versions" / version(bundles["leak"])).exists()
    newest = table(at, "time").iloc[0]
    assert (newest["event"], newest["version"]) == ("refuse", version(bundles["leak"]))
    assert "causality" in newest["failed checks"].split(", ")
    assert read_log(registry)[-1]["event"] == "refuse"


def test_a_passing_bundle_is_promoted_and_rolled_back_and_the_log_table_gains_each_row(bundles, registry):
    older, good = version(bundles["older"]), version(bundles["good"])
    at = open_release(bundles["good"])
    assert len(table(at, "time")) == 1  # the set-up promotion
    click(at, "rel_promote")  # the checks have not run on the page: promote runs them first
    assert read_current(registry)["version"] == good and read_current(registry)["history"] == [older]
    assert f"Promoted: version {good} is now current (was {older})" in shown(at)
    log = table(at, "time")
    assert len(log) == 2 and (log.iloc[0]["event"], log.iloc[0]["version"], log.iloc[0]["previous"]) == (
        "promote", good, older)
    assert at.json[0].value and read_log(registry)[-1]["event"] == "promote"
    roles = dict(table(at, "version")[["version", "role"]].values)
    assert roles == {older: "earlier current", good: "current"}

    at.text_input(key="rel_rollback_reason").set_value("users report bad suggestions")
    click(at, "rel_rollback")
    assert read_current(registry)["version"] == older
    log = table(at, "time")
    assert len(log) == 3 and (log.iloc[0]["event"], log.iloc[0]["version"]) == ("rollback", older)
    assert "users report bad suggestions" in log.iloc[0]["reason"]
    assert at.button(key="rel_rollback").disabled  # nothing older than the first version


def test_the_comparison_and_the_slice_chart_hold_evaluate_bundles_numbers(bundles, registry):
    at = click(open_release(bundles["good"]), "rel_compare")
    text = shown(at)
    assert "at most 4,000 scored positions, 600 characters of simulated typing and 10 latency samples" in text
    expected = evaluate_bundle(bundles["good"], config=COMPARE, with_baselines=True)
    rows = table(at, "metric").set_index("metric")
    assert set(rows.index) == {r["metric"] for r in expected.comparison}
    for row in expected.comparison:
        for kind in ("rule", "ngram", "transformer"):
            got = rows.loc[row["metric"], kind]
            if row["metric"] in LATENCY_ROWS:  # wall-clock: present where measured, not equal
                assert (row[kind] is None) == (got is None or np.isnan(got))
            elif row[kind] is None:
                assert got is None or np.isnan(got)
            else:
                assert got == pytest.approx(row[kind], rel=1e-12), (row["metric"], kind)

    [fig] = figures(at)
    report = expected.report
    slices = [s for s in report.slices if s.metrics.top1 is not None]
    bars = fig["data"][0]
    assert list(bars["x"]) == [s.label for s in slices]
    np.testing.assert_allclose(decode(bars["y"]).astype(float), [s.metrics.top1 for s in slices], rtol=1e-12)
    lows = decode(bars["y"]).astype(float) - decode(bars["error_y"]["arrayminus"]).astype(float)
    highs = decode(bars["y"]).astype(float) + decode(bars["error_y"]["array"]).astype(float)
    np.testing.assert_allclose(lows, [s.metrics.top1_ci.low for s in slices], atol=1e-12)
    np.testing.assert_allclose(highs, [s.metrics.top1_ci.high for s in slices], atol=1e-12)
    worst = next(w for w in report.worst if w.metric == "top1")
    assert f"the worst slice (among those with at least 50 positions) is {worst.slice} at {worst.value:.3f}" in text
    widths = bars["marker"]["line"]["width"]
    assert widths[[s.label for s in slices].index(worst.slice)] == 2  # the worst bar is the outlined one


def test_with_the_current_version_damaged_the_page_says_what_is_served_and_still_offers_the_registry(registry):
    current = read_current(registry)["version"]
    weights = registry / "versions" / current / "bundle" / "model.safetensors"
    weights.chmod(0o600)  # installed read-only: damaging it takes intent
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()  # no bundle of this session: the sidebar selects the registry's released version, now the n-gram
    at.switch_page("pages/release.py").run()
    assert not at.exception, [e.value for e in at.exception]
    text = shown(at)
    assert "No transformer bundle is selected" in text
    assert f"the current version {current} fails to load or verify" in text.lower() and "n-gram baseline" in text
    assert not at.table and len(table(at, "time")) == 1  # no rubric to show; the log is still there
    assert read_current(registry)["version"] == current  # serving a fallback never moves the pointer
