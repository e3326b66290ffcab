"""The Training page: a tiny run ends with a registered bundle and the page's numbers are the run's;
sessions see only their own runs and wait their turn; bad uploads are explained; the no-mask lesson: stopped
by the causality probe at its first evaluation, with the probe's figure and the symptom as evidence."""

import functools
import os
import random
import re

import bundles
import numpy as np
import pytest
import torch
from apptest import all_text, decode, figures, open_page, picture_figures
from bundles import tiny_model

from core.model import leak, train_config
from core.model.bundle import load_bundle, save_bundle
from core.model.corpus import corpus_from_text
from core.runs import run_record
from core.runs.events import attention_snapshot
from core.runs.job import PYTHON_PROBE, default_probe, load_run_corpus
from ui import models

TEXT = "\n\n".join(f"def f{i}(x):\n    return x * {i % 7} + {i % 3}\n" for i in range(60)).encode()
_opened = []


@pytest.fixture(autouse=True)
def _runs_dir(fresh_streamlit_caches, tmp_path, monkeypatch):
    monkeypatch.setattr(models, "RUNS_DIR", tmp_path / "runs")
    yield
    queue = models.job_queue()  # stop any run a failed test left behind (a shared machine)
    while _opened:
        at = _opened.pop()
        if "train_job_id" in at.session_state:
            queue.stop(at.session_state["train_job_id"])
            queue.wait(at.session_state["train_job_id"], 60)


def page_with_upload(data=TEXT, name="toy.py", iters=10, **toggles):
    at = open_page("training")
    _opened.append(at)
    at.radio(key="train_corpus").set_value("Upload a text file").run()
    at.file_uploader(key="train_upload").upload(name, data, "text/plain")
    at.number_input(key="train_iters").set_value(iters)
    at.selectbox(key="train_preset").set_value("tiny")  # the page's default is a minute-long run of a larger model
    for key, value in toggles.items():
        at.toggle(key=key).set_value(value)
    return at.run()


def shown(at) -> str:
    """The page's text as a reader sees it: the markdown escapes the page puts on user text removed."""
    return re.sub(r"\\(.)", r"\1", all_text(at))


def poll(at, done, limit=240):
    """AppTest never fires run_every: rerun until `done(text)` holds, waiting on the job between reruns."""
    for _ in range(limit):
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        text = shown(at)
        if done(text):
            return text
        if "train_job_id" in at.session_state:
            models.job_queue().wait(at.session_state["train_job_id"], 0.5)  # returns early when it finishes
    raise AssertionError(f"page never showed the expected state; last text:\n{shown(at)[-1500:]}")


def old_run(name: str):
    """A run kept earlier by someone else (an untrained tiny model: only its files matter to the cap)."""
    model, tok = tiny_model()
    corpus = corpus_from_text("old.py", bundles.TEXT * 4)
    bundle = save_bundle(
        models.RUNS_DIR / name / run_record.BUNDLE, model, tok, metrics={"run": name}, command=["t"], corpus=corpus
    )
    return run_record.write_record(
        models.RUNS_DIR / name,
        bundle_path=bundle,
        version=load_bundle(bundle).version,
        label=f"old run {name}",
        owner_token="someone-else",
        corpus_text=corpus.text,
    )


