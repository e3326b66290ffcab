"""Release: the gate a model passes before the team's autocomplete serves it, and the registry that serves it.

The release checks take minutes of a core in this page's worker, so they are the teacher's (as Promote is), and
one runs at a time on the whole server (CHECK_LOCK, a lock file in the runs folder every worker sees; the OS lets
go of it if the worker dies). A learner sees the rubric a check recorded.
"""

import time
from pathlib import Path

import streamlit as st

from core import i18n
from core.i18n import N_, _
from core.model.bundle_checks import BundleError
from core.model.corpus import MAX_BYTES, PYDOC_SOURCE, STDLIB_SOURCE, CorpusError, corpus_from_text
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.evaluation import evaluate_bundle
from core.release.evaluation.tuning import reprice
from core.release.gate.gate import check_release
from core.release.gate.rubric import ReleasePolicy, Rubric
from core.release.serving.policy import policy_from_manifest
from core.runs import run_record
from core.runs.queue import try_lock
from ui import layout, models, teacher
from ui.text import escape_markdown
from views.release import cost_view, registry_view, release_actions, tradeoff_view
from views.release.rubric import exact_figures, gate_chart, gate_notes, recorded, show_comparison, show_rubric, verdict
from views.release.wording import known

# The gate of `python -m core release promote`: the page shows it and applies it, it cannot waive a check.
POLICY = ReleasePolicy()
# Small caps for the quick preview against the baselines, so it takes seconds on this shared machine; stated on
# the page, which says these are not the gate's figures (the gate's are in the rubric, section 1).
COMPARE = EvalConfig(max_positions=4000, typing_chars=600, latency_samples=10)
CHECKS_KEY, COMPARE_KEY, TRADEOFF_KEY = "rel_done_checks", "rel_done_compare", "rel_done_tradeoff"
TRADEOFF_CHARS = 2000  # characters the trade-off's typist replays: a tenth of `tune`'s, so it takes about a minute
MAX_PRICE = (
    5.0  # keystrokes: the slider's end; a full mental operator (1.35 s) is about five (core.release.evaluation.utility)
)
KEEP = 2  # results kept per session: a check holds an n-gram trained on the whole split (tens of MB)
CHECK_LOCK = ".release-check.lock"  # in the runs folder (LAB_RUNS_DIR): held by the one release check running
TEACHERS = N_("the release checks, promote and rollback")  # what the teacher gate unlocks on this page
# The sections beyond the picture (st.tabs labels), shown translated: with a bundle, and without one.
TABS = (
    N_("Release checks"),
    N_("Threshold trade-off"),
    N_("Promote or roll back"),
    N_("Registry"),
    N_("Quick preview"),
    N_("What it costs"),
)


def remember(key: str, item_key: tuple, value) -> None:
    """Keep `value` under `item_key` in this session's dict `key`, at most KEEP entries (oldest dropped)."""
    store = st.session_state.setdefault(key, {})
    store.pop(item_key, None)
    store[item_key] = value
    while len(store) > KEEP:
        store.pop(next(iter(store)))


def needs_text(manifest: dict) -> bool:
    """True when the training text the manifest names cannot be read back here (an upload, a moved file)."""
    source = manifest.get("corpus", {}).get("source")
    return not isinstance(source, str) or (source != STDLIB_SOURCE and not Path(source).is_file())


@st.cache_resource(max_entries=2, show_spinner=False)  # the spinner's text is the reader's language: kept_corpus
def _kept_corpus(run_dir: str, identity: tuple, _record):
    return run_record.corpus_of(_record)


def kept_corpus(bundle):
    """The training corpus from the record of the run that saved `bundle` (the run record), or None
    when the bundle is not a run of this server's runs directory or its copy is missing or does not match.
    Rebuilt once per copy (a 20 MB text takes a moment to cut into documents)."""
    record = run_record.for_bundle(models.RUNS_DIR, bundle.path)
    if record is None:
        return None
    try:
        copy = (record.run_dir / run_record.CORPUS_COPY).stat()
    except OSError:
        return None
    with st.spinner(_("Reading the run's own copy of its training text...")):
        return _kept_corpus(str(record.run_dir), (record.version, copy.st_size, copy.st_mtime_ns), record)


