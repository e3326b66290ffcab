"""Release: the gate a model passes before the team's autocomplete serves it, and the registry that serves it."""

import time
from pathlib import Path

import streamlit as st

from core.model import run_record
from core.model.bundle import BundleError
from core.model.corpus import MAX_BYTES, STDLIB_SOURCE, CorpusError, corpus_from_text
from core.release.evaluation import EvalConfig, evaluate_bundle
from core.release.gate import ReleasePolicy, check_release
from ui import cost_view, models, registry_view, release_actions, teacher
from ui.rubric import show_comparison, show_gate_baselines, show_rubric
from ui.text import escape_markdown

# The gate of `python -m core release promote`: the page shows it and applies it, it cannot waive a check.
POLICY = ReleasePolicy()
# Small caps for the quick preview against the baselines, so it takes seconds on this shared machine; stated on
# the page, which says these are not the gate's figures (the gate's are in the rubric, section 1).
COMPARE = EvalConfig(max_positions=4000, typing_chars=600, latency_samples=10)
CHECKS_KEY, COMPARE_KEY = "rel_done_checks", "rel_done_compare"
KEEP = 2  # results kept per session: a check holds an n-gram trained on the whole split (tens of MB)


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


@st.cache_resource(max_entries=2, show_spinner="Reading the run's own copy of its training text...")
def _kept_corpus(run_dir: str, identity: tuple, _record):
    return run_record.corpus_of(_record)


def kept_corpus(bundle):
    """The training corpus from the record of the run that saved `bundle` (core.model.run_record), or None
    when the bundle is not a run of this server's runs directory or its copy is missing or does not match.
    Rebuilt once per copy (a 20 MB text takes a moment to cut into documents)."""
    record = run_record.for_bundle(models.RUNS_DIR, bundle.path)
    if record is None:
        return None
    try:
        copy = (record.run_dir / run_record.CORPUS_COPY).stat()
    except OSError:
        return None
    return _kept_corpus(str(record.run_dir), (record.version, copy.st_size, copy.st_mtime_ns), record)


def run_checks(bundle, corpus, key: tuple):
    """check_release under a spinner that says what it is doing; the result is kept for this session."""
    with st.spinner(
        f"Running the release checks on version {escape_markdown(bundle.version)}: verifying the "
        "files, editing tokens to test causality, comparing cached and full logits, training the rule and the "
        f"{POLICY.ngram_order}-gram on the same training documents and tuning their thresholds, simulating "
        f"{POLICY.evaluation.typing_chars:,} characters of typing with each of the three, the no-peek and "
        "shuffled-text canaries, saving the fallback. Several minutes on the standard library, seconds on a "
        "small text..."
    ):
        began = time.perf_counter()
        check = check_release(bundle.path, corpus=corpus, policy=POLICY)
        remember(CHECKS_KEY, key, (check, time.perf_counter() - began))
    return check


def rubric_section(bundle, corpus, key: tuple) -> None:
    st.header("1. The release checks")
    st.markdown(
        "The gate is a list of checks, each with the figure it measured and the rule it is held to. One failed "
        "check refuses the release. They run on the bundle as it is on disk and write nothing into it. The "
        "policy is the same one `python -m core release promote` applies: this page cannot waive a check."
    )
    if st.button(
        "Run the release checks",
        key="rel_run_checks",
        type="primary",
        help="Verifies the bundle, runs the leak detectors and trains the rule and n-gram baselines to compare",
    ):
        run_checks(bundle, corpus, key)
    cached = st.session_state.get(CHECKS_KEY, {}).get(key)
    if cached is None:
        st.info(
            f"The checks have not run for version {escape_markdown(bundle.version)} in this session yet. "
            "Press **Run the release checks** (it retrains both baselines and types the held-out text with each "
            "predictor, so it takes a while)."
        )
        return
    show_rubric(*cached)
    show_gate_baselines(cached[0])


