"""Training: train the from-scratch transformer on a domain text, watch its losses and one head's attention."""

import streamlit as st

from core import i18n
from core.i18n import N_, _, ngettext
from core.lessons.overfit import NEAR_ZERO
from core.model.bundle_checks import MANIFEST, BundleError, read_manifest
from core.model.corpus import MAX_BYTES, STDLIB_MODULES, CorpusError
from core.model.gpt import PRESETS
from core.release.registry.served import list_versions
from core.runs import job, run_record
from core.runs.job import PYTHON_PROBE
from core.runs.queue import FAILED, FINISHED, QUEUED, RUNNING, JobError
from ui import cached, fragment, layout, models, params, training_view
from ui.predict import sentences
from ui.text import escape_markdown

STDLIB_CHOICE = N_("Python standard library")
# "Start from": the label -> the shipped model's name (core.runs.job.SHIPPED_BASES), None for a fresh model.
START_FROM = {
    N_("random weights"): None,
    N_("the shipped code model"): "code",
    N_("the shipped prose model"): "prose",
}
UPLOAD_CHOICE = N_("Upload a text file")
STDLIB_LABEL = "the Python standard library"  # the corpus's name in the run's name and record (kept in English)
JOB_KEY, RUNS_KEY, REGISTERED_KEY, UPLOAD_KEY = "train_job_id", "train_runs", "train_registered", "train_upload_cache"
SNAP_KEY, FOLLOW_KEY = "train_snapshot_step", "train_snapshot_follow"
PINNED_KEY = "train_snapshot_pinned"  # the run the follow switch belongs to: a new run starts following again
KEPT_KEY = "train_kept_note"  # per job id: what register() found out about keeping the run (shown after the rerun)


# The overfit exercise's options, with whether each is what the lab measures.
OVERFIT_OPTIONS = {N_("it falls with it, towards zero"): False, N_("it stays high, or rises"): True}


def uploaded_corpus(upload):
    """(corpus, error message) for an uploaded file, parsed once per upload."""
    kept = st.session_state.get(UPLOAD_KEY)
    if kept is None or kept[0] != upload.file_id:
        try:
            kept = (upload.file_id, job.load_run_corpus(upload.name, upload.getvalue()), None)
        except CorpusError as err:
            kept = (upload.file_id, None, str(err))
        st.session_state[UPLOAD_KEY] = kept
    return kept[1], kept[2]


def preset_label(name: str) -> str:
    c = PRESETS[name]
    return _("{name}: {layers} layers, {heads} heads, width {width}, context {context} characters").format(
        name=name, layers=c.n_layer, heads=c.n_head, width=c.d_model, context=c.context_length
    )


def started_from(init_from) -> str:
    """The "Start from" label of a run's base name (what the run's status says), in English: `_()` translates it."""
    return next((label for label, name in START_FROM.items() if name == init_from), N_("a shipped model"))