def run_checks(bundle, corpus, key: tuple):
    """check_release under a spinner that says what it is doing; the result is kept for this session. Only for an
    unlocked teacher, one check at a time on the server: None (with a message) when another check holds the lock
    or the lock cannot be taken."""
    if not teacher.unlocked():  # the button is not drawn for a learner; a forged rerun must not run minutes of work
        return None
    try:
        models.RUNS_DIR.mkdir(parents=True, exist_ok=True)
        lock = try_lock(models.RUNS_DIR / CHECK_LOCK)
    except OSError as err:
        st.warning(
            _(
                "The release checks cannot run: the runs folder cannot be written ({error}). Ask the server's "
                "operator to fix LAB_RUNS_DIR."
            ).format(error=escape_markdown(err.strerror or err))
        )
        return None
    if lock is None:
        st.warning(
            _(
                "Another release check is running on this server (one runs at a time: each takes minutes of the "
                "server's time). Press the button again when it has finished."
            )
        )
        return None
    try:
        with st.spinner(
            _(
                "Running the release checks on version {version}: verifying the files, editing tokens to test "
                "causality, comparing cached and full logits, training the rule and the {order}-gram on the same "
                "training documents and tuning their thresholds, simulating {chars} characters of typing with each "
                "of the three, the no-peek and shuffled-text canaries, saving the fallback. Several minutes on the "
                "standard library, seconds on a small text..."
            ).format(
                version=escape_markdown(bundle.version),
                order=str(POLICY.ngram_order),
                chars=i18n.integer(POLICY.evaluation.typing_chars),
            )
        ):
            began = time.perf_counter()
            check = check_release(bundle.path, corpus=corpus, policy=POLICY)
            remember(CHECKS_KEY, key, (check, time.perf_counter() - began))
    finally:
        lock.release()
    return check


def shown_rubric(bundle, key: tuple) -> tuple[Rubric, str] | None:
    """(the rubric the page shows, when and where it was measured): this session's check of `key` when it has run,
    else the one a check recorded for the same version (the rubric module's recorded), else None."""
    cached = st.session_state.get(CHECKS_KEY, {}).get(key)
    if cached is not None:
        check, seconds = cached
        said = _("Checked version {version} in this session at {created} in {seconds} s.").format(
            version=escape_markdown(check.rubric.version),
            created=escape_markdown(check.rubric.created),
            seconds=i18n.number(seconds, 1),
        )
        return check.rubric, said
    found = recorded(bundle, REGISTRY)
    if found is None:
        return None
    rubric, where = found
    said = _(
        "The checks of version {version} as {where}, at {created}; the teacher's **Run the release checks** "
        "measures them again."
    ).format(version=escape_markdown(rubric.version), where=where, created=escape_markdown(rubric.created))
    return rubric, said


def picture(bundle, corpus, key: tuple) -> None:
    """The gate's verdict, the button that measures it again, and the comparison it decides on (keystrokes saved by
    the three predictors, with intervals): the page's picture. The verdict sits in a row above the chart, not in
    a column beside it, so that it stays on the first screen when projector mode stacks a chart's columns."""
    with layout.picture():
        button, said = st.columns([1, 3], vertical_alignment="center")
        with button:
            if not teacher.unlocked():
                st.caption(
                    _(
                        "The release checks are run by the teacher: they take minutes of the server's time. The "
                        "teacher unlocks them in the **Promote or roll back** tab."
                    )
                )
            elif st.button(
                _("Run the release checks"),
                key="rel_run_checks",
                type="primary",
                help=_(
                    "Verifies the bundle, runs the leak detectors and trains the rule and n-gram baselines to compare"
                ),
            ):
                run_checks(bundle, corpus, key)
        shown = shown_rubric(bundle, key)
        with said:
            if shown is None:
                st.info(
                    _(
                        "The checks have not run for version {version} yet. The teacher's **Run the release "
                        "checks** measures them (it retrains both baselines and types the held-out text with each "
                        "predictor, so it takes a while)."
                    ).format(version=escape_markdown(bundle.version))
                )
            else:
                verdict(shown[0])
        if shown is not None:
            st.caption(shown[1])
            if not gate_chart(shown[0]):
                st.info(
                    _("This rubric holds no figures against the baselines: the checks that measure them did not run.")
                )


def rubric_section(bundle, key: tuple) -> None:
    st.markdown(
        _(
            "The gate is a list of checks, each with the figure it measured and the rule it is held to. One failed "
            "check refuses the release. They run on the bundle as it is on disk and write nothing into it. The "
            "policy is the same one `python -m core release promote` applies: this page cannot waive a check."
        )
    )
    shown = shown_rubric(bundle, key)
    if shown is None:
        st.info(
            _("The teacher's **Run the release checks** (at the top) measures them: every check's row appears here.")
        )
        return
    show_rubric(*shown)
    gate_notes(shown[0])


