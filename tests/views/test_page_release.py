"""The Release page: its rubric is check_release's own, a model trained without the causal mask is refused
with its causality figure while `current` stays put, a passing model is promoted and rolled back (the log
table gains each row), and the baseline comparison holds evaluate_bundle's numbers. Promote and rollback are
the teacher's: read-only without a configured passcode, refused with a wrong one, and, with the right one,
confirmed in a dialog whose reason and session id reach the registry's log; the passcode is never shown. The
figures against the baselines the page shows beside the rubric are the rubric summary's own (the gate's), and
the quick comparison is labelled as a preview with its caps."""

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from apptest import APP, all_text, decode, open_page, page_file, picture_figures, unescaped
from apptest import figures as figures_of
from streamlit import config
from streamlit.testing.v1 import AppTest

import ui.models
from core.model.bundle import load_bundle, save_bundle
from core.model.corpus import corpus_from_text, load_corpus
from core.model.train_config import TrainConfig
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.evaluation import evaluate_bundle
from core.release.gate.checks import causality_check
from core.release.gate.gate import check_release
from core.release.gate.rubric import ReleasePolicy
from core.release.registry.registry import promote
from core.release.registry.registry_log import LOG, read_log
from core.release.registry.served import CURRENT, read_current
from core.runs import run_record
from core.runs.job import train_and_save
from core.settings import PASSCODE_ENV
from views.release.rubric import decided_on

COMPARE = EvalConfig(max_positions=4000, typing_chars=600, latency_samples=10)  # the caps the page states
# Setting up an earlier version through the registry's own API: the full gate with small evaluation caps.
SETUP_POLICY = ReleasePolicy(evaluation=EvalConfig(max_positions=512, typing_chars=200, latency_samples=0))
PASSCODE = "pass-7f3a9c-teacher"  # the fixed test passcode; distinctive, so any echo of it is found
LATENCY_ROWS = {"latency p50 ms per suggestion", "latency p95 ms per suggestion"}


def copy_text(lines: int = 1200) -> str:
    """Random five-letter words, each written twice ("cagfe cagfe"). After the space the next five characters
    are fixed by characters six back, which a 5-gram (four characters of context) cannot see and a tiny
    transformer learns to copy in a few hundred steps: a model that passes the default gate in seconds."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefgh") for _ in range(5)) for _ in range(lines)]
    pairs = [f"{w} {w}" for w in words]
    return "\n".join("\n".join(pairs[i : i + 6]) + "\n" for i in range(0, len(pairs), 6))


def _config(iters: int, causal: bool) -> TrainConfig:
    return TrainConfig(
        batch_size=16,
        max_iters=iters,
        warmup_iters=10,
        eval_interval=iters,
        eval_iters=1,
        learning_rate=1e-2,
        min_lr=1e-3,
        causal=causal,
        num_threads=1,
        val_fraction=0.3,  # 3 of the text's 10 documents held out: a bootstrap interval over documents needs 2+
    )


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("release_page")
    (root / "copy.txt").write_text(copy_text())
    corpus = load_corpus(root / "copy.txt")
    command = ["tests/views/test_page_release.py"]
    _, good = train_and_save(corpus, "tiny", _config(300, True), root / "good", command=command)
    _, leak = train_and_save(corpus, "tiny", _config(100, False), root / "leak", command=command)
    # An earlier known-good version: the same weights under other metrics, so another version hash.
    a = load_bundle(good)
    older = save_bundle(
        root / "older",
        a.model,
        a.tokenizer,
        metrics={"run": "older"},
        command=command,
        corpus=corpus,
        train_config=_config(300, True),
    )
    return {"good": good, "leak": leak, "older": older}


@pytest.fixture
def no_secrets_file(tmp_path):
    """Streamlit secrets read from a file that does not exist (whatever secrets.toml the machine has)."""
    before = config.get_option("secrets.files")
    config.set_option("secrets.files", [str(tmp_path / "absent" / "secrets.toml")])
    yield
    config.set_option("secrets.files", before)


@pytest.fixture
def registry(bundles, tmp_path, monkeypatch, fresh_streamlit_caches, no_secrets_file):
    """A fresh registry whose current version is `older`, promoted through core.release.registry.registry; the server
    operator configured the teacher passcode PASSCODE (tests of the unconfigured page remove it). The runs folder is the
    test's own too: the release check's lock lives there, and xdist workers sharing the repository's would refuse each
    other's checks."""
    monkeypatch.setattr(ui.models, "RUNS_DIR", tmp_path / "runs")
    reg = tmp_path / "registry"
    result = promote(bundles["older"], reg, policy=SETUP_POLICY)
    assert result.promoted, result.reason
    monkeypatch.setattr(ui.models, "REGISTRY_DIR", reg)
    monkeypatch.setenv(PASSCODE_ENV, PASSCODE)
    return reg