def test_a_tiny_run_registers_its_bundle_and_the_page_shows_the_runs_numbers(monkeypatch):
    older = old_run("older")
    monkeypatch.setenv(run_record.ENV_VAR, "1")  # every run is over this cap: all but the new one go
    at = page_with_upload()
    at.button(key="train_start").click().run()
    job_id = at.session_state["train_job_id"]
    text = poll(at, lambda t: "Finished all 10 steps" in t)
    result = models.job_queue().view(job_id).result
    assert models.job_queue().pid(job_id) not in (None, os.getpid())  # trained in a process of its own
    [(label, path)] = at.session_state["lab_session_bundles"]
    assert path == str(models.RUNS_DIR / job_id / "bundle") == str(result.bundle_path)
    # The run is kept: its record names this session's token (hashed) and its text gives the same split back.
    [record] = run_record.read_records(models.RUNS_DIR)
    assert record.bundle_path == result.bundle_path and record.label == label
    assert record.owner == run_record.owner_hash(at.session_state["lab_session_id"])
    assert record.version == load_bundle(path).version  # the version after tuning, the one a link names
    assert run_record.corpus_of(record).fingerprint == load_run_corpus("toy.py", TEXT).fingerprint
    assert f"kept on the server: after a reload, or from a link to version {record.version}" in text
    assert "over its storage cap of 1 bytes (LAB_RUNS_MAX_BYTES)" in text
    assert f"the oldest runs not released were removed first: old run older (version {older.version})" in text
    assert not (models.RUNS_DIR / "older").exists()
    assert "toy.py" in label and "registered for this session" in text
    assert "This run started from random weights." in text and result.init_from is None
    assert load_bundle(path).manifest["training"]["metrics"]["val_loss"] == pytest.approx(result.metrics["val_loss"])
    losses, attention = figures(at)
    val = [t for t in losses["data"] if t["name"].startswith("validation")][0]
    assert list(decode(val["x"]).astype(int)) == [r.step for r in result.history]
    np.testing.assert_allclose(decode(val["y"]).astype(float), [r.val_loss for r in result.history], rtol=1e-12)
    z = decode(attention["data"][0]["z"]).astype(float)  # float32 cells, NaN where masked (ui.charts.cells)
    T = z.shape[0]
    assert np.isnan(z[np.triu_indices(T, 1)]).all()  # drawn as masked above the diagonal
    np.testing.assert_allclose(np.nansum(z, axis=1), np.ones(T), atol=1e-5)
    assert f"{result.metrics['val_loss']:.3f}" in text
    last = [e for e in models.job_queue().view(job_id).events if e.kind == "eval"][-1]
    assert f"Step {last.step} writes:" in text  # its line at the last evaluation, shown
    assert last.sample.replace("\n", "↵") in [c.value for c in at.code]
    assert at.select_slider(key="train_snapshot_step").value == result.history[-1].step  # follows the newest evaluation
    assert at.select_slider(key="train_snapshot_step").disabled  # while following, the page alone moves it
    # Named by its label and version; no server path on the page.
    assert f"(version {load_bundle(path).version})" in text and "Saved in" not in text
    assert str(models.RUNS_DIR) not in text and "/bundle" not in text
    # Follow off: the slider is the learner's, and the map shows the step they chose.
    at.toggle(key="train_snapshot_follow").set_value(False).run()
    at.select_slider(key="train_snapshot_step").set_value(0).run()
    assert not at.select_slider(key="train_snapshot_step").disabled
    assert figures(at)[1]["layout"]["title"]["text"].startswith("Your run, step 0:")
    at.run()
    assert at.select_slider(key="train_snapshot_step").value == 0  # held across reruns
    at.toggle(key="train_snapshot_follow").set_value(True).run()
    assert at.select_slider(key="train_snapshot_step").value == result.history[-1].step
    assert "Causality probe passed at every evaluation so far" in text
    assert table_of(at, "causality probe") == ["passed"] * len(result.history)


@pytest.mark.numerics
def test_before_any_run_the_picture_is_the_shipped_models_map_of_the_probe_text():
    """The first screen holds a computed picture before anything is trained: the shipped model's own attention
    (layer 0, head 0) over the probe text a run photographs, read from its forward pass here."""
    at = open_page("training")
    assert not at.exception, [e.value for e in at.exception]
    [shipped] = picture_figures(at)
    bundle = load_bundle(models.SHIPPED_DIR)
    ids = torch.tensor([bundle.tokenizer.encode(PYTHON_PROBE)])  # (1, T)
    with torch.no_grad():
        expected = bundle.model(ids, return_weights=True).weights[0][0, 0].double().numpy()  # (T, S)
    z = decode(shipped["data"][0]["z"]).astype(float)  # NaN where masked
    T = expected.shape[0]
    assert z.shape == (T, T) and np.isnan(z[np.triu_indices(T, 1)]).all()
    np.testing.assert_allclose(z[np.tril_indices(T)], expected[np.tril_indices(T)], atol=1e-6)
    metrics = bundle.manifest["training"]["metrics"]
    assert f"The shipped model (trained {metrics['iters']:,} steps)" in shipped["layout"]["title"]["text"]
    assert f"Its validation loss: {metrics['val_loss']:.3f}" in shown(at)
    assert at.button(key="train_stop").disabled


def test_sessions_see_only_their_own_runs_and_wait_their_turn():
    first = page_with_upload(iters=5000)
    first.number_input(key="train_seconds").set_value(120)
    first.button(key="train_start").click().run()
    poll(first, lambda t: "Tokens per second" in "".join(m.label for m in first.metric))
    second = page_with_upload(iters=10)
    second.button(key="train_start").click().run()
    text = poll(second, lambda t: "1st in line" in t)
    assert "one run at a time on this server" in text
    a, b = first.session_state["train_job_id"], second.session_state["train_job_id"]
    assert a != b
    queue = models.job_queue()
    assert [v.id for v in queue.jobs_of(first.session_state["lab_session_id"])] == [a]
    assert [v.id for v in queue.jobs_of(second.session_state["lab_session_id"])] == [b]
    first.button(key="train_start").click().run()  # a second run for the same session is refused
    assert "already has a run" in shown(first)
    assert first.session_state["train_job_id"] == a

    second.button(key="train_stop").click().run()  # cancelled while waiting: never starts
    assert "stopped before it started" in poll(second, lambda t: "stopped before it started" in t)
    first.button(key="train_stop").click().run()
    text = poll(first, lambda t: "Stopped at step" in t)
    assert "holds what the model learned so far" in text
    assert [p for _, p in first.session_state["lab_session_bundles"]] == [str(models.RUNS_DIR / a / "bundle")]
    assert "lab_session_bundles" not in second.session_state or not second.session_state["lab_session_bundles"]


