"""Release: the gate a model passes before the team's autocomplete serves it, and the registry that serves it."""

import time
from pathlib import Path

import pandas as pd
import streamlit as st

from core.model.bundle import BundleError
from core.model.corpus import MAX_BYTES, STDLIB_SOURCE, CorpusError, corpus_from_text
from core.release.evaluation import EvalConfig, evaluate_bundle
from core.release.gate import ReleasePolicy, check_release
from core.release.registry import (
    RegistryError,
    list_versions,
    promote,
    read_current,
    read_log,
    resolve_served,
    rollback,
)
from ui import charts, models, teacher
from ui.companion import chart
from ui.text import escape_markdown

# The gate of `python -m core release promote`: the page shows it and applies it, it cannot waive a check.
POLICY = ReleasePolicy()
# Small caps for the baseline comparison, so it takes seconds on this shared machine (stated on the page).
COMPARE = EvalConfig(max_positions=4000, typing_chars=600, latency_samples=10)
CHECKS_KEY, COMPARE_KEY, ACTION_KEY = "rel_done_checks", "rel_done_compare", "rel_done_action"
KEEP = 2  # results kept per session: a check holds an n-gram trained on the whole split (tens of MB)

# What each check of core.release.gate guards against, in a sentence for the team.
GUARDS = {
    "integrity": "Damaged, half-copied or edited files: every file's hash, the manifest fields, the tensor names "
    "and shapes, finite weights.",
    "marked safe": "Shipping a model its own training flagged (for example one trained without the causal mask).",
    "causality": "A model that reads the future: changing a later character must not move any earlier prediction.",
    "cache logits": "A KV cache that drifts: predictions computed token by token through the cache must equal "
    "the full forward pass.",
    "cache greedy": "Suggestions that change when the cache is on, including after the context window slides.",
    "held-out split": "Scores measured on text the model trained on: the evaluation uses the split and the corpus "
    "the bundle records.",
    "plausible: no-peek": "A leak the edit test missed: a model that sees its target gets worse when the window "
    "ends just before the target.",
    "plausible: canary": "Copying that looks like skill: on shuffled text no honest model beats the character entropy.",
    "plausible: vs n-gram": "An impossibly good loss: a small character model is not four times better than a 5-gram.",
    "beats n-gram: loss": "Complexity that does not pay: the transformer must predict held-out text better than the "
    "n-gram.",
    "beats n-gram: keystrokes": "A model that scores well but helps less: it must save users more keystrokes than "
    "the n-gram.",
    "named fallback": "Having nothing to serve: an n-gram on the same split must save and load back, ready to serve.",
}


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


def run_checks(bundle, corpus, key: tuple):
    """check_release under a spinner that says what it is doing; the result is kept for this session."""
    with st.spinner(
        f"Running the release checks on version {escape_markdown(bundle.version)}: verifying the "
        "files, editing tokens to test causality, comparing cached and full logits, training the "
        f"{POLICY.ngram_order}-gram on the same training documents, scoring both on the held-out text, "
        "the no-peek and shuffled-text canaries, saving the fallback. About a minute on the standard "
        "library, seconds on a small text..."
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
        help="Verifies the bundle, runs the leak detectors and trains the n-gram baseline to compare",
    ):
        run_checks(bundle, corpus, key)
    cached = st.session_state.get(CHECKS_KEY, {}).get(key)
    if cached is None:
        st.info(
            f"The checks have not run for version {escape_markdown(bundle.version)} in this session yet. "
            "Press **Run the release checks** (it retrains the n-gram baseline, so it takes a while)."
        )
        return
    check, seconds = cached
    rubric = check.rubric
    failed = [c for c in rubric.checks if not c.passed]
    summary = f"{len(rubric.checks) - len(failed)} of {len(rubric.checks)} checks pass"
    if failed:
        summary += "; failed: " + "; ".join(f"{c.name} ({c.figure})" for c in failed)
        st.error(f"**Refused.** {escape_markdown(summary)}.")
    else:
        st.success(f"**Passes the release gate.** {escape_markdown(summary)}.")
    st.caption(
        f"Checked version {escape_markdown(rubric.version)} at {escape_markdown(rubric.created)} in {seconds:.1f} s."
    )
    columns = ["check", "result", "figure", "threshold", "guards against", "detail"]
    table = pd.DataFrame([{**row, "guards against": GUARDS.get(row["check"], "")} for row in rubric.table()])
    # st.table shows every row and wraps every cell (a rubric is read in full); its cells are markdown, so escaped
    st.table(table[columns].set_index("check").map(escape_markdown))
    if rubric.fallback:
        kind, order, version = (escape_markdown(rubric.fallback[k]) for k in ("kind", "order", "version"))
        st.caption(f"Named fallback of this version: {kind} of order {order}, version {version}.")