def tradeoff_section(bundle, corpus) -> None:
    """What each suggestion threshold buys at a price of attention (the decision utility), for the selected
    version.

    The typist replays the validation documents once per version (about a minute for the shipped model: on
    request, cached per server); moving the price re-prices that grid (`reprice`), which is
    exactly what tuning at that price would give, at once."""
    recorded_policy = policy_from_manifest(bundle.manifest)
    st.caption(
        _(
            "This version shows a suggestion when its probability reaches **{threshold}**, the threshold tuned at a "
            "price of {price} keystroke(s) for every suggestion shown and not taken (the time to read and dismiss "
            "it). Pick your own price and see what each threshold buys."
        ).format(
            threshold=i18n.formatted(recorded_policy.threshold), price=i18n.formatted(recorded_policy.attention_cost)
        )
    )
    state = (bundle.version, corpus.fingerprint if corpus else None)
    if st.session_state.get(TRADEOFF_KEY) != state:
        st.button(  # set before the rerun it starts, so the measuring run already shows no button
            _("Measure the trade-off ({chars} characters of validation text; about a minute)").format(
                chars=i18n.integer(TRADEOFF_CHARS)
            ),
            key="rel_tradeoff_run",
            on_click=st.session_state.__setitem__,
            args=(TRADEOFF_KEY, state),
        )
        return
    with st.spinner(_("The simulated typist replays the validation text at every threshold of the grid...")):
        try:
            rows = tradeoff_view.measured(str(bundle.path), bundle.version, None, TRADEOFF_CHARS, state[1], corpus)
        except (BundleError, ValueError, OSError) as err:
            st.warning(_("The trade-off could not be measured: {error}").format(error=escape_markdown(err)))
            st.session_state.pop(TRADEOFF_KEY, None)
            return
    price = st.slider(
        _("Price of attention (keystrokes per suggestion shown and not taken)"),
        0.0,
        MAX_PRICE,
        float(min(recorded_policy.attention_cost, MAX_PRICE)),
        0.25,
        key="rel_price",
        help=_(
            "What a suggestion that is not taken costs the typist: 1 keystroke is the lab's default (docs/RELEASE.md: "
            "The price of attention); 0 makes an interruption free."
        ),
    )
    tradeoff_view.render(reprice(rows, price), key="rel_tradeoff")


def promote_dialog(bundle, corpus, key: tuple, reg: Path) -> None:
    """The promotion's confirmation, in a dialog titled in the reader's language (st.dialog's title is fixed when
    the dialog is made: it is made on the run that shows it)."""
    dialog = st.dialog(
        _("Promote a version for the whole class"), width="medium", on_dismiss=teacher.close_confirmation
    )
    dialog(_promote_body)(bundle, corpus, key, reg)


def _promote_body(bundle, corpus, key: tuple, reg: Path) -> None:
    version = escape_markdown(bundle.version)
    why = teacher.confirm(
        _(
            "If every release check passes, the whole class is served version **{version}** from now on; if one "
            "fails, nothing changes. {served_now}"
        ).format(version=version, served_now=release_actions.served_now(reg)),
        _("Promote version {version}").format(version=version),
        "rel_promote",
    )
    if why is not None:
        cached = st.session_state.get(CHECKS_KEY, {}).get(key)
        check = cached[0] if cached else run_checks(bundle, corpus, key)
        if check is None:  # another check holds the server's one slot: said above, nothing promoted
            return
        release_actions.promote_version(bundle, check, reg, why)
        teacher.close_confirmation()
        st.rerun()  # the sidebar's released version and the tables below follow the new pointer


def rollback_dialog(reg: Path, target: str) -> None:
    """The rollback's confirmation, in a dialog titled in the reader's language (as promote_dialog)."""
    dialog = st.dialog(
        _("Roll back the version the class is served"), width="medium", on_dismiss=teacher.close_confirmation
    )
    dialog(_rollback_body)(reg, target)


def _rollback_body(reg: Path, target: str) -> None:
    shown = escape_markdown(target)
    why = teacher.confirm(
        _("The whole class is served version **{version}** again from now on. {served_now}").format(
            version=shown, served_now=release_actions.served_now(reg)
        ),
        _("Roll back to version {version}").format(version=shown),
        "rel_rollback",
    )
    if why is not None:
        release_actions.rollback_to(reg, target, why)
        teacher.close_confirmation()
        st.rerun()


