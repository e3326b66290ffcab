"""Monitoring: what the served models did, by exact version side by side: health, input quality, prediction
distributions, outcomes, the evaluation's slices, and drift against the release-time reference.

Reading is open to everyone; filling the database with synthetic traffic writes to what every teacher reads, so
it sits behind the teacher passcode. Nothing from the database is rendered as markdown or HTML unescaped
(versions and document names come from a file anyone could edit).
"""

import pandas as pd
import streamlit as st

from core.database import StoreError
from core.model.corpus import CorpusError
from core.release.evaluation.eval_report import SLICE_FAMILIES
from core.release.evaluation.held_out import held_out
from core.telemetry import monitor, traffic
from core.telemetry.schema import SURFACES
from ui import cached, charts, layout, models, projector, teacher
from ui.companion import chart
from ui.suggestion_view import telemetry_store
from ui.text import escape_markdown

MAX_SYNTHETIC = 2000  # suggestions one fill serves at most: a minute or two on the shipped model
FILLED_KEY = "mon_filled"  # session state: what the last fill did, shown after its rerun
KINDS = {"Suggestions": "suggestion", "Completions": "completion"}
PICTURE_PX = 360  # the live chart opens the page: on the first screen under the controls, projected too
# Fewer requests than this and a version's p50 / p95 are not drawn: with 2 samples p95 is simply the slower one.
MIN_PERCENTILE_SAMPLES = 20
COUNT_TICKS_UP_TO = 10  # a count axis whose top is at most this gets a tick at every whole number (never at 0.5)
TIMELINE_SLOTS = 10  # the live chart has room for at least this many time buckets: one bucket is not a wall of bar


def figure_text(value, fmt: str = ".3f") -> str:
    return "n/a" if value is None else format(value, fmt)


def versions_text(vs) -> str:
    # Plain text, not code spans: inline code inside a caption falls below WCAG AA contrast (axe-core).
    return ", ".join(escape_markdown(v) for v in vs)


def requests_over_time(figures: monitor.Figures | None, kind: str) -> None:
    """The live picture: requests per time bucket and version. With nothing recorded yet it is the same chart,
    empty, saying what fills it: the class watches it fill as suggestions are served."""
    width = figures.width if figures is not None and figures.events else "minute"
    timeline = figures.over_time if figures is not None and figures.events else []
    buckets = sorted({h.bucket for h in timeline if h.bucket is not None})  # over time: every row has its bucket
    per = {(h.version, h.bucket): h for h in timeline}
    fig = charts.grouped_bars(
        buckets,
        {v: [per[(v, b)].requests if (v, b) in per else 0 for b in buckets] for v in versions},
        title=f"Requests per {width} (UTC)",
        y_title="requests",
        fmt="d",
    )
    fig.update_layout(height=PICTURE_PX)
    top = max((h.requests for h in timeline), default=0)
    fig.update_yaxes(tickformat="d", dtick=1 if top <= COUNT_TICKS_UP_TO else None)  # a count: whole numbers only
    if buckets:  # the first buckets at the left, room to the right for those still to come
        fig.update_xaxes(range=[-0.5, max(len(buckets), TIMELINE_SLOTS) - 0.5])
    if not buckets:
        fig.add_annotation(
            text=f"No {kind} requests recorded yet", x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False
        )
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    table = pd.DataFrame(
        [
            {
                "version": h.version,
                f"{width} (UTC)": h.bucket,
                "requests": h.requests,
                "errors": h.errors,
                "latency p50 ms": h.latency_p50_ms,
                "latency p95 ms": h.latency_p95_ms,
            }
            for h in timeline
        ],
        columns=["version", f"{width} (UTC)", "requests", "errors", "latency p50 ms", "latency p95 ms"],
    )
    summary = (
        f"Requests in {len(buckets)} {width}(s) from {buckets[0]} to {buckets[-1]} UTC."
        if buckets
        else f"No {kind} requests recorded yet for these settings."
    )
    chart(fig, table, summary, key="mon_over_time")