def written_entry(reg: Path, events: tuple[str, ...], version) -> dict | None:
    """The newest log entry of one of `events` for `version`: the one the action just appended."""
    return next((e for e in reversed(read_log(reg)) if e.get("event") in events and e.get("version") == version), None)


def do_promote(bundle, corpus, key: tuple, reg: Path, why: str) -> None:
    cached = st.session_state.get(CHECKS_KEY, {}).get(key)
    check = cached[0] if cached else run_checks(bundle, corpus, key)
    try:
        result = promote(bundle.path, reg, check=check, actor=models.session_id(), why=why)
    except (RegistryError, BundleError, OSError) as err:
        st.session_state[ACTION_KEY] = {
            "ok": False,
            "message": f"The promotion could not be done: {err}",
            "entry": None,
        }
        return
    failures = result.rubric.failures() if result.rubric is not None and not result.promoted else []
    if result.promoted:
        message = f"Promoted: {result.reason}."
    elif failures:
        message = (
            f"Refused: version {result.version} stays out of the registry, and current stays at "
            f"{result.current or 'none'}. The checks it failed:"
        )
    else:
        message = f"Refused, and current stays at {result.current or 'none'}: {result.reason}."
    st.session_state[ACTION_KEY] = {
        "ok": result.promoted,
        "message": message,
        "items": failures,
        "entry": written_entry(reg, ("promote", "refuse"), result.version),
    }


def do_rollback(reg: Path, target: str, why: str) -> None:
    try:  # to=target: exactly the version the dialog named, even if another teacher moved `current` meanwhile
        result = rollback(reg, to=target, actor=models.session_id(), why=why, reason=why)
    except (RegistryError, BundleError, OSError) as err:
        st.session_state[ACTION_KEY] = {"ok": False, "message": f"The rollback could not be done: {err}", "entry": None}
        return
    message = f"Rolled back: {result.reason}." if result.switched else f"Rollback refused: {result.reason}."
    st.session_state[ACTION_KEY] = {
        "ok": result.switched,
        "message": message,
        "entry": written_entry(reg, ("rollback", "rollback-refused"), result.version),
    }


def previous_version(reg: Path) -> str | None:
    """The version a rollback returns to: the last earlier current, or None."""
    current = read_current(reg)
    return current["history"][-1] if current and current["history"] else None


def served_now(reg: Path) -> str:
    now = read_current(reg)
    return (
        f"The class is served version **{escape_markdown(now['version'])}** now."
        if now
        else "The registry serves no version yet."
    )


@st.dialog("Promote a version for the whole class", width="medium", on_dismiss=teacher.close_confirmation)
def promote_dialog(bundle, corpus, key: tuple, reg: Path) -> None:
    version = escape_markdown(bundle.version)
    why = teacher.confirm(
        f"If every release check passes, the whole class is served version **{version}** from now "
        f"on; if one fails, nothing changes. {served_now(reg)}",
        f"Promote version {version}",
        "rel_promote",
    )
    if why is not None:
        do_promote(bundle, corpus, key, reg, why)
        teacher.close_confirmation()
        st.rerun()  # the sidebar's released version and the tables below follow the new pointer


