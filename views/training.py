"""Training: train the from-scratch transformer on a domain text, watch its losses and one head's attention."""

import streamlit as st

from core.lessons.overfit import NEAR_ZERO, overfit_on_corpus
from core.model import run_record, runs
from core.model.bundle import BundleError
from core.model.corpus import MAX_BYTES, STDLIB_MODULES, CorpusError
from core.model.gpt import PRESETS
from core.model.jobs import FAILED, FINISHED, QUEUED, RUNNING, JobError
from core.model.tokenizer import SPECIAL_TOKENS
from core.release.registry import list_versions
from ui import models, params, training_view
from ui.text import escape_markdown

STDLIB_CHOICE = "Python standard library"
UPLOAD_CHOICE = "Upload a text file"
JOB_KEY, RUNS_KEY, REGISTERED_KEY, UPLOAD_KEY = "train_job_id", "train_runs", "train_registered", "train_upload_cache"
SNAP_KEY, PINNED_KEY = "train_snapshot_step", "train_snapshot_pinned"
KEPT_KEY = "train_kept_note"  # per job id: what register() found out about keeping the run (shown after the rerun)


@st.cache_resource(show_spinner="Reading the standard-library corpus...")
def stdlib_corpus():
    return runs.load_run_corpus("stdlib")


# The overfit exercise's options, with whether each is what the lab measures.
OVERFIT_OPTIONS = {"it falls with it, towards zero": False, "it stays high, or rises": True}


@st.cache_data(max_entries=8, show_spinner="Training a tiny model on one batch...")
def overfit_result(steps: int):
    return overfit_on_corpus(stdlib_corpus(), steps=steps, seed=0)


@st.cache_data(max_entries=16, show_spinner=False)
def vocabulary_size(fingerprint: str, _text: str) -> int:
    """Distinct characters plus the special tokens, counted once per text (97 ms for the stdlib corpus); keyed by
    the text's fingerprint, so the text itself is never hashed on a rerun."""
    return len(set(_text)) + len(SPECIAL_TOKENS)


def uploaded_corpus(upload):
    """(corpus, error message) for an uploaded file, parsed once per upload."""
    cached = st.session_state.get(UPLOAD_KEY)
    if cached is None or cached[0] != upload.file_id:
        try:
            cached = (upload.file_id, runs.load_run_corpus(upload.name, upload.getvalue()), None)
        except CorpusError as err:
            cached = (upload.file_id, None, str(err))
        st.session_state[UPLOAD_KEY] = cached
    return cached[1], cached[2]


def preset_label(name: str) -> str:
    c = PRESETS[name]
    return f"{name}: {c.n_layer} layers, {c.n_head} heads, width {c.d_model}, context {c.context_length} characters"


def start_run(corpus, corpus_label, preset_name, train_config) -> bool:
    """Queue a run for this session; a refusal (a run already active, a text too short, a runs directory the
    server cannot write) is shown, not raised. The run trains in a process of its own (cli.run_job), writes into
    runs/<job id>/bundle, never over anything, tunes its threshold and keeps its record beside the bundle."""
    try:
        runs.check_runs_dir(models.RUNS_DIR)
        payload, files = runs.job_request(corpus, preset_name, train_config, corpus_label=corpus_label)
        name = f"{preset_name} on {corpus_label}, {train_config.max_iters} steps"
        job_id = models.job_queue().submit(models.session_id(), payload, name=name, files=files)
    except (JobError, CorpusError) as err:
        st.warning(escape_markdown(err))
        return False
    except BundleError as err:
        st.warning(
            f"The run could not start: {escape_markdown(err)}. Ask the server's operator to fix the runs "
            "directory (LAB_RUNS_DIR)."
        )
        return False
    st.session_state[JOB_KEY] = job_id
    st.session_state.setdefault(RUNS_KEY, {})[job_id] = dict(
        corpus=corpus_label,
        fingerprint=corpus.fingerprint,
        preset=preset_name,
        causal=train_config.causal,
        max_iters=train_config.max_iters,
        seed=train_config.seed,
        leak_stop=train_config.leak_stop,
    )
    st.session_state.pop(PINNED_KEY, None)
    return True