def health_section(rows) -> None:
    """Requests, errors and latency per version. The latency percentiles are drawn only for versions with at least
    MIN_PERCENTILE_SAMPLES requests; with fewer the page says so in words, and the table leaves them blank."""
    enough = {h.version for h in rows if h.requests >= MIN_PERCENTILE_SAMPLES}
    for h in rows:
        if h.version not in enough:
            st.info(
                f"Version {escape_markdown(h.version)}: only {h.requests} request{'' if h.requests == 1 else 's'} so "
                f"far ({h.errors} error{'' if h.errors == 1 else 's'}): latency percentiles need at least "
                f"{MIN_PERCENTILE_SAMPLES}, so none are drawn yet."
            )
    table = pd.DataFrame(
        [
            {
                "version": h.version,
                "requests": h.requests,
                "errors": h.errors,
                "error rate": h.error_rate,
                "latency p50 ms": h.latency_p50_ms if h.version in enough else None,
                "latency p95 ms": h.latency_p95_ms if h.version in enough else None,
            }
            for h in rows
        ],
        columns=["version", "requests", "errors", "error rate", "latency p50 ms", "latency p95 ms"],
    )
    if not enough:
        projector.dataframe(table, hide_index=True, key="mon_health_table")
        return
    chart(
        charts.grouped_bars(
            ["p50", "p95"],
            {h.version: [h.latency_p50_ms, h.latency_p95_ms] for h in rows if h.version in enough},
            title="Latency per request (nearest-rank percentiles)",
            y_title="milliseconds",
            fmt=".1f",
        ),
        table,
        "; ".join(
            f"version {escape_markdown(h.version)}: {h.requests} requests, {h.errors} errors, "
            + (
                f"latency p50 {h.latency_p50_ms:.1f} ms, p95 {h.latency_p95_ms:.1f} ms"
                if h.version in enough
                else f"too few for latency percentiles (at least {MIN_PERCENTILE_SAMPLES})"
            )
            for h in rows
        )
        + ".",
        key="mon_health",
        table_open=True,
    )


st.title("Monitoring")
st.caption(
    "Every suggestion the Autocomplete page and the command python -m core suggest serve is recorded with the "
    "**exact model version** that served it, so versions compare side by side: how the service held up, what it "
    "was asked, what it predicted, what the learners then typed. Only lengths and salted hashes of the text are "
    "kept, never the text itself (unless whoever runs the server turned that on)."
)
store = telemetry_store()
left, right = st.columns(2)
kind = KINDS[left.radio("Requests", list(KINDS), key="mon_kind", horizontal=True)]
surfaces = right.multiselect(
    "Where they were served", list(SURFACES), default=list(SURFACES), key="mon_surfaces",
    help="page: the Autocomplete page; cli: python -m core; synthetic: replayed held-out text (a tab below)",
)  # fmt: skip
figures = None
try:
    figures = cached.telemetry_figures(str(store.path), store.stamp(), kind, tuple(surfaces))
except StoreError as e:
    st.error(f"The telemetry database cannot be read: {escape_markdown(e)}")
if store.notice:
    st.warning(escape_markdown(store.notice))
health = store.health()
if not health.ok:
    st.warning(
        f"Telemetry is not being fully recorded on this server: {health.failed} write(s) failed and "
        f"{health.skipped} were skipped since it started; the last reason: {escape_markdown(health.last_error)}."
    )
versions = [] if figures is None else figures.versions
with layout.picture():
    requests_over_time(figures, kind)
if figures is not None and figures.events == 0:
    st.info(
        "Nothing recorded yet for these settings in the telemetry database. Suggestions served on the Autocomplete "
        "page or by `python -m core suggest` fill it, as does **Fill with synthetic traffic** (teachers, in its tab)."
    )
elif figures is not None:
    st.caption(
        f"{figures.events} {kind} event(s) from {versions_text(versions)} "
        f"(the most recent {monitor.MAX_READ:,} at most)."
    )