def registry_files(reg) -> tuple[bytes, bytes]:
    """The registry's `current` pointer and log, byte for byte: what an action would change."""
    return (reg / CURRENT).read_bytes(), (reg / LOG).read_bytes()


def open_release(path) -> AppTest:
    """The Release page with the bundle at `path` selected in the sidebar."""
    return open_page("release", timeout=120, bundle=("bundle under test", path))


def click(at, key) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def unlock(at, passcode: str = PASSCODE) -> AppTest:
    """Type `passcode` into the teacher form (set_value: past the browser's max_chars) and press Unlock."""
    at.text_input(key="teacher_passcode_input").set_value(passcode)
    return click(at, "teacher_unlock")


def confirm(at, action: str, why: str) -> AppTest:
    """Press Promote or Roll back (`action`), type the reason in the dialog and confirm it."""
    click(at, f"rel_{action}")
    at.text_input(key=f"rel_{action}_why").input(why)
    return click(at, f"rel_{action}_confirm")


def rendered(at) -> str:
    """Every element the page rendered, as its protobuf text (labels, values, markdown, widget states)."""

    def walk(node):
        if getattr(node, "proto", None) is not None:
            yield str(node.proto)
        for child in getattr(node, "children", {}).values():
            yield from walk(child)

    return "\n".join(part for root in at for part in walk(root))


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


@pytest.mark.numerics
def test_the_rubric_table_is_check_releases_rubric_for_the_selected_bundle(bundles, registry):
    at = click(unlock(open_release(bundles["good"])), "rel_run_checks")
    expected = check_release(bundles["good"]).rubric  # the default policy, computed apart from the page
    assert expected.passed, expected.failures()
    rubric = rubric_table(at)
    assert rubric[["check", "result", "figure", "threshold", "detail"]].to_dict("records") == expected.table()
    assert all(rubric["guards against"].str.len() > 20)  # every check is explained, including any new one
    assert f"{len(expected.checks)} of {len(expected.checks)} checks pass" in shown(at)

    # The figures against the baselines are the rubric summary's: the gate's own, as `evaluate --compare` prints
    predictors = expected.summary["predictors"]
    gate = table(at, "predictor").set_index("predictor")
    assert list(gate.index) == ["rule", "n-gram", "transformer"]
    for kind, name in (("rule", "rule"), ("ngram", "n-gram"), ("transformer", "transformer")):
        figures = predictors[kind]
        row = gate.loc[name]
        for key, column in (("net_keystrokes_saved", "net keystrokes"), ("keystrokes_saved", "keystrokes")):
            assert row[f"{column} saved per 100 chars"] == figures[f"{key}_per_100"]
            ci = figures[f"{key}_ci"]
            assert (row[f"{column} 95% interval low"], row[f"{column} 95% interval high"]) == (ci[0], ci[1])
        assert row["attention cost (keystrokes)"] == figures["attention_cost"] > 0
        assert (row["loss (nats/char)"], row["threshold"]) == (figures["loss"], figures["threshold"])
        assert (row["loss 95% interval low"], row["loss 95% interval high"]) == tuple(figures["loss_ci"])
        assert row["suggestions shown per 100 chars"] == figures["shown_per_100"]
        assert row["documents"] == figures["documents"] == 3
    # The picture draws the figure the keystrokes check decides on: NET keystrokes saved, with its intervals
    [fig] = figures_of(at)
    assert_draws(fig, expected.summary)
    low, high = predictors["transformer"]["net_keystrokes_saved_ci"]
    mine = predictors["transformer"]["net_keystrokes_saved_per_100"]
    assert f"transformer {mine:.2f} [{low:.2f}, {high:.2f}]" in exact_figures(at)
    assert "The keystrokes check: pass: " in exact_figures(at)
    # the keystrokes check's own figure, as the rubric table shows it, names the same three intervals
    keystrokes = rubric.set_index("check").loc["beats baselines: keystrokes", "figure"]
    assert keystrokes.startswith(f"{mine:.2f} [{low:.2f}, {high:.2f}] vs rule ")