@st.dialog("Promote a version for the whole class", width="medium", on_dismiss=teacher.close_confirmation)
def promote_dialog(bundle, corpus, key: tuple, reg: Path) -> None:
    version = escape_markdown(bundle.version)
    why = teacher.confirm(
        f"If every release check passes, the whole class is served version **{version}** from now "
        f"on; if one fails, nothing changes. {release_actions.served_now(reg)}",
        f"Promote version {version}",
        "rel_promote",
    )
    if why is not None:
        cached = st.session_state.get(CHECKS_KEY, {}).get(key)
        check = cached[0] if cached else run_checks(bundle, corpus, key)
        release_actions.promote_version(bundle, check, reg, why)
        teacher.close_confirmation()
        st.rerun()  # the sidebar's released version and the tables below follow the new pointer


@st.dialog("Roll back the version the class is served", width="medium", on_dismiss=teacher.close_confirmation)
def rollback_dialog(reg: Path, target: str) -> None:
    shown = escape_markdown(target)
    why = teacher.confirm(
        f"The whole class is served version **{shown}** again from now on. {release_actions.served_now(reg)}",
        f"Roll back to version {shown}",
        "rel_rollback",
    )
    if why is not None:
        release_actions.rollback_to(reg, target, why)
        teacher.close_confirmation()
        st.rerun()


def actions_section(bundle, corpus, key, reg: Path) -> None:
    st.header("2. Promote or roll back")
    st.markdown(
        "**Promote** runs the checks above (or reuses them when they have run) and, only if every check passes, "
        "installs a read-only copy of the bundle with its rubric and its named fallback as a new version, then "
        "switches `current` to it. A refused bundle is left where it was, and `current` does not move. "
        "**Roll back** switches `current` to the version that was current before it. Each asks you to confirm, "
        "naming the version the class will be served, and for the reason; both append one line to the "
        "registry's log (with this session's id and the reason), shown below after you confirm."
    )
    unlocked = teacher.gate("promote and rollback")
    previous = release_actions.previous_version(reg)
    locked_help = "" if unlocked else " (teacher only: locked)"
    left, right = st.columns(2)
    with left:
        label = (
            f"Promote version {escape_markdown(bundle.version)}"
            if bundle
            else "Promote (select a transformer bundle first)"
        )
        if st.button(
            label,
            key="rel_promote",
            disabled=bundle is None or not unlocked,
            help="Asks you to confirm, then runs the release gate; switches current only if every check "
            "passes" + locked_help,
        ):
            teacher.open_confirmation("promote")
    with right:
        target = f"version {escape_markdown(previous)}" if previous else "the previous version (there is none)"
        if st.button(
            f"Roll back to {target}",
            key="rel_rollback",
            disabled=previous is None or not unlocked,
            help="Asks you to confirm, then switches current back to the version that was current before "
            "it" + locked_help,
        ):
            teacher.open_confirmation(("rollback", previous))
    opened = teacher.confirmation()  # None unless unlocked: a forged click opens nothing
    if opened == "promote" and bundle is not None:
        promote_dialog(bundle, corpus, key, reg)
    elif isinstance(opened, tuple) and opened[1] is not None:
        rollback_dialog(reg, opened[1])
    release_actions.show_action()


def registry_section(reg: Path) -> None:
    st.header("3. The registry")
    st.markdown(
        f"The registry lives in `{str(reg).replace('`', '')}`. Each promoted version is an immutable copy of its "
        "bundle, stored with the rubric it passed and its **named fallback**: an n-gram baseline trained on the "
        "same training documents. It is *named* because the rubric records exactly which one (kind, order, "
        "version), so the team knows what users get when the transformer cannot be served. `current` points at "
        "the version the app serves."
    )
    st.markdown(
        "**When the current version fails to load** (a file damaged or edited, so its hashes no longer match), the "
        "app does not crash and does not move `current`: it serves the last known-good version (the earlier "
        "currents, newest first, then any other promoted version that still loads) and, if none loads, the named "
        "n-gram fallback, with a banner saying what is served and why."
    )
    registry_view.show_status(reg)
    registry_view.show_log(reg)