SECTIONS = ["Health", "Input quality", "Prediction distributions", "Outcomes", "Slices", "Drift"]
FILL = "Fill with synthetic traffic"
labels = [*(SECTIONS if figures is not None and figures.events else []), FILL]
tabs = dict(zip(labels, layout.more(labels)))
if figures is not None and figures.events:
    with tabs["Health"]:
        health_section(figures.health)
    with tabs["Input quality"]:
        quality = figures.input_quality
        chart(
            charts.grouped_bars(
                ["with unseen characters", "cut to the context"],
                {q.version: [q.share_unseen, q.share_truncated] for q in quality},
                title="Share of prompts the model could not read whole",
                y_title="share of requests",
            ),
            pd.DataFrame(
                [
                    {
                        "version": q.version,
                        "requests": q.requests,
                        "mean prompt chars": q.mean_prompt_chars,
                        "share with unseen chars": q.share_unseen,
                        "share truncated": q.share_truncated,
                    }
                    for q in quality
                ]
            ),  # fmt: skip
            "; ".join(
                f"version {escape_markdown(q.version)}: mean prompt {q.mean_prompt_chars:.1f} characters, "
                f"{q.share_unseen:.1%} with characters outside the vocabulary, "
                f"{q.share_truncated:.1%} cut to the context"
                for q in quality
            )
            + ".",
            key="mon_quality",
        )

    with tabs["Prediction distributions"]:
        predictions = figures.predictions
        chart(
            charts.grouped_bars(
                monitor.BIN_LABELS,
                {p.version: list(monitor.shares(p.histogram)) for p in predictions},
                title="Top-1 probability of the next character",
                y_title="share of requests",
                x_title="top-1 probability",
                fmt=".2f",
            ),
            pd.DataFrame(
                [
                    {"version": p.version, "top-1 bin": label, "requests": count, "share": share}
                    for p in predictions
                    for label, count, share in zip(monitor.BIN_LABELS, p.histogram, monitor.shares(p.histogram))
                ]
            ),
            "; ".join(
                f"version {escape_markdown(p.version)}: mean top-1 {figure_text(p.mean_top1)}, mean entropy "
                f"{figure_text(p.mean_entropy_nats)} nats, shown (clearing the threshold) {figure_text(p.shown_rate)}"
                for p in predictions
            )
            + ".",
            key="mon_predictions",
        )

    with tabs["Outcomes"]:
        st.markdown(
            "A shown suggestion's outcome matures when the next text decides it: **accepted** when the text goes on "
            "with the whole suggestion, **typed other** when it diverges. Acceptance rate = accepted / matured. Net "
            "keystrokes saved per matured suggestion = (keystrokes the accepted ones saved − the price of attention × "
            "the ones typed over) / matured: above 0, the suggestions are worth their interruption (docs/RELEASE.md: "
            "The price of attention)."
        )
        results = figures.outcomes
        chart(
            charts.grouped_bars(
                ["acceptance rate"],
                {o.version: [o.acceptance_rate] for o in results},
                title="Acceptance rate of shown suggestions",
                y_title="accepted / matured",
            ),
            pd.DataFrame(
                [
                    {
                        "version": o.version,
                        "shown": o.shown,
                        "matured": o.matured,
                        "accepted": o.accepted,
                        "typed other": o.typed_other,
                        "acceptance rate": o.acceptance_rate,
                        "keystrokes saved (gross)": o.saved,
                        f"net keystrokes saved per matured suggestion (attention cost {o.attention_cost:g})": (
                            o.net_per_shown
                        ),
                    }
                    for o in results
                ]
            ),  # fmt: skip
            "; ".join(
                f"version {escape_markdown(o.version)}: {o.accepted} of {o.matured} matured shown suggestions accepted "
                f"(acceptance rate {figure_text(o.acceptance_rate)}; net keystrokes saved per matured suggestion, "
                f"at {o.attention_cost:g} keystroke(s) for each one typed over: {figure_text(o.net_per_shown)})"
                for o in results
            )
            + ".",
            key="mon_outcomes",
            table_open=True,
        )

    with tabs["Slices"]:
        family = st.selectbox("Slice family (as in the evaluation)", SLICE_FAMILIES, key="mon_family")
        found = figures.slices[family]
        names = list(dict.fromkeys(s.name for s in found))
        cell = {(s.version, s.name): s for s in found}
        chart(
            charts.grouped_bars(
                names,
                {v: [cell[(v, n)].acceptance_rate if (v, n) in cell else None for n in names] for v in versions},
                title=f"Acceptance rate by {family}",
                y_title="accepted / matured",
                x_title=family,
            ),
            pd.DataFrame(
                [
                    {
                        "version": s.version,
                        "slice": f"{s.family}={s.name}",
                        "requests": s.requests,
                        "shown": s.shown,
                        "matured": s.matured,
                        "accepted": s.accepted,
                        "acceptance rate": s.acceptance_rate,
                        "mean top-1": s.mean_top1,
                    }
                    for s in found
                ]
            ),  # fmt: skip
            f"Acceptance rate of shown suggestions in {len(names)} {escape_markdown(family)} slice(s) per version; the "
            "table lists the requests and outcomes behind each.",
            key="mon_slices",
            table_open=True,
        )

    with tabs["Drift"]:
        st.markdown(
            "The selected model's live top-1 probabilities against its **release-time reference**: its held-out "
            f"documents replayed through the same serving path ({monitor.REFERENCE_EVENTS} suggestions, seed "
            f"{monitor.REFERENCE_SEED}). **The rule:** {monitor.DRIFT_RULE}"
        )
        source = models.selected_model()
        if source is None:
            st.info("No model is selected, so there is no version to compare: pick one in the sidebar.")
        else:
            live = figures.top1.get(source.version, [])
            if not live:
                st.info(
                    f"The selected version `{escape_markdown(source.version)}` has no live {kind} events in these "
                    "settings yet: the drift figure appears once it has."
                )
            else:
                reference, problem = cached.reference_top1(source.version, source)
                found_drift = monitor.drift(live, reference)
                chart(
                    charts.grouped_bars(
                        monitor.BIN_LABELS,
                        {"live": found_drift.live_shares, "release-time reference": found_drift.reference_shares},
                        title=f"Top-1 probability: live against release time ({charts.plain(source.version)})",
                        y_title="share of requests",
                        x_title="top-1 probability",
                        fmt=".2f",
                    ),
                    pd.DataFrame(
                        {
                            "top-1 bin": monitor.BIN_LABELS,
                            "live share": found_drift.live_shares,
                            "reference share": found_drift.reference_shares,
                        }
                    ),  # fmt: skip
                    f"PSI {figure_text(found_drift.psi)} over {found_drift.live} live and {found_drift.reference} "
                    "release-time suggestions.",
                    key="mon_drift",
                )
                show = {"warning": st.warning, "stable": st.success}.get(found_drift.verdict, st.info)
                show(escape_markdown(found_drift.message))
                if problem:
                    st.caption(f"Why there is no reference: {escape_markdown(problem)}")