def test_a_model_trained_without_the_mask_is_refused_with_its_causality_figure_and_current_stays(bundles, registry):
    before = read_current(registry)
    at = open_release(bundles["leak"])
    assert "This bundle is marked unsafe" in at.error[0].value  # said at the top, before anything is pressed
    click(unlock(at), "rel_run_checks")
    rows = rubric_table(at).set_index("check")
    figure = causality_check(load_bundle(bundles["leak"]).model).figure  # measured again, apart from the page
    assert rows.loc["causality", "result"] == "FAIL" and rows.loc["causality", "figure"] == figure
    assert "failed: marked safe, causality" in shown(at)  # by name in the box; the figures one click away
    assert f"causality: {figure} (rule: " in exact_figures(at)

    confirm(at, "promote", "try the maskless run")  # unlocked above, for the checks
    text = shown(at)
    assert "Refused: version " + version(bundles["leak"]) in text and "causality" in text
    assert read_current(registry) == before  # not a field of the pointer moved
    assert not (registry / "versions" / version(bundles["leak"])).exists()
    newest = table(at, "time").iloc[0]
    assert (newest["event"], newest["version"]) == ("refuse", version(bundles["leak"]))
    assert "causality" in newest["failed checks"].split(", ")
    assert read_log(registry)[-1]["event"] == "refuse"
    assert read_log(registry)[-1]["why"] == "try the maskless run"  # a refusal is logged with its reason too


def test_a_passing_bundle_is_promoted_and_rolled_back_and_the_log_table_gains_each_row(bundles, registry):
    older, good = version(bundles["older"]), version(bundles["good"])
    at = open_release(bundles["good"])
    assert len(table(at, "time")) == 1  # the set-up promotion
    confirm(unlock(at), "promote", "the copy model passes")  # the checks have not run: promote runs them first
    assert read_current(registry)["version"] == good and read_current(registry)["history"] == [older]
    assert f"Promoted: version {good} is now current (was {older})" in shown(at)
    log = table(at, "time")
    assert len(log) == 2 and (log.iloc[0]["event"], log.iloc[0]["version"], log.iloc[0]["previous"]) == (
        "promote",
        good,
        older,
    )
    assert at.json[0].value and read_log(registry)[-1]["event"] == "promote"
    roles = dict(table(at, "version")[["version", "role"]].values)
    assert roles == {older: "earlier current", good: "current"}

    confirm(at, "rollback", "users report bad suggestions")
    assert read_current(registry)["version"] == older
    log = table(at, "time")
    assert len(log) == 3 and (log.iloc[0]["event"], log.iloc[0]["version"]) == ("rollback", older)
    assert "users report bad suggestions" in log.iloc[0]["reason"]
    assert at.button(key="rel_rollback").disabled  # nothing older than the first version