def test_a_non_utf8_upload_is_explained_and_nothing_is_lost():
    at = page_with_upload(data=b"caf\xe9 au lait\n" * 50, name="latin1.txt", iters=30)
    text = shown(at)
    assert "cannot be used" in text and "not UTF-8 text" in text and "0xe9" in text
    at.button(key="train_start").click().run()
    assert "Choose a usable text first" in shown(at)
    assert "train_job_id" not in at.session_state
    assert at.number_input(key="train_iters").value == 30


@pytest.mark.parametrize(
    "data, words",
    [
        (b"", "is empty"),
        ("def f():\n    return 1\n".encode("utf-16"), "not UTF-8 text"),
        (bytes(range(32)) * 64, "NUL byte"),
        (b"x = 1\n\ny = 2\n", "too small for context length"),  # valid text, shorter than one window of the model
    ],
)
def test_an_unusable_upload_is_explained_when_it_arrives_before_start_is_pressed(data, words):
    at = page_with_upload(data=data, name="upload.txt", iters=30)
    assert words in shown(at)  # said on arrival: nothing was pressed
    assert "train_job_id" not in at.session_state
    at.button(key="train_start").click().run()
    assert "train_job_id" not in at.session_state  # and Start queues nothing
    assert at.number_input(key="train_iters").value == 30