def register(view, info) -> None:
    """Offer a finished run's bundle in the sidebar (once), then rerun so the sidebar shows it."""
    registered = st.session_state.setdefault(REGISTERED_KEY, set())
    if view.id in registered or view.result is None:
        return
    result = view.result
    label = run_record.run_label(info["preset"], info["corpus"], result.metrics["iters"], result.causal, view.id)
    models.add_session_bundle(label, result.bundle_path)
    registered.add(view.id)
    st.session_state[f"train_label_{view.id}"] = label
    st.session_state.setdefault(KEPT_KEY, {})[view.id] = keep_note(result.bundle_path)
    st.rerun()


def megabytes(n: int) -> str:
    return f"{n / 2**20:,.1f} MB" if n >= 2**20 else f"{n:,} bytes"


def keep_note(bundle_path) -> tuple[str, str]:
    """(kind, text) of what happened to the finished run's record: kept (and the runs removed by the storage
    cap to make room, oldest unreleased first), or not kept. Plain text: the caller escapes it."""
    record = run_record.for_bundle(models.RUNS_DIR, bundle_path)
    if record is None:
        return "warning", (
            "The run could not be kept on the server (its record was not written): it is listed for this "
            "browser session only."
        )
    kept = f"The run is kept on the server: after a reload, or from a link to version {record.version}, it is listed."
    try:
        cap = run_record.max_bytes_from_env()
    except ValueError as err:
        return "warning", f"{kept} The storage cap is not applied: {err}."
    released = {v.version for v in list_versions(models.REGISTRY_DIR)}
    removed = run_record.enforce_cap(models.RUNS_DIR, cap, released | {record.version})
    if not removed:
        return "info", kept
    names = "; ".join(f"{r.label} (version {r.version})" for r in removed)
    return "info", (
        f"{kept} The runs directory is over its storage cap of {megabytes(cap)} ({run_record.ENV_VAR}), so "
        f"the oldest runs not released were removed first: {names}."
    )


def show_run(job_id: str, polling: bool) -> None:
    """The run's status, curves and attention snapshots; re-run every second while the run is unfinished."""
    try:
        view = models.job_queue().view(job_id)
    except JobError:
        st.info("That run is no longer on this server (its runs folder was cleared). Start a new one above.")
        return
    if polling and view.state in FINISHED:
        st.rerun()  # a full run: registers the bundle, refreshes the sidebar and stops the polling
    info = st.session_state.get(RUNS_KEY, {}).get(job_id, {})
    evals = [e for e in view.events if e.kind == "eval"]
    last = view.events[-1] if view.events else None

    if view.state == QUEUED:
        limit = "one run at a time" if models.MAX_RUNNING == 1 else f"{models.MAX_RUNNING} runs at a time"
        st.info(
            f"Waiting: {runs.ordinal(view.place)} in line ({limit} on this server). "
            "Training starts by itself when the runs ahead finish; Stop cancels it."
        )
    elif view.state == RUNNING:
        if last is None:
            st.progress(0.0, text="Preparing the text and building the model...")
        else:
            st.progress(last.fraction, text=f"Step {last.step} of {last.max_iters}")
            a, b, c = st.columns(3)
            a.metric("Tokens per second", f"{last.tokens_per_second:,.0f}")
            b.metric("Time left (estimate)", runs.format_duration(last.eta_seconds))
            c.metric("Elapsed", runs.format_duration(last.elapsed))
    elif view.state == FAILED:
        st.error(
            f"The run failed: {escape_markdown(view.error)}. Nothing was saved; change the settings and start again."
        )
    elif view.result is None:
        st.info("The run was stopped before it started: nothing was trained.")
    else:
        result = view.result
        metrics = result.metrics
        how = {
            "leak": (
                f"The leak detector stopped the run at step {metrics['iters']} of {result.max_iters}: its "
                "causality probe failed (the stop condition). The bundle holds what the model learned by "
                "then."
            ),
            "stopped": (
                f"Stopped at step {metrics['iters']} of {result.max_iters}: the bundle holds what the "
                "model learned so far."
            ),
            "max_seconds": f"The time budget ran out at step {metrics['iters']} of {result.max_iters}; the bundle "
            "holds what the model learned by then.",
        }.get(metrics["stop_reason"], f"Finished all {metrics['iters']} steps.")
        label = st.session_state.get(f"train_label_{job_id}", "")
        st.success(
            f"{how} Final losses: train {metrics['train_loss']:.3f}, validation {metrics['val_loss']:.3f} nats "
            f"per character; {result.num_parameters:,} parameters, "
            f"{metrics['tokens_per_second']:,.0f} tokens/s. "
            f'The bundle is registered for this session as "{escape_markdown(label)}": '
            "pick it in the sidebar's model picker to use it on the other pages."
        )
        st.caption(f"Saved in {escape_markdown(result.bundle_path)}")
        kind, note = st.session_state.get(KEPT_KEY, {}).get(job_id, (None, None))
        if note:
            (st.warning if kind == "warning" else st.info)(escape_markdown(note))
        if not result.safe:
            st.error(f"This bundle is marked **unsafe**: {escape_markdown(result.unsafe_reason)}.")

    if not evals:
        return
    reference, reference_loss = training_view.honest_reference(info, view) if info else (None, None)
    if info:
        training_view.leak_section(evals, info, view, reference, reference_loss)
    steps = [e.step for e in evals]
    if st.session_state.get(PINNED_KEY) != job_id or st.session_state.get(SNAP_KEY) not in steps:
        st.session_state[SNAP_KEY] = steps[-1]  # follow the newest evaluation until the learner moves the slider
    if len(steps) > 1:
        selected = st.select_slider(
            "Evaluation step shown in the attention map (marked on the loss curve)",
            options=steps,
            key=SNAP_KEY,
            on_change=_pin,
            args=(job_id,),
        )
    else:
        selected = steps[0]
    snap = next(e.snapshot for e in evals if e.step == selected)
    left, right = st.columns(2)
    with left:
        training_view.show_losses(evals, selected, reference, reference_loss)
    with right:
        training_view.snapshot_view(snap, "map")