def test_the_comparison_and_the_slice_chart_hold_evaluate_bundles_numbers(bundles, registry):
    at = click(open_release(bundles["good"]), "rel_compare")
    text = shown(at)
    assert "A quick preview, not the gate's figures: at most 4,000 scored positions, 600 characters" in text
    assert "600 characters of simulated typing and 10 latency samples" in text
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

    [fig] = figures_of(at)
    report = expected.report
    slices = [s for s in report.slices if s.metrics.top1 is not None]
    bars = fig["data"][0]
    assert list(bars["x"]) == [s.label for s in slices]
    np.testing.assert_allclose(decode(bars["y"]).astype(float), [s.metrics.top1 for s in slices], rtol=1e-12)
    lows = decode(bars["y"]).astype(float) - decode(bars["error_y"]["arrayminus"]).astype(float)
    highs = decode(bars["y"]).astype(float) + decode(bars["error_y"]["array"]).astype(float)
    # a slice inside one document has no bootstrap interval: no error bar, low = high = top-1
    cis = [
        (s.metrics.top1, s.metrics.top1)
        if s.metrics.top1_ci is None
        else (s.metrics.top1_ci.low, s.metrics.top1_ci.high)
        for s in slices
    ]
    np.testing.assert_allclose(lows, [lo for lo, _ in cis], atol=1e-12)
    np.testing.assert_allclose(highs, [hi for _, hi in cis], atol=1e-12)
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
    at.switch_page(page_file("release")).run()
    assert not at.exception, [e.value for e in at.exception]
    text = shown(at)
    assert "No transformer bundle is selected" in text
    assert f"the current version {current} fails to load or verify" in text.lower() and "n-gram baseline" in text
    assert not at.table and len(table(at, "time")) == 1  # no rubric to show; the log is still there
    assert read_current(registry)["version"] == current  # serving a fallback never moves the pointer


def test_a_run_kept_with_its_text_is_checked_without_an_upload(bundles, registry, tmp_path, monkeypatch):
    """A bundle trained on an upload whose run record kept the text (the run record): the page takes the
    held-out split from the record, asks for no upload, and its rubric is check_release's on that same text."""
    upload = corpus_from_text("copy.txt", copy_text())  # as the Training page reads an upload: source upload:...
    good = load_bundle(bundles["good"])
    runs_dir = tmp_path / "runs"
    path = save_bundle(
        runs_dir / "job1" / run_record.BUNDLE,
        good.model,
        good.tokenizer,
        metrics=good.manifest["training"]["metrics"],
        command=["tests/views/test_page_release.py", "kept run"],
        corpus=upload,
        train_config=_config(300, True),
    )
    run_record.write_record(
        runs_dir / "job1",
        bundle_path=path,
        version=version(path),
        label="kept run",
        owner_token="someone-else",
        corpus_text=upload.text,
    )
    monkeypatch.setattr(ui.models, "RUNS_DIR", runs_dir)
    at = open_release(path)
    assert not at.get("file_uploader")  # nothing to upload: the record has the text
    assert "Held-out text from the run's own record" in shown(at)
    assert "cannot read back" not in shown(at)
    click(unlock(at), "rel_run_checks")
    expected = check_release(path, corpus=upload).rubric
    assert expected.passed, expected.failures()
    assert rubric_table(at)[["check", "result", "figure", "threshold", "detail"]].to_dict("records") == (
        expected.table()
    )
    without = check_release(path).rubric  # the same bundle without its text: the held-out checks cannot run
    assert without.table() != expected.table()

    (runs_dir / "job1" / run_record.CORPUS_COPY).write_text("changed")  # a copy that no longer matches: ask again
    at = open_release(path)
    assert at.get("file_uploader") and "cannot read back" in shown(at)


# ---- teacher only ----------------------------------------------------------------------------------

ACTIONS = ("rel_promote", "rel_rollback")