with tabs[FILL]:
    if figures is None:
        st.caption("Synthetic traffic needs a telemetry database that can be read.")
    else:
        st.markdown(
            "Replays held-out text of the model selected in the sidebar (the served version, or any bundle listed "
            "there) as typing: seeded users are served a suggestion at every position, accept it exactly when the "
            "text goes on with it, and every suggestion is recorded (surface *synthetic*) with its true outcome."
        )
        done = st.session_state.pop(FILLED_KEY, None)
        if done:
            st.success(escape_markdown(done))
        if teacher.gate("synthetic fills", why="write into the database every figure on this page comes from"):
            cols = st.columns(3)
            count = cols[0].number_input("Suggestions", 1, MAX_SYNTHETIC, 200, 50, key="mon_fill_count")
            seed = cols[1].number_input("Seed", 0, 2**31 - 1, 1, 1, key="mon_fill_seed")
            sessions = cols[2].number_input("Simulated users", 1, 20, 3, 1, key="mon_fill_sessions")
            if st.button("Fill with synthetic traffic", key="mon_fill", type="primary"):
                source = models.selected_model()
                if source is None:
                    st.warning("No model is selected: pick one in the sidebar first.")
                else:
                    try:
                        documents = held_out(source.manifest).val
                        with st.spinner(f"Serving {int(count)} synthetic suggestions..."):
                            result = traffic.replay(
                                source, documents, seed=int(seed), sessions=int(sessions), store=store,
                                max_events=int(count),
                            )  # fmt: skip
                    except (CorpusError, ValueError, OSError) as e:
                        st.warning(f"No synthetic traffic: {escape_markdown(e)}")
                    else:
                        st.session_state[FILLED_KEY] = (
                            f"Served {result.events} synthetic suggestions with version {result.version} "
                            f"({result.recorded} recorded, {result.shown} shown, {result.accepted} accepted, "
                            f"{result.errors} errors)."
                        )
                        st.rerun()