def prose(n_words=700, seed=0) -> bytes:
    """An uploaded text that is neither the standard library nor code: seeded random words (~4 kB)."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("aeioulnrstmdk") for _ in range(rng.randint(2, 8))) for _ in range(n_words)]
    return "\n\n".join(" ".join(words[i : i + 14]) + "." for i in range(0, n_words, 14)).encode()


@pytest.mark.numerics
def test_an_uploaded_text_without_the_mask_is_stopped_at_its_first_evaluation_with_the_probes_figure():
    at = page_with_upload(data=prose(), name="notes.txt", iters=200, train_no_mask=True)
    assert at.toggle(key="train_stop_leak").value is True  # the stop is on by default
    at.button(key="train_start").click().run()
    job_id = at.session_state["train_job_id"]
    text = poll(at, lambda t: "registered for this session" in t)
    result = models.job_queue().view(job_id).result
    assert result.metrics["stop_reason"] == "leak" and result.metrics["iters"] == 0
    assert "leak detector stopped the run at step 0 of 200" in text
    assert "The causality probe stopped the run at step 0." in text
    assert "has not yet fallen below" not in text  # the old, false wording
    # The probe's figure, measured again on the saved weights, apart from the page.
    bundle = load_bundle(result.bundle_path)
    probe = leak.causality_probe(bundle.model, sequences=leak.TRAINING_PROBE_SEQUENCES, seed=0)
    j, t = probe.first_leak
    assert (
        f"Editing the character at position {j} of a random sequence changed the model's predictions at "
        f"position {t}" in text
    )
    # Plain words first: the figure and its allowance one click away, under "The exact figures".
    [case] = [m.value for m in at.markdown if "Editing the character at position" in m.value]
    assert not SCIENTIFIC.search(case), case
    exact = exact_figures(at)
    assert f"{probe.agreement.max_abs_diff:.2e}" in exact and f"{probe.agreement.allowed:.2e}" in exact
    # The symptom: the loss not yet (an untrained model), the attention above the diagonal already.
    assert "The loss does not show it yet" in text and f"{result.metrics['val_loss']:.3f} nats" in text
    corpus = load_run_corpus("notes.txt", prose())
    snap = attention_snapshot(
        bundle.model,
        bundle.tokenizer,
        default_probe(corpus, train_config.train_config_for(200)),
        layer=0,
        head=0,
        step=0,
    )
    assert snap.future_weight > 0.1 and f"{snap.future_weight:.1%} of each row's weight" in text
    assert "marked **unsafe**" in text and "causality probe failed" in text and not bundle.safe
    [(label, _)] = at.session_state["lab_session_bundles"]
    assert "NO causal mask" in label


@pytest.mark.numerics
def test_with_the_stop_off_the_leak_is_watched_and_the_symptom_shown(monkeypatch):
    at = page_with_upload(train_no_mask=True, train_stop_leak=False)
    at.button(key="train_start").click().run()
    text = poll(at, lambda t: "Finished all 10 steps" in t)
    assert "The causality probe failed at step 0." in text and "The stop is off" in text
    result = models.job_queue().view(at.session_state["train_job_id"]).result
    probes = table_of(at, "causality probe")
    assert len(probes) == len(result.history) == 11 and all(v.startswith("FAILED") for v in probes)  # every step
    # The loss rule is the symptom shown: with a floor every loss is below, the page says so.
    monkeypatch.setattr(leak, "leak_verdict", functools.partial(leak.leak_verdict, floor=100.0))
    at.run()
    assert "The loss shows the symptom: it fell impossibly low." in shown(at) and "impossibly good" in exact_figures(at)


SCIENTIFIC = re.compile(r"\d\.?\d*e[+-]\d+")  # 5.45e-12: a figure for whoever opens "The exact figures"


def exact_figures(at) -> str:
    """The text of the page's "The exact figures" expanders (a verdict's figures, one click away), unescaped."""
    found = [e for e in at.expander if e.label == "The exact figures"]
    assert found, [e.label for e in at.expander]
    return re.sub(r"\\(.)", r"\1", "\n".join(str(m.value) for e in found for m in e.markdown))


def test_before_a_run_the_map_says_it_is_the_shipped_model_and_after_one_that_it_is_yours():
    """The map shown before anything is trained is the shipped model's: its title must not read as a step of the
    learner's own run; the run's map says it is theirs, at its step."""
    at = page_with_upload()
    [shipped] = picture_figures(at)
    title = shipped["layout"]["title"]["text"]
    assert "shipped model" in title and "not your run" in title, title
    assert not re.search(r"\bstep \d", title) and "Your run" not in title, title
    at.button(key="train_start").click().run()
    poll(at, lambda t: "Finished all 10 steps" in t)
    result = models.job_queue().view(at.session_state["train_job_id"]).result
    [_, attention] = picture_figures(at)
    assert attention["layout"]["title"]["text"].startswith(f"Your run, step {result.history[-1].step}:")


def test_the_causality_verdict_is_plain_words_with_the_probes_figures_one_click_away():
    """The probe's verdict is a sentence first, without its figures; the figures and their allowance, as core
    describes them, are in the expander under it."""
    at = page_with_upload()
    at.button(key="train_start").click().run()
    poll(at, lambda t: "Finished all 10 steps" in t)
    [said] = [c.value for c in at.caption if "Causality probe" in c.value]
    first = said.split(". ")[0]
    assert first.startswith("Causality probe passed") and "earlier one" in first, said
    assert not SCIENTIFIC.search(said) and "logit" not in said, said
    latest = models.job_queue().view(at.session_state["train_job_id"]).result.history[-1].probe
    exact = exact_figures(at)
    assert latest.describe() in exact and latest.agreement.rule in exact
    assert f"{latest.agreement.max_abs_diff:.2e}" in exact and f"{latest.agreement.allowed:.2e}" in exact


def table_of(at, column):
    return next(list(d.value[column]) for d in at.dataframe if column in d.value.columns)


def test_a_runs_directory_the_server_cannot_write_is_refused_before_the_run(tmp_path, monkeypatch):
    (tmp_path / "blocked").write_text("a file where the runs directory should be")
    monkeypatch.setattr(models, "RUNS_DIR", tmp_path / "blocked")
    at = page_with_upload()
    at.button(key="train_start").click().run()
    assert "could not start" in shown(at) and "is a file" in shown(at)
    assert "train_job_id" not in at.session_state


def test_changing_the_model_size_shows_no_link_warning():
    """A bound selectbox's link holds the option as the widget shows it (Streamlit writes 'baby: 4 layers, ...'):
    the page took that for a bad link and warned on every run after the preset was changed."""
    from views.training import preset_label

    at = open_page("training")
    at.selectbox(key="train_preset").set_value("baby").run()
    at.run()  # the next run reads the link the change wrote
    assert at.selectbox(key="train_preset").value == "baby"
    link = open_page("training", {"train_preset": preset_label("baby")})  # that link opened in another tab
    assert link.selectbox(key="train_preset").value == "baby"
    for page in (at, link):
        assert "not usable" not in all_text(page)


def test_starting_from_the_shipped_code_model_shows_its_size_disabled_and_its_parameter_count():
    """Issue 37: a run from a shipped model trains that model's architecture, so the size is shown and not
    choosable, and the parameter count is the base's (the standard library adds no character to its vocabulary)."""
    from views.training import preset_label

    at = open_page("training")
    at.selectbox(key="train_start_from").set_value("the shipped code model").run()
    size = at.selectbox(key="train_preset_of_base")
    base = load_bundle(models.SHIPPED_DIR)
    assert size.disabled and size.value == "default" and size.options == [preset_label("default")]
    assert f"About {base.model.num_parameters():,} parameters" in all_text(at)
    assert not at.exception