def forge_click(at, key) -> AppTest:
    """A click on a button the page shows disabled, as a crafted websocket message would send it (AppTest's
    click refuses disabled widgets, so the trigger is set on the element directly)."""
    at.button(key=key)._value = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def promote_good_and_reopen(bundles, registry) -> AppTest:
    """`good` promoted over `older` through core.release.registry.registry (so a rollback is possible), the page
    opened on it."""
    assert promote(bundles["good"], registry, policy=SETUP_POLICY).promoted
    return open_release(bundles["good"])


def test_without_a_passcode_the_page_is_read_only_and_says_how_to_enable_it(bundles, registry, monkeypatch):
    monkeypatch.delenv(PASSCODE_ENV)
    at = promote_good_and_reopen(bundles, registry)
    before = registry_files(registry)
    assert all(at.button(key=k).disabled for k in ACTIONS)
    assert not [t for t in at.text_input if "passcode" in (t.key or "")]  # no passcode to type: nothing can unlock
    [how] = [i.value for i in at.info if "no teacher passcode is configured" in i.value]
    assert f"{PASSCODE_ENV}='choose-a-passcode' make run" in how and ".streamlit/secrets.toml" in how
    # The recorded rubric and the registry's status still show: the versions and the log are listed; the checks are
    # the teacher's, so with no passcode nobody runs them here.
    assert not [b for b in at.button if b.key == "rel_run_checks"] and "run by the teacher" in shown(at)
    assert "stored in the registry when it was promoted" in shown(at) and len(table(at, "time")) == 2
    assert [m.value for m in at.metric][:1] == [version(bundles["good"])]
    # A forged click on a disabled button (a crafted websocket message) opens no confirmation and changes nothing.
    for action in ACTIONS:
        forge_click(at, action)
        assert not [t for t in at.text_input if t.key == f"{action}_why"]
    assert registry_files(registry) == before


def test_a_learner_sees_the_recorded_rubric_and_no_release_check_to_run(bundles, registry, monkeypatch):
    """The release checks take minutes of the server's time: a learner's session is shown the rubric the registry
    stored and a line saying the teacher runs them, with no button, and a forged press runs nothing."""
    ran = []
    monkeypatch.setattr("core.release.gate.gate.check_release", lambda *a, **k: ran.append(a))
    at = promote_good_and_reopen(bundles, registry)
    assert not [b for b in at.button if b.key == "rel_run_checks"]
    assert "The release checks are run by the teacher" in shown(at)
    assert "stored in the registry when it was promoted" in shown(at)
    assert rubric_table(at)["result"].tolist()  # the recorded rubric, in full
    at.session_state["rel_run_checks"] = True  # a press of a button that is not there, as a crafted message sends it
    at.run()
    assert not at.exception and ran == []


def test_one_release_check_at_a_time_on_the_server(bundles, registry, tmp_path, monkeypatch):
    """A teacher's press while another worker's check holds the server's lock (in the runs folder) is told to wait
    and runs nothing; once it is let go, the press runs the check."""
    from filelock import FileLock

    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    monkeypatch.setattr(ui.models, "RUNS_DIR", runs_dir)
    ran = []

    def counted(path, **kwargs):
        ran.append(path)
        return check_release(path, **kwargs)

    monkeypatch.setattr("core.release.gate.gate.check_release", counted)
    at = unlock(open_release(bundles["good"]))
    other = FileLock(runs_dir / ".release-check.lock", thread_local=False)  # what another worker's check holds
    other.acquire(timeout=0)
    try:
        click(at, "rel_run_checks")
        assert ran == [] and any("Another release check is running" in w.value for w in at.warning)
    finally:
        other.release()
    click(at, "rel_run_checks")
    assert len(ran) == 1 and "in this session at" in shown(at)
    assert not any("Another release check is running" in w.value for w in at.warning)