def _pin(job_id: str) -> None:
    st.session_state[PINNED_KEY] = job_id


# ---- the page ------------------------------------------------------------------------------------

st.title("Training")
st.markdown(
    "Train the lab's own decoder-only transformer, character by character, on a domain text. While it "
    "learns you see two losses: on a sample of the **training** text and on **held-out** documents it never "
    "trains on (the honest measure). Along the way the lab photographs one attention head reading a short "
    "probe text, so you can watch attention patterns form. The finished model is saved as a bundle that the "
    "other pages can use."
)

st.header("1. Text and model")
left, right = st.columns(2)
with left:
    source = params.radio("Training text", "train_corpus", [STDLIB_CHOICE, UPLOAD_CHOICE], STDLIB_CHOICE)
    corpus, corpus_label = None, None
    if source == STDLIB_CHOICE:
        corpus, corpus_label = stdlib_corpus(), "the Python standard library"
        st.caption(
            f"{len(STDLIB_MODULES)} modules of Python's standard library (CPython 3.11.7), "
            f"{corpus.num_chars:,} characters: the default domain of the autocomplete."
        )
    else:
        upload = st.file_uploader(
            f"A UTF-8 text file (up to {MAX_BYTES // 2**20} MB)", key="train_upload", max_upload_size=MAX_BYTES // 2**20
        )
        st.caption("The file is only read as text to learn from: it is never run, and shown only as plain text.")
        if upload is not None:
            corpus, error = uploaded_corpus(upload)
            if error:
                st.warning(f"This file cannot be used: {escape_markdown(error)}")
            else:
                corpus_label = upload.name
                st.caption(f"{len(corpus.documents)} documents, {corpus.num_chars:,} characters. The beginning:")
                st.code(corpus.text[:300], language=None)
with right:
    preset_name = params.selectbox(
        "Model size (preset)", "train_preset", list(runs.APP_PRESETS), "tiny", format_func=preset_label
    )
    if corpus is not None:
        vocab = vocabulary_size(corpus.fingerprint, corpus.text)  # CharTokenizer.from_text's vocabulary
        st.caption(
            f"About {runs.parameter_count(PRESETS[preset_name], vocab):,} parameters with this text's "
            f"{vocab}-symbol vocabulary. Larger models learn more per step but take longer per step."
        )
    iters = params.number_input("Training steps (iteration budget)", "train_iters", 10, 5000, 500, 10)
    seconds = params.number_input("Time budget (seconds)", "train_seconds", 5, 1800, 120, 5)
    seed = params.number_input("Seed (model initialisation and data order)", "train_seed", 0, 1_000_000, 0, 1)
    no_mask = params.toggle("Remove the causal mask (leakage lesson)", "train_no_mask", False)
    stop_on_leak = params.toggle(
        "Stop at the first evaluation where the causality probe fails",
        "train_stop_leak",
        True,
        help="The leak detector's stop condition. Switch it off to watch the leak "
        "happen: the loss then falls impossibly low.",
    )
    st.caption(
        "Without the causal mask every position may also look at the characters to its right, including "
        "the one it has to predict, and the loss falls far below what any honest model reaches. The lab's "
        "detector does not wait for that: at every evaluation it edits every position of a random sequence, "
        "one at a time, and checks that no earlier prediction moves. A model that fails is marked **unsafe**."
    )