@st.dialog("Roll back the version the class is served", width="medium", on_dismiss=teacher.close_confirmation)
def rollback_dialog(reg: Path, target: str) -> None:
    shown = escape_markdown(target)
    why = teacher.confirm(
        f"The whole class is served version **{shown}** again from now on. {served_now(reg)}",
        f"Roll back to version {shown}",
        "rel_rollback",
    )
    if why is not None:
        do_rollback(reg, target, why)
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
    previous = previous_version(reg)
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
    action = st.session_state.get(ACTION_KEY)
    if action:
        items = "".join(f"\n- {escape_markdown(item)}" for item in action.get("items", []))
        (st.success if action["ok"] else st.error)(escape_markdown(action["message"]) + items)
        if action["entry"] is not None:
            st.caption("The log entry it wrote:")
            st.json(action["entry"], expanded=True)


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
    current = read_current(reg)
    versions = list_versions(reg, verify=True)
    served = resolve_served(reg)
    a, b, c = st.columns(3)
    # metric values are markdown: the pointer's version comes from a file
    a.metric("Current version", escape_markdown(current["version"]) if current else "none")
    b.metric(
        f"Served now ({escape_markdown(served.kind)})" if served.kind else "Served now",
        escape_markdown(served.version) if served.version else "nothing",
    )
    c.metric("Promoted versions", len(versions))
    why = escape_markdown(served.reason[:1].upper() + served.reason[1:])
    (st.warning if served.degraded and versions else st.caption)(why)
    if versions:
        history = current["history"] if current else []
        rows = [
            {
                "version": v.version,
                "role": (
                    "current"
                    if current and v.version == current["version"]
                    else "earlier current"
                    if v.version in history
                    else "promoted"
                ),
                "promoted": v.promoted,
                "loads and verifies": v.verifies,
                "problem": v.problem,
            }
            for v in versions
        ]
        st.subheader("Versions (oldest promotion first)")
        st.dataframe(pd.DataFrame(rows), hide_index=True, key="rel_versions_table")
        if history:
            st.caption(
                "Earlier currents, oldest first (a rollback returns to the last one): "
                + ", ".join(escape_markdown(h) for h in history)
            )
    log = read_log(reg)
    st.subheader("The log, newest first")
    if not log:
        st.caption("Nothing has been promoted, refused or rolled back here yet.")
        return
    rows = [
        {
            "time": e.get("time"),
            "event": e.get("event"),
            "version": e.get("version"),
            "previous": e.get("previous"),
            "failed checks": ", ".join(map(str, e.get("failed") or [])),
            "reason": e.get("reason"),
            "why (teacher)": e.get("why"),
            "by (session)": e.get("actor"),
            "source": e.get("source"),
        }
        for e in reversed(log)
    ]
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        key="rel_log_table",
        column_config={
            "reason": st.column_config.TextColumn(width="large"),
            "why (teacher)": st.column_config.TextColumn(width="medium"),
        },
    )
    st.caption(f"{len(log)} entries. The log is append-only: entries are never changed or removed.")