def test_a_wrong_passcode_is_refused_and_the_registry_is_unchanged(bundles, registry):
    at = promote_good_and_reopen(bundles, registry)
    before = registry_files(registry)
    assert all(at.button(key=k).disabled for k in ACTIONS)
    for wrong, said in (
        ("pass-7f3a9c-teachers", "not the teacher passcode"),
        (PASSCODE.upper(), "not the teacher"),
        (PASSCODE + "x" * 200, "not the teacher passcode"),  # cut at max_chars by the server
        ("", "Type the teacher passcode"),
    ):
        unlock(at, wrong)
        assert any(said in e.value for e in at.error), [e.value for e in at.error]
        assert all(at.button(key=k).disabled for k in ACTIONS)
        for action in ACTIONS:  # forged clicks open nothing
            forge_click(at, action)
            assert not [t for t in at.text_input if t.key == f"{action}_why"]
    assert registry_files(registry) == before
    assert at.session_state["teacher_unlocked"] is False


def test_the_right_passcode_and_a_confirmed_reason_change_the_registry_with_actor_and_reason(bundles, registry):
    older, good = version(bundles["older"]), version(bundles["good"])
    at = promote_good_and_reopen(bundles, registry)
    unlock(at)
    assert not any(at.button(key=k).disabled for k in ACTIONS)
    assert "unlocked for this browser session only" in shown(at)

    click(at, "rel_rollback")  # the dialog names the version the class will be served, and nothing moved yet
    dialog = shown(at)
    assert f"The whole class is served version **{older}** again" in dialog
    assert f"The class is served version **{good}** now" in dialog
    before = registry_files(registry)
    click(at, "rel_rollback_confirm")  # no reason given: refused inside the dialog
    assert "a reason is required" in shown(at) and registry_files(registry) == before
    at.text_input(key="rel_rollback_why").input("  the class reports\tbad suggestions ")
    click(at, "rel_rollback_confirm")
    assert read_current(registry)["version"] == older and read_current(registry)["history"] == []
    session = at.session_state["lab_session_id"]  # this session's id, as ui.models.session_id keeps it
    assert len(session) == 32
    entry = read_log(registry)[-1]
    assert (entry["event"], entry["version"], entry["actor"], entry["why"]) == (
        "rollback",
        older,
        session,
        "the class reports bad suggestions",
    )
    assert not [t for t in at.text_input if t.key == "rel_rollback_why"]  # the dialog closed
    newest = table(at, "time").iloc[0]
    assert (newest["by (session)"], newest["why (teacher)"]) == (session, "the class reports bad suggestions")

    click(at, "rel_promote")
    assert f"the whole class is served version **{good}** from now on" in shown(at)
    click(at, "rel_promote_cancel")  # Cancel closes the dialog and changes nothing
    assert not [t for t in at.text_input if t.key == "rel_promote_why"] and read_current(registry)["version"] == older
    confirm(at, "promote", "fixed: serve the copy model again")
    assert read_current(registry)["version"] == good
    entry = read_log(registry)[-1]
    assert (entry["event"], entry["version"], entry["actor"], entry["why"]) == (
        "promote",
        good,
        session,
        "fixed: serve the copy model again",
    )

    click(at, "teacher_lock")  # locking again disables both actions
    assert all(at.button(key=k).disabled for k in ACTIONS)


def test_the_passcode_is_never_rendered_nor_kept_in_the_session(bundles, registry):
    at = promote_good_and_reopen(bundles, registry)
    unlock(at, PASSCODE + "-wrong")
    assert PASSCODE not in rendered(at) and PASSCODE not in repr(at.session_state.to_dict())
    unlock(at)
    assert at.session_state["teacher_unlocked"] is True  # it did unlock: the checks below are not vacuous
    click(at, "rel_rollback")
    for state in (rendered(at), repr(at.session_state.to_dict()), repr(dict(at.query_params))):
        assert PASSCODE not in state
    assert "pass-7f3a9c" not in rendered(at)  # not even a prefix of it


# ---- the picture: the gate's comparison first ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "default"