def actions_section(bundle, corpus, key, reg: Path) -> None:
    st.markdown(
        _(
            "**Promote** runs the release checks (or reuses them when they have run) and, only if every check passes, "
            "installs a read-only copy of the bundle with its rubric and its named fallback as a new version, then "
            "switches `current` to it. A refused bundle is left where it was, and `current` does not move. "
            "**Roll back** switches `current` to the version that was current before it. Each asks you to confirm, "
            "naming the version the class will be served, and for the reason; both append one line to the "
            "registry's log (with this session's id and the reason), shown here and in the Registry tab."
        )
    )
    unlocked = teacher.gate(
        _(TEACHERS), _("change what the whole class is served or take minutes of the server's time")
    )
    previous = release_actions.previous_version(reg)
    locked_help = "" if unlocked else " " + _("(teacher only: locked)")
    left, right = st.columns(2)
    with left:
        label = (
            _("Promote version {version}").format(version=escape_markdown(bundle.version))
            if bundle
            else _("Promote (select a transformer bundle first)")
        )
        if st.button(
            label,
            key="rel_promote",
            disabled=bundle is None or not unlocked,
            help=_("Asks you to confirm, then runs the release gate; switches current only if every check passes")
            + locked_help,
        ):
            teacher.open_confirmation("promote")
    with right:
        label = (
            _("Roll back to version {version}").format(version=escape_markdown(previous))
            if previous
            else _("Roll back to the previous version (there is none)")
        )
        if st.button(
            label,
            key="rel_rollback",
            disabled=previous is None or not unlocked,
            help=_("Asks you to confirm, then switches current back to the version that was current before it")
            + locked_help,
        ):
            teacher.open_confirmation(("rollback", previous))
    opened = teacher.confirmation()  # None unless unlocked: a forged click opens nothing
    if opened == "promote" and bundle is not None:
        promote_dialog(bundle, corpus, key, reg)
    elif isinstance(opened, tuple) and opened[1] is not None:
        rollback_dialog(reg, opened[1])
    release_actions.show_action()


def registry_section(reg: Path) -> None:
    st.markdown(
        _(
            "The registry is a folder on the server (`LAB_REGISTRY_DIR`). Each promoted version is an immutable copy "
            "of its bundle, stored with the rubric it passed and its **named fallback**: an n-gram baseline trained on "
            "the same training documents. It is *named* because the rubric records exactly which one (kind, order, "
            "version), so the team knows what users get when the transformer cannot be served. `current` points at "
            "the version the app serves."
        )
    )
    st.markdown(
        _(
            "**When the current version fails to load** (a file damaged or edited, so its hashes no longer match), the "
            "app does not crash and does not move `current`: it serves the last known-good version (the earlier "
            "currents, newest first, then any other promoted version that still loads) and, if none loads, the named "
            "n-gram fallback, with a banner saying what is served and why."
        )
    )
    registry_view.show_status(reg)
    registry_view.show_log(reg)


def comparison_section(bundle, corpus, key: tuple) -> None:
    st.markdown(
        _(
            "Before trusting a model's complexity, compare it with simpler ones on the same held-out positions: a "
            "**rule** (complete the most frequent training word) and an **n-gram** (the named fallback). Averages hide "
            "weak spots, so the chart splits top-1 accuracy by kind of input (character class, column, indentation, "
            "document), each with its 95% interval (a bootstrap over documents): a short bar with a wide interval "
            "means too few documents to say."
        )
    )
    st.caption(
        _(
            "A quick preview, not the gate's figures: at most {positions} scored positions, {chars} characters of "
            "simulated typing and {samples} latency samples (seed {seed}), so it takes seconds. The release checks "
            "(at the top) evaluate with larger caps, and their figures, not these, decide. Latency is wall-clock "
            "time on this shared machine and changes from run to run."
        ).format(
            positions=i18n.integer(COMPARE.max_positions),
            chars=i18n.integer(COMPARE.typing_chars),
            samples=str(COMPARE.latency_samples),
            seed=str(COMPARE.seed),
        )
    )
    if st.button(
        _("Quick preview against the baselines"),
        key="rel_compare",
        help=_("Trains the rule and the n-gram on the same training documents and scores all three, with small caps"),
    ):
        with st.spinner(
            _(
                "Training the rule and the n-gram on version {version}'s training documents, then scoring all three "
                "on the held-out text and timing suggestions..."
            ).format(version=escape_markdown(bundle.version))
        ):
            try:
                remember(
                    COMPARE_KEY, key, evaluate_bundle(bundle.path, corpus=corpus, config=COMPARE, with_baselines=True)
                )
            except (CorpusError, BundleError, OSError, ValueError) as err:
                st.warning(_("The comparison could not run: {error}").format(error=escape_markdown(err)))
    result = st.session_state.get(COMPARE_KEY, {}).get(key)
    if result is None:
        st.info(
            _(
                "Press **Quick preview against the baselines** to train them and score all three with the small caps "
                "above (seconds on a small text, about half a minute on the standard library)."
            )
        )
        return
    show_comparison(result)