# The run's settings, as Start will queue them: built once, so the text is checked against them as soon as both
# are known (an upload too short for the model's context is said now, not after Start).
train_config = runs.train_config_for(
    int(iters),
    max_seconds=float(seconds),
    seed=int(seed),
    causal=not no_mask,
    num_threads=1,  # one torch thread: the server's other core stays free for the pages of everyone else
    leak_stop=bool(stop_on_leak),
)
unfit = None
if corpus is not None:
    try:
        runs.check_fits(corpus, preset_name, train_config)
    except CorpusError as err:
        unfit = str(err)
        st.warning(f"This text cannot train the {preset_name} model: {escape_markdown(unfit)}")

job_id = st.session_state.get(JOB_KEY)
queue = models.job_queue()
active = job_id is not None and queue.active_job(models.session_id()) == job_id
start_col, stop_col, _ = st.columns([1, 1, 4])
start = start_col.button("Start training", key="train_start", type="primary")
stop = stop_col.button(
    "Stop", key="train_stop", disabled=not active, help="Stops the run; the model learned so far is still saved."
)
if stop and active:
    queue.stop(job_id)
if start:
    if corpus is None:
        st.warning("Choose a usable text first: the standard library, or upload a UTF-8 text file.")
    elif unfit is None:
        if start_run(corpus, corpus_label, preset_name, train_config):
            st.rerun()  # redraw the buttons (Stop is now enabled) and start polling

st.header("2. The run")
job_id = st.session_state.get(JOB_KEY)
if job_id is None:
    st.info("No run yet in this session. Choose a text and a model size, then press Start training.")
else:
    view = next((j for j in queue.jobs_of(models.session_id()) if j.id == job_id), None)
    if view is not None and view.state in FINISHED:
        register(view, st.session_state.get(RUNS_KEY, {}).get(job_id, {}))
    polling = view is not None and view.state not in FINISHED
    st.fragment(show_run, run_every=1.0 if polling else None)(job_id, polling)

st.header("3. Tiny-batch overfit")
st.markdown(
    "A check every practitioner runs first: train a fresh `tiny` model on **one batch** of two 32-character "
    "windows of the standard library, over and over, and watch that batch's loss and the loss on held-out text."
)
prediction = st.radio(
    "Predict first: while the one batch's loss falls towards zero, what does the held-out loss do?",
    list(OVERFIT_OPTIONS),
    index=None,
    key="overfit_prediction",
)
st.caption("Hint: the model sees the same 64 characters every step. What could it learn from them about other text?")
overfit_steps = params.slider("Steps on the one batch", "overfit_steps", 50, 500, 250, 50)
if st.button("Overfit one batch", key="overfit_run", disabled=prediction is None):
    st.session_state["overfit_shown"] = int(overfit_steps)
shown_steps = st.session_state.get("overfit_shown")
if prediction is None:
    st.info("Choose your prediction above; the button then runs the exercise and reveals the lab's measurement.")
elif shown_steps is not None:
    result = overfit_result(int(shown_steps))
    training_view.overfit_chart(result)
    verdict = OVERFIT_OPTIONS[prediction]
    (st.success if verdict else st.error)(
        ("Your prediction matches. " if verdict else "Not what the lab measures. ")
        + f"The batch's loss went from {result.batch_loss[0]:.2f} to {result.batch_loss[-1]:.3f} nats per character"
        + (f" (below {NEAR_ZERO} at step {result.reached})" if result.reached is not None else "")
        + f"; the held-out loss went from {result.held_out_loss[0]:.2f} to {result.held_out_loss[-1]:.2f}. "
        "Driving one batch to zero shows the model and its gradients work; it teaches nothing general: the "
        "held-out loss does not follow. That gap is memorising, not learning."
    )