def keystroke_bars(fig) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(predictors, keystrokes saved, interval lows, interval highs) as the picture's bar chart draws them."""
    bars = fig["data"][0]
    y = decode(bars["y"]).astype(float)
    return (
        list(bars["x"]),
        y,
        y - decode(bars["error_y"]["arrayminus"]).astype(float),
        y + decode(bars["error_y"]["array"]).astype(float),
    )


def assert_draws(fig, recorded: dict) -> None:
    """The chart holds the rubric summary's net keystrokes saved (what the gate decides on) and their intervals,
    for the rule, the n-gram and the transformer in that order."""
    figures = [recorded["predictors"][k] for k in ("rule", "ngram", "transformer")]
    names, keys, lows, highs = keystroke_bars(fig)
    assert names == ["rule", "n-gram", "transformer"]
    assert fig["layout"]["title"]["text"].startswith("Net keystrokes saved per 100 characters")
    np.testing.assert_array_equal(keys, [f["net_keystrokes_saved_per_100"] for f in figures])
    np.testing.assert_allclose(lows, [f["net_keystrokes_saved_ci"][0] for f in figures], atol=1e-9)
    np.testing.assert_allclose(highs, [f["net_keystrokes_saved_ci"][1] for f in figures], atol=1e-9)


def test_a_rubric_from_before_the_price_of_attention_is_drawn_on_its_gross_figure():
    """decided_on: net keystrokes when every predictor has them, else gross (a rubric recorded before issue 28)."""
    both = {"rule": {"net_keystrokes_saved_per_100": 1.0, "keystrokes_saved_per_100": 2.0}}
    assert decided_on(both)[:2] == ("net_keystrokes_saved_per_100", "net_keystrokes_saved_ci")
    before = {"rule": {"keystrokes_saved_per_100": 2.0}, "n-gram": both["rule"]}
    assert decided_on(before)[:2] == ("keystrokes_saved_per_100", "keystrokes_saved_ci")


def test_the_page_opens_on_the_shipped_models_recorded_comparison_and_shows_no_server_path(
    tmp_path, monkeypatch, fresh_streamlit_caches, no_secrets_file
):
    """With the defaults (an empty registry, so the shipped bundle), the picture is the rubric `release check`
    recorded beside it, read here straight from the JSON file, and the verdict counts its checks; no path of the
    server appears."""
    registry = tmp_path / "registry"
    monkeypatch.setattr(ui.models, "REGISTRY_DIR", registry)
    recorded = json.loads((SHIPPED.parent / "default.release" / "rubric.json").read_text())
    assert recorded["version"] == load_bundle(SHIPPED).version, (
        "models/default.release/rubric.json is of another version than models/default: run "
        "`python -m core release check models/default` again"
    )
    at = open_page("release", timeout=120)
    [fig] = picture_figures(at)
    assert_draws(fig, recorded["summary"])
    checks = recorded["checks"]
    assert f"{sum(c['passed'] for c in checks)} of {len(checks)} checks pass" in shown(at)
    assert "recorded beside the bundle by the command python -m core release check" in shown(at)
    assert f"Version {recorded['version']} of Shipped default (Python standard library)" in shown(at)
    text = rendered(at)
    for path in (str(ROOT), str(registry), str(SHIPPED)):
        assert path not in text


SCIENTIFIC = re.compile(r"\d\.?\d*e[+-]\d+")  # 5.45e-12: a figure for whoever opens "The exact figures"


def exact_figures(at) -> str:
    """The text of the page's "The exact figures" expanders (a verdict's figures, one click away), unescaped."""
    found = [e for e in at.expander if e.label == "The exact figures"]
    assert found, [e.label for e in at.expander]
    return re.sub(r"\\(.)", r"\1", "\n".join(str(m.value) for e in found for m in e.markdown))