# ---- the page ------------------------------------------------------------------------------------

REGISTRY = models.REGISTRY_DIR  # LAB_REGISTRY_DIR, default <repo>/registry (ui.models)


def source_name(source: object) -> str:
    """The training text as a learner may see it: the named corpus or the upload's name, never a server path."""
    text = str(source)
    return text if text in (STDLIB_SOURCE, PYDOC_SOURCE) or text.startswith("upload:") else Path(text).name


def training_text(bundle):
    """The corpus the held-out checks read: the server's own copy of a run's text, an upload when the bundle's text
    cannot be read back here, or None (the checks read the text the manifest names)."""
    kept = kept_corpus(bundle) if needs_text(bundle.manifest) else None
    if kept is not None:
        st.caption(
            _(
                "Held-out text from the run's own record: the training text this server kept beside the bundle "
                "({documents} documents, {chars} characters), split as training split it."
            ).format(documents=str(len(kept.documents)), chars=i18n.integer(kept.num_chars))
        )
        return kept
    if not needs_text(bundle.manifest):
        return None
    st.info(
        _(
            "This bundle was trained on a text the lab cannot read back (an upload, or a file that moved). The "
            "held-out checks need the same text: upload it here, or run the checks without it (the checks that "
            "need the text then report that they did not run)."
        )
    )
    upload = st.file_uploader(
        _("The bundle's training text (UTF-8)"), key="rel_corpus_upload", max_upload_size=MAX_BYTES // 2**20
    )
    if upload is not None:
        try:
            return corpus_from_text(upload.name, upload.getvalue())
        except CorpusError as err:
            st.warning(_("This file cannot be used: {error}").format(error=escape_markdown(err)))
    return None


st.title(_("Release"))
st.caption(
    _(
        "Before the team's autocomplete serves a model, it passes a **release gate**: checks that catch what a loss "
        "curve hides (a model that reads the future, a cache that drifts, a model no better than a simple baseline). "
        "A model that passes is **promoted** into a registry with a **named fallback**; a bad release is **rolled "
        "back**."
    )
)
bundle = models.selected_bundle()
corpus, key = None, None
if bundle is None:
    st.info(
        _(
            "No transformer bundle is selected (or the registry is serving its n-gram fallback). Pick a bundle in "
            "the sidebar, or train one on the Training page, to check and promote it. The registry is in its tab "
            "below."
        )
    )
else:
    if not bundle.safe:
        why = (
            _("it was trained without the causal mask, so every position saw the character it had to predict")
            if not bundle.model.config.causal
            else _("its own training flagged it")
        )
        st.error(
            _(
                "**This bundle is marked unsafe**: {why}. The release gate refuses it: run the checks to see the "
                "measured causality failure. Promoting it is refused, and the current version stays where it is."
            ).format(why=why)
        )
        exact_figures(
            [
                escape_markdown(
                    _("Why, as the bundle records it: {reason}.").format(reason=bundle.manifest.get("unsafe_reason"))
                )
            ]
        )
    name = known(st.session_state.get("lab_bundle")) or _("the selected model")  # a label: a code of the sidebar
    source = source_name(bundle.manifest.get("corpus", {}).get("source"))
    st.caption(
        _("Version {version} of {name}, trained on {source}.").format(
            version=escape_markdown(bundle.version), name=escape_markdown(name), source=escape_markdown(source)
        )
    )
    corpus = training_text(bundle)
    key = (bundle.version, str(bundle.path), corpus.fingerprint if corpus else None)
    picture(bundle, corpus, key)

# The sections beyond the picture, one click away.
if bundle is not None and key is not None:
    checks_tab, tradeoff_tab, actions_tab, registry_tab, preview_tab, cost_tab = layout.more([_(t) for t in TABS])
    with checks_tab:
        rubric_section(bundle, key)
    with tradeoff_tab:
        tradeoff_section(bundle, corpus)
    with preview_tab:
        comparison_section(bundle, corpus, key)
    with cost_tab:
        cost_view.section(bundle, corpus, REGISTRY)
else:
    actions_tab, registry_tab = layout.more([_(TABS[2]), _(TABS[3])])
with actions_tab:
    actions_section(bundle, corpus, key, REGISTRY)
with registry_tab:
    registry_section(REGISTRY)