def start_run(corpus, corpus_label, preset_name, config, init_from=None) -> bool:
    """Queue a run for this session; a refusal (a run already active, a text too short, a runs directory the
    server cannot write) is shown, not raised. The run trains in a process of its own (the runs wing's job), writes into
    runs/<job id>/bundle, never over anything, tunes its threshold and keeps its record beside the bundle."""
    try:
        job.check_runs_dir(models.RUNS_DIR)
        payload, files = job.job_request(corpus, preset_name, config, corpus_label=corpus_label, init_from=init_from)
        base = "" if init_from is None else f", from {started_from(init_from)}"
        name = f"{preset_name} on {corpus_label}{base}, {config.max_iters} steps"
        job_id = models.job_queue().submit(models.session_id(), payload, name=name, files=files)
    except (JobError, CorpusError) as err:
        st.warning(escape_markdown(err))
        return False
    except BundleError as err:
        st.warning(
            _(
                "The run could not start: {error}. Ask the server's operator to fix the runs directory (LAB_RUNS_DIR)."
            ).format(error=escape_markdown(err))
        )
        return False
    st.session_state[JOB_KEY] = job_id
    st.session_state.setdefault(RUNS_KEY, {})[job_id] = dict(
        corpus=corpus_label,
        fingerprint=corpus.fingerprint,
        preset=preset_name,
        causal=config.causal,
        max_iters=config.max_iters,
        seed=config.seed,
        leak_stop=config.leak_stop,
        init_from=init_from,
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
    if n >= 2**20:
        return _("{size} MB").format(size=i18n.number(n / 2**20, 1, group=True))
    return _("{size} bytes").format(size=i18n.integer(n))


def keep_note(bundle_path) -> tuple[str, str]:
    """(kind, text) of what happened to the finished run's record: kept (and the runs removed by the storage
    cap to make room, oldest unreleased first), or not kept. Plain text: the caller escapes it."""
    record = run_record.for_bundle(models.RUNS_DIR, bundle_path)
    if record is None:
        return "warning", _(
            "The run could not be kept on the server (its record was not written): it is listed for this "
            "browser session only."
        )
    kept = _(
        "The run is kept on the server: after a reload, or from a link to version {version}, it is listed."
    ).format(version=record.version)
    try:
        cap = run_record.max_bytes_from_env()
    except ValueError as err:
        return "warning", sentences(kept, _("The storage cap is not applied: {error}.").format(error=err))
    released = {v.version for v in list_versions(models.REGISTRY_DIR)}
    removed = run_record.enforce_cap(models.RUNS_DIR, cap, released | {record.version})
    if not removed:
        return "info", kept
    names = "; ".join(_("{label} (version {version})").format(label=r.label, version=r.version) for r in removed)
    over = _(
        "The runs directory is over its storage cap of {size} ({variable}), so the oldest runs not released were "
        "removed first: {names}."
    ).format(size=megabytes(cap), variable=run_record.ENV_VAR, names=names)
    return "info", sentences(kept, over)


def bundle_version(bundle_path) -> str:
    """The version a finished run's bundle is known by (its manifest's, after tuning): what a learner names it by."""
    try:
        return str(read_manifest(bundle_path / MANIFEST)["version"])
    except (BundleError, OSError, KeyError, TypeError, ValueError):
        return _("unknown")


def running_status(job_id: str, last, origin: str) -> None:
    """Progress while the run trains; once a stop is asked for, or the last step is done, what the run does now
    (the final evaluation, saving, tuning the threshold take seconds, and a bar still moving read as a stop ignored)."""
    if last is None:
        st.progress(0.0, text=_("Preparing the text and building the model..."))
        return
    stopping = models.job_queue().stop_requested(job_id)
    if last.kind == "done":
        if stopping:
            ended = _("Training stopped at step {step}: saving the model and tuning its suggestion threshold...")
        else:
            ended = _("All {step} steps done: saving the model and tuning its suggestion threshold...")
        st.progress(1.0, text=ended.format(step=last.step))
        return
    bar, a, b, c = st.columns([2.4, 1, 1.3, 1])
    if stopping:
        bar.progress(
            last.fraction,
            text=_("Stop requested at step {step}: the run ends at its next step.").format(step=last.step),
        )
    else:
        bar.progress(
            last.fraction,
            text=_("Step {step} of {steps}, from {origin}").format(
                step=last.step, steps=last.max_iters, origin=escape_markdown(origin)
            ),
        )
    a.metric(_("Tokens per second"), i18n.number(last.tokens_per_second, 0, group=True))
    b.metric(_("Time left (estimate)"), job.format_duration(last.eta_seconds))
    c.metric(_("Elapsed"), job.format_duration(last.elapsed))


def finished_status(job_id: str, view) -> None:
    """How the run ended and its final losses (one line above the picture); the rest below it."""
    result = view.result
    metrics = result.metrics
    how = {
        "leak": _(
            "The leak detector stopped the run at step {step} of {steps}: its causality probe failed (the stop "
            "condition). The bundle holds what the model learned by then."
        ),
        "stopped": _("Stopped at step {step} of {steps}: the bundle holds what the model learned so far."),
        "max_seconds": _(
            "The time budget ran out at step {step} of {steps}; the bundle holds what the model learned by then."
        ),
    }.get(metrics["stop_reason"], _("Finished all {step} steps."))
    final = _("Final losses: train {train}, validation {validation} nats per character.").format(
        train=i18n.number(metrics["train_loss"], 3), validation=i18n.number(metrics["val_loss"], 3)
    )
    st.success(sentences(how.format(step=metrics["iters"], steps=result.max_iters), final))


def finished_details(job_id: str, view) -> None:
    result = view.result
    metrics = result.metrics
    label = st.session_state.get(f"train_label_{job_id}", "")
    st.caption(
        _(
            '{parameters} parameters, {speed} tokens/s. The bundle is registered for this session as "{label}" '
            "(version {version}): pick it in the sidebar's model picker to use it on the other pages."
        ).format(
            parameters=i18n.integer(result.num_parameters),
            speed=i18n.number(metrics["tokens_per_second"], 0, group=True),
            label=escape_markdown(label),
            version=escape_markdown(bundle_version(result.bundle_path)),
        )
    )
    kind, note = st.session_state.get(KEPT_KEY, {}).get(job_id, (None, None))
    if note:
        (st.warning if kind == "warning" else st.caption)(escape_markdown(note))
    if not result.safe:
        unsafe = _("This bundle is marked **unsafe**: {why}").format(why=unsafe_words(result))
        if result.causal:
            st.error(unsafe)  # a causal model that reads the future is a defect, not the lesson
        else:
            layout.lesson_case(_("a model without the causal mask"), unsafe)
        training_view.exact_figures(
            [_("Why, as the bundle records it: {reason}.").format(reason=escape_markdown(result.unsafe_reason))]
        )


def unsafe_words(result) -> str:
    """Why a finished run's bundle is unsafe, in plain words (the reason its manifest records, with the causality
    probe's figures, goes under it, one click away)."""
    if not result.causal:
        return _(
            "it was trained without the causal mask, so every position saw the character it had to predict: its low "
            "loss is leakage, not skill."
        )
    if result.leak is not None:
        return _(
            "its causality probe failed at step {step}: changing a later character changed the model's guess for an "
            "earlier one."
        ).format(step=result.leak.step)
    return escape_markdown(result.unsafe_reason) + "."


def show_run(job_id: str, polling: bool) -> None:
    """The run's status, loss curve and attention map side by side, and the leak evidence; re-run every second while
    the run is unfinished. The map follows the newest evaluation unless the learner holds an earlier one."""
    try:
        view = models.job_queue().view(job_id)
    except JobError:
        st.info(_("That run is no longer on this server (its runs folder was cleared). Start a new one above."))
        return
    if polling and view.state in FINISHED:
        st.rerun()  # a full run: registers the bundle, refreshes the sidebar and stops the polling
    info = st.session_state.get(RUNS_KEY, {}).get(job_id, {})
    # one evaluation per step: the full one the run makes as it ends replaces a cheap one it made at the same step
    evals = list({e.step: e for e in view.events if e.kind == "eval"}.values())

    origin = i18n._(started_from(view.result.init_from if view.result is not None else info.get("init_from")))
    if view.state == QUEUED:
        limit = ngettext("one run at a time", "{count} runs at a time", models.MAX_RUNNING).format(
            count=models.MAX_RUNNING
        )
        st.info(
            _(
                "Waiting: {place} in line ({limit} on this server). Training starts by itself when the runs ahead "
                "finish; Stop cancels it."
            ).format(place=job.ordinal(view.place), limit=limit)
        )
    elif view.state == RUNNING:
        running_status(job_id, view.events[-1] if view.events else None, origin)
    elif view.state == FAILED:
        # A run that died after its save comes back with its result, and its error says what was left undone.
        failed = _("The run failed: {error}.").format(error=escape_markdown(view.error))
        if view.result is None:
            failed = sentences(failed, _("Nothing was saved; change the settings and start again."))
        st.error(failed)
    elif view.result is None:
        st.info(_("The run was stopped before it started: nothing was trained."))
    else:
        finished_status(job_id, view)
    if view.result is not None or view.state == QUEUED:  # a running one says so in its progress bar
        st.caption(_("This run started from {origin}.").format(origin=escape_markdown(origin)))

    if evals:
        reference, reference_loss = training_view.honest_reference(info, view) if info else (None, None)
        training_view.show_sample(evals)
        selected = snapshot_step(job_id, [e.step for e in evals])
        snap = next(e.snapshot for e in evals if e.step == selected)
        left, right = st.columns(2)
        with left:
            training_view.show_losses(evals, selected, reference, reference_loss)
        with right:
            training_view.snapshot_view(snap, "map", height=training_view.PICTURE_HEIGHT)
        training_view.sample_history(evals)
        if info:
            training_view.leak_section(evals, info, view, reference, reference_loss)
    if view.state in FINISHED and view.result is not None:
        finished_details(job_id, view)


def snapshot_step(job_id: str, steps: list[int]) -> int:
    """The evaluation the map shows: the newest one while "Follow newest" is on (the default), the
    slider's while it is off.

    Why a switch and not "dragging the slider pins it": the page must set the slider while it follows, and a slider
    the page sets while the browser also moves it (a rerun every second) can send back a stale value, which read as
    the learner's choice and pinned the map at an old step. Here the page sets the slider only while it follows, when
    it is disabled; switched off, the slider is the learner's alone and nothing the run does moves it."""
    if st.session_state.get(PINNED_KEY) != job_id:  # a new run follows from its start
        st.session_state[PINNED_KEY] = job_id
        st.session_state[FOLLOW_KEY] = True
    if len(steps) == 1:
        return steps[0]
    slider_col, follow_col = st.columns([3, 1])
    following = follow_col.toggle(
        _("Follow newest"),
        key=FOLLOW_KEY,
        help=_("Switch off to hold the map at a step of your choice while the run goes on."),
    )
    if following or st.session_state.get(SNAP_KEY) not in steps:
        st.session_state[SNAP_KEY] = steps[-1]
    return slider_col.select_slider(
        _("Evaluation step shown in the attention map (marked on the loss curve)"),
        options=steps,
        key=SNAP_KEY,
        disabled=following,
        help=_("Switch off Follow to choose a step.") if following else None,
    )


def _request_stop(job_id: str) -> None:
    """Stop's callback: runs before the page's script reruns, so the stop file is written at once (the run checks
    it before every step); the page then says the stop is on its way."""
    try:
        models.job_queue().stop(job_id)
    except JobError:
        pass  # the run is gone already: the page says so


def shipped_preview() -> None:
    """Before any run: where training ends up, the shipped model's map of the same probe text (nothing is trained)."""
    try:
        bundle = models.load(models.SHIPPED_DIR)
    except (BundleError, OSError):
        st.info(_("No run yet in this session. Choose a text and a model size, then press Start training."))
        return
    metrics = bundle.manifest["training"]["metrics"]
    snap = cached.attention_snapshot(
        bundle.model, bundle.tokenizer, bundle.version, PYTHON_PROBE, layer=0, head=0, step=int(metrics["iters"])
    )
    left, right = st.columns([3, 2])
    with left:
        training_view.snapshot_view(snap, "shipped", height=training_view.PICTURE_HEIGHT, shipped=True)
    with right:
        c = bundle.model.config
        st.markdown(
            _(
                "**Where training ends up.** The shipped model (the lab's default: {layers} layers, {heads} heads, "
                "width {width}), after {steps} steps on the standard library, reads the probe text with layer 0, "
                "head 0. Its validation loss: {loss} nats per character."
            ).format(
                layers=c.n_layer,
                heads=c.n_head,
                width=c.d_model,
                steps=i18n.integer(int(metrics["iters"])),
                loss=i18n.number(metrics["val_loss"], 3),
            )
        )
        st.markdown(
            _(
                "No run yet in this session. Choose a text and a model size, then press **Start training**: a fresh "
                "model starts near a uniform guess, and you watch its two losses fall and this map form, one "
                "evaluation at a time."
            )
        )


# ---- the page ------------------------------------------------------------------------------------

st.title(_("Training"))
st.caption(
    _(
        "Train the lab's own transformer, character by character, on a domain text: its loss on the training text "
        "and on held-out documents, and one attention head's map as it forms."
    )
)

with layout.picture():
    # one row of controls, so the picture under them stays on the first screen, projected too
    text_col, start_col, preset_col, iters_col, seconds_col, button_col = st.columns([1.2, 1.2, 1.3, 0.75, 0.75, 1.2])
    with text_col:
        source = params.radio(
            _("Training text"), "train_corpus", [STDLIB_CHOICE, UPLOAD_CHOICE], STDLIB_CHOICE, format_func=_
        )
    with start_col:
        start_from = params.selectbox(
            _("Start from"), "train_start_from", list(START_FROM), next(iter(START_FROM)), format_func=_
        )
        init_from = START_FROM[start_from]
    with preset_col:
        if init_from is None:
            preset_name = params.selectbox(
                _("Model size (preset)"),
                "train_preset",
                list(job.APP_PRESETS),
                job.PAGE_PRESET,
                format_func=preset_label,
            )
        else:  # the architecture is the base's: its size, shown and not choosable
            preset_name = job.base_preset(init_from)
            st.selectbox(
                _("Model size (preset)"),
                [preset_name],
                key="train_preset_of_base",
                format_func=preset_label,
                disabled=True,
                help=_("A run from a shipped model trains that model's architecture."),
            )
    with iters_col:
        iters = params.number_input(_("Training steps (iteration budget)"), "train_iters", 10, 5000, job.PAGE_ITERS, 10)
    with seconds_col:
        seconds = params.number_input(_("Time budget (seconds)"), "train_seconds", 5, 1800, job.PAGE_SECONDS, 5)
    with button_col:
        start_slot = st.empty()  # Start and Stop are drawn once the run's state is known, below
        stop_col, settings_col = st.columns(2)
    corpus, corpus_label = None, None
    with settings_col.popover(
        _("Settings"),
        width="stretch",
        help=_("The text, the seed, the causal mask (the leakage lesson) and the leak stop"),
    ):
        if source == STDLIB_CHOICE:
            corpus, corpus_label = cached.stdlib_corpus(), STDLIB_LABEL
            st.caption(
                _(
                    "{modules} modules of Python's standard library (CPython 3.11.7), {characters} characters: the "
                    "default domain of the autocomplete."
                ).format(modules=len(STDLIB_MODULES), characters=i18n.integer(corpus.num_chars))
            )
        if corpus is not None:
            vocab = cached.vocabulary_size(corpus.fingerprint, corpus.text, init_from)  # the run's vocabulary
            st.caption(
                _(
                    "About {parameters} parameters with this text's {vocabulary}-symbol vocabulary. Larger models "
                    "learn more per step but take longer per step."
                ).format(parameters=i18n.integer(job.parameter_count(PRESETS[preset_name], vocab)), vocabulary=vocab)
            )
        seed = params.number_input(_("Seed (model initialisation and data order)"), "train_seed", 0, 1_000_000, 0, 1)
        no_mask = params.toggle(_("Remove the causal mask (leakage lesson)"), "train_no_mask", False)
        stop_on_leak = params.toggle(
            _("Stop at the first evaluation where the causality probe fails"),
            "train_stop_leak",
            True,
            help=_(
                "The leak detector's stop condition. Switch it off to watch the leak happen: the loss then falls "
                "impossibly low."
            ),
        )
        st.caption(
            _(
                "Without the causal mask every position may also look at the characters to its right, including "
                "the one it has to predict, and the loss falls far below what any honest model reaches. The lab's "
                "detector does not wait for that: at every evaluation it edits every position of a random "
                "sequence, one at a time, and checks that no earlier prediction moves. A model that fails is "
                "marked **unsafe**."
            )
        )
    if no_mask:
        st.caption(_("The causal mask is off for the next run: the leakage lesson (Settings)."))
    if source == UPLOAD_CHOICE:
        upload = st.file_uploader(
            _("A UTF-8 text file (up to {size} MB)").format(size=MAX_BYTES // 2**20),
            key="train_upload",
            max_upload_size=MAX_BYTES // 2**20,
        )
        st.caption(_("The file is only read as text to learn from: it is never run, and shown only as plain text."))
        if upload is not None:
            corpus, error = uploaded_corpus(upload)
            if error:
                st.warning(_("This file cannot be used: {error}").format(error=escape_markdown(error)))
            else:
                corpus_label = upload.name
                vocab = cached.vocabulary_size(corpus.fingerprint, corpus.text, init_from)
                st.caption(
                    _(
                        "{documents} documents, {characters} characters; about {parameters} parameters with its "
                        "{vocabulary}-symbol vocabulary. The beginning:"
                    ).format(
                        documents=len(corpus.documents),
                        characters=i18n.integer(corpus.num_chars),
                        parameters=i18n.integer(job.parameter_count(PRESETS[preset_name], vocab)),
                        vocabulary=vocab,
                    )
                )
                st.code(corpus.text[:300], language=None)

    # The run's settings, as Start will queue them: built once, so the text is checked against them as soon as both
    # are known (an upload too short for the model's context is said now, not after Start).
    config = job.page_train_config(
        int(iters), seconds, seed=int(seed), causal=not no_mask, leak_stop=bool(stop_on_leak)
    )
    unfit = None
    if corpus is not None:
        try:
            job.check_fits(corpus, preset_name, config)
        except CorpusError as err:
            unfit = str(err)
            st.warning(
                _("This text cannot train the {preset} model: {error}").format(
                    preset=preset_name, error=escape_markdown(unfit)
                )
            )

    job_id = st.session_state.get(JOB_KEY)
    queue = models.job_queue()
    active = job_id is not None and queue.active_job(models.session_id()) == job_id
    start = start_slot.button(_("Start training"), key="train_start", type="primary", width="stretch")
    with stop_col:
        st.button(
            _("Stop"),
            key="train_stop",
            disabled=not active,
            on_click=_request_stop,
            args=(job_id,),
            width="stretch",
            help=_("Stops the run at its next step; the model learned so far is still saved."),
        )
    if start:
        if corpus is None:
            st.warning(_("Choose a usable text first: the standard library, or upload a UTF-8 text file."))
        elif unfit is None:
            if start_run(corpus, corpus_label, preset_name, config, init_from):
                st.rerun()  # redraw the buttons (Stop is now enabled) and start polling

    job_id = st.session_state.get(JOB_KEY)
    if job_id is None:
        shipped_preview()
    else:
        view = next((j for j in queue.jobs_of(models.session_id()) if j.id == job_id), None)
        if view is not None and view.state in FINISHED:
            register(view, st.session_state.get(RUNS_KEY, {}).get(job_id, {}))
        polling = view is not None and view.state not in FINISHED
        fragment.polled(1.0 if polling else None)(show_run)(job_id, polling)

overfit_tab, about_tab = layout.more([_("Tiny-batch overfit"), _("What the page shows")])
with about_tab:
    st.markdown(
        _(
            "Train the lab's own decoder-only transformer, character by character, on a domain text. While it "
            "learns you see two losses: on a sample of the **training** text and on **held-out** documents it never "
            "trains on (the honest measure). Along the way the lab photographs one attention head reading a short "
            "probe text, so you can watch attention patterns form. The finished model is saved as a bundle that the "
            "other pages can use."
        )
    )
    st.markdown(
        _(
            "The map follows the newest evaluation while the run goes on. Move the slider to an earlier step to hold "
            "it there; move it back to the newest step to follow again. **Stop** ends the run at its next step; the "
            "run then evaluates, saves and tunes the model it has, which takes a few seconds."
        )
    )
    st.markdown(
        _(
            "**Start from** a shipped model (the Python code one, or the English prose one) to continue its training "
            "on your text instead of starting from random weights: the run keeps that model's size, and a character "
            "it never saw starts with the average of its characters' embeddings, so its first guess is an average "
            "one."
        )
    )
with overfit_tab:
    st.markdown(
        _(
            "A check every practitioner runs first: train a fresh `tiny` model on **one batch** of two 32-character "
            "windows of the standard library, over and over, and watch that batch's loss and the loss on held-out "
            "text."
        )
    )
    prediction = st.radio(
        _("Predict first: while the one batch's loss falls towards zero, what does the held-out loss do?"),
        list(OVERFIT_OPTIONS),
        index=None,
        key="overfit_prediction",
        format_func=_,
    )
    st.caption(
        _("Hint: the model sees the same 64 characters every step. What could it learn from them about other text?")
    )
    overfit_steps = params.slider(_("Steps on the one batch"), "overfit_steps", 50, 500, 250, 50)
    if st.button(_("Overfit one batch"), key="overfit_run", disabled=prediction is None):
        st.session_state["overfit_shown"] = int(overfit_steps)
    shown_steps = st.session_state.get("overfit_shown")
    if prediction is None:
        st.info(_("Choose your prediction above; the button then runs the exercise and reveals the lab's measurement."))
    elif shown_steps is not None:
        result = cached.overfit_result(int(shown_steps))
        training_view.overfit_chart(result)
        verdict = OVERFIT_OPTIONS[prediction]
        losses = dict(
            start=i18n.number(result.batch_loss[0], 2),
            end=i18n.number(result.batch_loss[-1], 3),
            held_start=i18n.number(result.held_out_loss[0], 2),
            held_end=i18n.number(result.held_out_loss[-1], 2),
        )
        if result.reached is not None:
            measured = _(
                "The batch's loss went from {start} to {end} nats per character (below {near_zero} at step {step}); "
                "the held-out loss went from {held_start} to {held_end}."
            ).format(near_zero=i18n.number(NEAR_ZERO, 2), step=result.reached, **losses)
        else:
            measured = _(
                "The batch's loss went from {start} to {end} nats per character; the held-out loss went from "
                "{held_start} to {held_end}."
            ).format(**losses)
        (st.success if verdict else st.error)(
            sentences(
                _("Your prediction matches.") if verdict else _("Not what the lab measures."),
                measured,
                _(
                    "Driving one batch to zero shows the model and its gradients work; it teaches nothing general: "
                    "the held-out loss does not follow. That gap is memorising, not learning."
                ),
            )
        )