def comparison_section(bundle, corpus, key: tuple) -> None:
    st.header("4. Against the baselines, slice by slice")
    st.markdown(
        "Before trusting a model's complexity, compare it with simpler ones on the same held-out positions: a "
        "**rule** (complete the most frequent training word) and an **n-gram** (the named fallback). Averages hide "
        "weak spots, so the chart splits top-1 accuracy by kind of input (character class, column, indentation, "
        "document), each with its 95% Wilson interval: a short bar with a wide interval means too few positions "
        "to say."
    )
    st.caption(
        f"Small caps for this page: at most {COMPARE.max_positions:,} scored positions, "
        f"{COMPARE.typing_chars:,} characters of simulated typing and {COMPARE.latency_samples} latency "
        f"samples (seed {COMPARE.seed}). The release checks use larger caps, so figures differ a little. "
        "Latency is wall-clock time on this shared machine and changes from run to run."
    )
    if st.button(
        "Compare with the baselines",
        key="rel_compare",
        help="Trains the rule and the n-gram on the same training documents and scores all three",
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
            "Press **Compare with the baselines** to train them and score all three (seconds on a small text, "
            "about half a minute on the standard library)."
        )
        return
    kinds = [r.predictor for r in result.baselines] + [result.report.predictor]
    rows = [
        {
            "metric": r["metric"],
            **{k: r[k] for k in kinds},
            "better": r["better"],
            "worst slice": "; ".join(f"{k}: {s}" for k, s in r["slice"].items()) if "slice" in r else "",
        }
        for r in result.comparison
    ]
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        key="rel_comparison_table",
        height=35 * (len(rows) + 1) + 3,
        column_config={
            "metric": st.column_config.TextColumn(width="medium"),
            "worst slice": st.column_config.TextColumn(width="large"),
            **{k: st.column_config.NumberColumn(format="%.4f") for k in kinds},
        },
    )
    for w in result.report.warnings:
        st.warning(escape_markdown(w))
    slice_chart(result.report)


def slice_chart(report) -> None:
    shown = [s for s in report.slices if s.metrics.top1 is not None]
    labels = [s.label for s in shown]
    top1 = [s.metrics.top1 for s in shown]
    worst = next((w for w in report.worst if w.metric == "top1"), None)
    highlight = labels.index(worst.slice) if worst and worst.slice in labels else None
    fig = charts.bars(
        labels,
        top1,
        title=f"Top-1 accuracy per slice, version {report.version}",
        y_title="top-1 accuracy",
        x_title="slice",
        value_format=".2f",
        y_range=(0, 1.12),
        highlight=highlight,
    )  # the worst slice in the other colour, outlined
    ci = [s.metrics.top1_ci for s in shown]  # Wilson; never None for a slice with scored positions
    # Values at the foot of each bar, clear of its error bar; above a bar too short to hold them.
    fig.update_traces(
        textposition=["inside" if v >= 0.1 else "outside" for v in top1],
        insidetextanchor="start",
        customdata=[[c.low, c.high, s.metrics.positions] for c, s in zip(ci, shown)],
        hovertemplate="%{x}: %{y:.3f}, 95% interval [%{customdata[0]:.3f}, %{customdata[1]:.3f}], "
        "%{customdata[2]} positions<extra></extra>",
        error_y=dict(
            type="data",
            symmetric=False,
            color="#000000",
            thickness=1.5,
            width=3,
            array=[c.high - v for c, v in zip(ci, top1)],
            arrayminus=[v - c.low for c, v in zip(ci, top1)],
        ),
    )
    fig.update_layout(height=520)
    fig.update_xaxes(tickangle=-45)
    columns = ["slice", "positions", "top1", "top1_ci_low", "top1_ci_high", "loss", "keystrokes_saved_per_100"]
    table = pd.DataFrame(report.slice_table())[columns]
    overall = report.overall
    summary = (
        f"Top-1 accuracy of version {escape_markdown(report.version)} over {overall.positions:,} scored "
        f"positions is {overall.top1:.3f}; "
    )
    if worst is not None:
        summary += (
            f"the worst slice (among those with at least {report.config.min_slice_positions} positions) is "
            f"{escape_markdown(worst.slice)} at {worst.value:.3f}, 95% interval [{worst.ci.low:.3f}, "
            f"{worst.ci.high:.3f}], over {worst.positions} positions (the highlighted bar)."
        )
    else:
        summary += f"no slice has the {report.config.min_slice_positions} positions needed to name a worst one."
    chart(fig, table, summary, key="rel_slices")


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
    if needs_text(bundle.manifest):
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