def test_the_keystrokes_verdict_under_the_picture_is_plain_words_with_its_figures_one_click_away(
    tmp_path, monkeypatch, fresh_streamlit_caches, no_secrets_file
):
    """Under the gate's chart (the shipped model's recorded rubric) the keystrokes check's verdict is a sentence
    first, without the check's jargon; its intervals, detail and rule, read here from the JSON file, are in the
    expander under it."""
    monkeypatch.setattr(ui.models, "REGISTRY_DIR", tmp_path / "registry")
    recorded = json.loads((SHIPPED.parent / "default.release" / "rubric.json").read_text())
    [check] = [c for c in recorded["checks"] if c["name"] == "beats baselines: keystrokes"]
    assert check["passed"] and check["value"] > 0  # the shipped model's intervals are apart
    at = open_page("release", timeout=120)
    [summary] = [unescaped(c.value) for c in at.caption if "per 100 characters" in unescaped(c.value)]
    first = summary.split(". ")[0]
    assert first.startswith("The transformer saves more keystrokes than the rule and the n-gram"), summary
    assert not SCIENTIFIC.search(summary) and "lower end" not in summary and "upper end" not in summary, summary
    exact = exact_figures(at)
    assert f"The keystrokes check: pass: {check['detail']}." in exact and f"Its rule: {check['threshold']}." in exact
    figures = recorded["summary"]["predictors"]["transformer"]
    low, high = figures["net_keystrokes_saved_ci"]
    assert f"transformer {figures['net_keystrokes_saved_per_100']:.2f} [{low:.2f}, {high:.2f}]" in exact


def test_a_promoted_version_opens_on_the_rubric_the_registry_stored_and_another_versions_is_ignored(bundles, registry):
    older = version(bundles["older"])
    stored = json.loads((registry / "versions" / older / "rubric.json").read_text())
    at = open_release(bundles["older"])
    [fig] = picture_figures(at)
    assert_draws(fig, stored["summary"])
    assert "stored in the registry when it was promoted" in shown(at)

    # `good` has no rubric of its own: one of another version placed beside it is not shown as its figures
    side = Path(bundles["good"]).parent / f"{Path(bundles['good']).name}.release"
    side.mkdir(exist_ok=True)
    (side / "rubric.json").write_text(json.dumps(stored))
    try:
        at = open_release(bundles["good"])
        assert picture_figures(at) == [] and "have not run for version" in shown(at)
    finally:
        (side / "rubric.json").unlink()
        side.rmdir()


def test_the_tradeoff_tab_measures_on_request_and_its_price_slider_equals_tuning_at_that_price(bundles, registry):
    """Nothing is measured until asked (it takes a minute for the shipped model); then the curve's figures are
    core.release.evaluation.tuning.tradeoff's at the bundle's price, and moving the price gives exactly what tuning at
    the new price gives, chosen threshold included, without measuring again."""
    from core.release.evaluation.tuning import tradeoff

    at = open_release(bundles["good"])
    assert not [f for f in figures_of(at) if "What each threshold buys" in json.dumps(f["layout"].get("title"))]
    at = click(at, "rel_tradeoff_run")

    def curve(at) -> dict:
        [fig] = [f for f in figures_of(at) if "What each threshold buys" in json.dumps(f["layout"].get("title"))]
        net = next(t for t in fig["data"] if t.get("name") == "net keystrokes saved per 100 chars")
        star = next(t for t in fig["data"] if str(t.get("name", "")).startswith("chosen"))
        return {"net": [float(v) for v in decode(net["y"])], "chosen": float(decode(star["x"])[0])}

    for price in (1.0, 3.0):
        if price != 1.0:
            at.slider(key="rel_price").set_value(price).run()
            assert not at.exception
        _, rows = tradeoff(bundles["good"], config=EvalConfig(typing_chars=2000), attention_cost=price)
        shown = curve(at)
        np.testing.assert_allclose(shown["net"], [r["net_keystrokes_saved_per_100"] for r in rows], rtol=1e-12)
        assert shown["chosen"] == next(r["threshold"] for r in rows if r["chosen"])