def comparison_section(bundle, corpus, key: tuple) -> None:
    st.header("4. Quick preview against the baselines, slice by slice")
    st.markdown(
        "Before trusting a model's complexity, compare it with simpler ones on the same held-out positions: a "
        "**rule** (complete the most frequent training word) and an **n-gram** (the named fallback). Averages hide "
        "weak spots, so the chart splits top-1 accuracy by kind of input (character class, column, indentation, "
        "document), each with its 95% interval (a bootstrap over documents): a short bar with a wide interval "
        "means too few documents to say."
    )
    st.caption(
        f"A quick preview, not the gate's figures: at most {COMPARE.max_positions:,} scored positions, "
        f"{COMPARE.typing_chars:,} characters of simulated typing and {COMPARE.latency_samples} latency "
        f"samples (seed {COMPARE.seed}), so it takes seconds. The release checks (section 1) evaluate with larger "
        "caps, and their figures, not these, decide. Latency is wall-clock time on this shared machine and changes "
        "from run to run."
    )
    if st.button(
        "Quick preview against the baselines",
        key="rel_compare",
        help="Trains the rule and the n-gram on the same training documents and scores all three, with small caps",
    ):
        with st.spinner(
            f"Training the rule and the n-gram on version {escape_markdown(bundle.version)}'s training "
            "documents, then scoring all three on the held-out text and timing suggestions..."
        ):
            try:
                remember(
                    COMPARE_KEY, key, evaluate_bundle(bundle.path, corpus=corpus, config=COMPARE, with_baselines=True)
                )
            except (CorpusError, BundleError, OSError, ValueError) as err:
                st.warning(f"The comparison could not run: {escape_markdown(err)}")
    result = st.session_state.get(COMPARE_KEY, {}).get(key)
    if result is None:
        st.info(
            "Press **Quick preview against the baselines** to train them and score all three with the small caps "
            "above (seconds on a small text, about half a minute on the standard library)."
        )
        return
    show_comparison(result)


# ---- the page ------------------------------------------------------------------------------------

st.title("Release")
st.markdown(
    "A team is about to serve autocomplete from a model it trained. Before users see it, the model goes through "
    "a **release gate**: checks that catch the failures a loss curve hides (a model that reads the future, a cache "
    "that drifts, a model that is no better than a simple baseline). Models that pass are **promoted** into a "
    "registry with a **named fallback**; a bad release can be **rolled back**. The checks, the registry and the "
    "comparison below are for the bundle selected in the sidebar."
)

REGISTRY = models.REGISTRY_DIR  # LAB_REGISTRY_DIR, default <repo>/registry (ui.models)
bundle = models.selected_bundle()
corpus, key = None, None
if bundle is None:
    st.info(
        "No transformer bundle is selected (or the registry is serving its n-gram fallback). Pick a bundle in "
        "the sidebar, or train one on the Training page, to check and promote it. The registry is below."
    )
else:
    if not bundle.safe:
        reason = escape_markdown(bundle.manifest.get("unsafe_reason") or "marked unsafe")
        st.error(
            f"**This bundle is marked unsafe**: {reason}. "
            "The release gate refuses it: run the checks to see the measured causality failure. Promoting it "
            "is refused, and the current version stays where it is."
        )
    source = bundle.manifest.get("corpus", {}).get("source")
    st.caption(
        f"Bundle version {escape_markdown(bundle.version)}, trained on {escape_markdown(source)}, at "
        f"{escape_markdown(bundle.path)}."
    )
    kept = kept_corpus(bundle) if needs_text(bundle.manifest) else None
    if kept is not None:
        corpus = kept
        st.caption(
            f"Held-out text from the run's own record: the training text this server kept beside the bundle "
            f"({len(kept.documents)} documents, {kept.num_chars:,} characters), split as training split it."
        )
    elif needs_text(bundle.manifest):
        st.info(
            "This bundle was trained on a text the lab cannot read back (an upload, or a file that moved). The "
            "held-out checks need the same text: upload it here, or run the checks without it (the checks that "
            "need the text then report that they did not run)."
        )
        upload = st.file_uploader(
            "The bundle's training text (UTF-8)", key="rel_corpus_upload", max_upload_size=MAX_BYTES // 2**20
        )
        if upload is not None:
            try:
                corpus = corpus_from_text(upload.name, upload.getvalue())
            except CorpusError as err:
                st.warning(f"This file cannot be used: {escape_markdown(err)}")
    key = (bundle.version, str(bundle.path), corpus.fingerprint if corpus else None)
    rubric_section(bundle, corpus, key)
actions_section(bundle, corpus, key, REGISTRY)
registry_section(REGISTRY)
if bundle is not None:
    comparison_section(bundle, corpus, key)
    cost_view.section(bundle, corpus, REGISTRY)
