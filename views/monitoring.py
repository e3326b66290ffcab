"""Monitoring: what the served models did, by exact version side by side: health, input quality, prediction
distributions, outcomes, the evaluation's slices, and drift against the release-time reference.

Reading is open to everyone; filling the database with synthetic traffic writes to what every teacher reads, so
it sits behind the teacher passcode. Nothing from the database is rendered as markdown or HTML unescaped
(versions and document names come from a file anyone could edit).
"""

import pandas as pd
import streamlit as st

from core import i18n
from core.database import StoreError
from core.i18n import N_, _, ngettext
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
KINDS = {N_("Suggestions"): "suggestion", N_("Completions"): "completion"}
# What the page says of a kind of request (KINDS' values), in whole sentences.
NONE_YET = {
    "suggestion": N_("No suggestion requests recorded yet"),
    "completion": N_("No completion requests recorded yet"),
}
NONE_HERE = {
    "suggestion": N_("No suggestion requests recorded yet for these settings."),
    "completion": N_("No completion requests recorded yet for these settings."),
}
EVENTS_FROM = {
    "suggestion": N_("{events} suggestion event(s) from {versions} (the most recent {most} at most)."),
    "completion": N_("{events} completion event(s) from {versions} (the most recent {most} at most)."),
}
NO_LIVE = {
    "suggestion": N_(
        "The selected version `{version}` has no live suggestion events in these settings yet: the drift figure "
        "appears once it has."
    ),
    "completion": N_(
        "The selected version `{version}` has no live completion events in these settings yet: the drift figure "
        "appears once it has."
    ),
}
# What the page says of a time bucket's width (monitor.BUCKETS' keys).
PER_WIDTH = {
    "minute": N_("Requests per minute (UTC)"),
    "hour": N_("Requests per hour (UTC)"),
    "day": N_("Requests per day (UTC)"),
}
WIDTH_COLUMN = {"minute": N_("minute (UTC)"), "hour": N_("hour (UTC)"), "day": N_("day (UTC)")}
IN_WIDTHS = {
    "minute": N_("Requests in {n} minute(s) from {first} to {last} UTC."),
    "hour": N_("Requests in {n} hour(s) from {first} to {last} UTC."),
    "day": N_("Requests in {n} day(s) from {first} to {last} UTC."),
}
PICTURE_PX = 360  # the live chart opens the page: on the first screen under the controls, projected too
# Fewer requests than this and a version's p50 / p95 are not drawn: with 2 samples p95 is simply the slower one.
MIN_PERCENTILE_SAMPLES = 20
COUNT_TICKS_UP_TO = 10  # a count axis whose top is at most this gets a tick at every whole number (never at 0.5)
TIMELINE_SLOTS = 10  # the live chart has room for at least this many time buckets: one bucket is not a wall of bar


def figure_text(value, digits: int = 3) -> str:
    return _("n/a") if value is None else i18n.number(value, digits)


def listed(items) -> str:
    """One sentence of `items` (one per version): '; ' between them and a full stop, as the language writes them."""
    return _("{items}.").format(items=_("; ").join(items))


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
        title=i18n._(PER_WIDTH[width]),
        y_title=_("requests"),
        fmt="d",
    )
    fig.update_layout(height=PICTURE_PX)
    top = max((h.requests for h in timeline), default=0)
    fig.update_yaxes(tickformat="d", dtick=1 if top <= COUNT_TICKS_UP_TO else None)  # a count: whole numbers only
    if buckets:  # the first buckets at the left, room to the right for those still to come
        fig.update_xaxes(range=[-0.5, max(len(buckets), TIMELINE_SLOTS) - 0.5])
    if not buckets:
        fig.add_annotation(text=i18n._(NONE_YET[kind]), x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False)
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    columns = [_("version"), i18n._(WIDTH_COLUMN[width]), _("requests"), _("errors"), _("latency p50 ms"),
               _("latency p95 ms")]  # fmt: skip
    table = pd.DataFrame(
        [[h.version, h.bucket, h.requests, h.errors, h.latency_p50_ms, h.latency_p95_ms] for h in timeline],
        columns=columns,
    )
    summary = (
        i18n._(IN_WIDTHS[width]).format(n=len(buckets), first=buckets[0], last=buckets[-1])
        if buckets
        else i18n._(NONE_HERE[kind])
    )
    chart(fig, table, summary, key="mon_over_time")


def health_section(rows) -> None:
    """Requests, errors and latency per version. The latency percentiles are drawn only for versions with at least
    MIN_PERCENTILE_SAMPLES requests; with fewer the page says so in words, and the table leaves them blank."""
    enough = {h.version for h in rows if h.requests >= MIN_PERCENTILE_SAMPLES}
    for h in rows:
        if h.version not in enough:
            st.info(
                _(
                    "Version {version}: only {requests} so far ({errors}): latency percentiles need at least "
                    "{minimum}, so none are drawn yet."
                ).format(
                    version=escape_markdown(h.version),
                    requests=ngettext("{n} request", "{n} requests", h.requests).format(n=h.requests),
                    errors=ngettext("{n} error", "{n} errors", h.errors).format(n=h.errors),
                    minimum=MIN_PERCENTILE_SAMPLES,
                )
            )
    enough_ms = [(h.latency_p50_ms, h.latency_p95_ms) if h.version in enough else (None, None) for h in rows]
    table = pd.DataFrame(
        [[h.version, h.requests, h.errors, h.error_rate, *ms] for h, ms in zip(rows, enough_ms)],
        columns=[_("version"), _("requests"), _("errors"), _("error rate"), _("latency p50 ms"), _("latency p95 ms")],
    )
    if not enough:
        projector.dataframe(table, hide_index=True, key="mon_health_table")
        return
    chart(
        charts.grouped_bars(
            ["p50", "p95"],
            {h.version: [h.latency_p50_ms, h.latency_p95_ms] for h in rows if h.version in enough},
            title=_("Latency per request (nearest-rank percentiles)"),
            y_title=_("milliseconds"),
            fmt=".1f",
        ),
        table,
        listed(
            _("version {version}: {requests} requests, {errors} errors, latency p50 {p50} ms, p95 {p95} ms").format(
                version=escape_markdown(h.version),
                requests=h.requests,
                errors=h.errors,
                p50=i18n.number(h.latency_p50_ms, 1),
                p95=i18n.number(h.latency_p95_ms, 1),
            )
            if h.version in enough
            else _(
                "version {version}: {requests} requests, {errors} errors, too few for latency percentiles "
                "(at least {minimum})"
            ).format(
                version=escape_markdown(h.version),
                requests=h.requests,
                errors=h.errors,
                minimum=MIN_PERCENTILE_SAMPLES,
            )
            for h in rows
        ),
        key="mon_health",
        table_open=True,
    )


st.title(_("Monitoring"))
st.caption(
    _(
        "Every suggestion the Autocomplete page and the command python -m core suggest serve is recorded with the "
        "**exact model version** that served it, so versions compare side by side: how the service held up, what it "
        "was asked, what it predicted, what the learners then typed. Only lengths and salted hashes of the text are "
        "kept, never the text itself (unless whoever runs the server turned that on)."
    )
)
store = telemetry_store()
left, right = st.columns(2)
kind = KINDS[left.radio(_("Requests"), list(KINDS), key="mon_kind", horizontal=True, format_func=_)]
surfaces = right.multiselect(
    _("Where they were served"), list(SURFACES), default=list(SURFACES), key="mon_surfaces",
    help=_("page: the Autocomplete page; cli: python -m core; synthetic: replayed held-out text (a tab below)"),
)  # fmt: skip
figures = None
try:
    figures = cached.telemetry_figures(str(store.path), store.stamp(), kind, tuple(surfaces))
except StoreError as e:
    st.error(_("The telemetry database cannot be read: {error}").format(error=escape_markdown(e)))
if store.notice:
    st.warning(escape_markdown(store.notice))
health = store.health()
if not health.ok:
    st.warning(
        _(
            "Telemetry is not being fully recorded on this server: {failed} write(s) failed and {skipped} were "
            "skipped since it started; the last reason: {reason}."
        ).format(failed=health.failed, skipped=health.skipped, reason=escape_markdown(health.last_error))
    )
versions = [] if figures is None else figures.versions
with layout.picture():
    requests_over_time(figures, kind)
if figures is not None and figures.events == 0:
    st.info(
        _(
            "Nothing recorded yet for these settings in the telemetry database. Suggestions served on the "
            "Autocomplete page or by `python -m core suggest` fill it, as does **Fill with synthetic traffic** "
            "(teachers, in its tab)."
        )
    )
elif figures is not None:
    st.caption(
        i18n._(EVENTS_FROM[kind]).format(
            events=figures.events, versions=versions_text(versions), most=i18n.integer(monitor.MAX_READ)
        )
    )

HEALTH, QUALITY, PREDICTIONS = N_("Health"), N_("Input quality"), N_("Prediction distributions")
OUTCOMES, SLICES, DRIFT = N_("Outcomes"), N_("Slices"), N_("Drift")
SECTIONS = [HEALTH, QUALITY, PREDICTIONS, OUTCOMES, SLICES, DRIFT]
FILL = N_("Fill with synthetic traffic")
labels = [*(SECTIONS if figures is not None and figures.events else []), FILL]
tabs = dict(zip(labels, layout.more([*map(_, labels)])))
if figures is not None and figures.events:
    with tabs[HEALTH]:
        health_section(figures.health)
    with tabs[QUALITY]:
        quality = figures.input_quality
        chart(
            charts.grouped_bars(
                [_("with unseen characters"), _("cut to the context")],
                {q.version: [q.share_unseen, q.share_truncated] for q in quality},
                title=_("Share of prompts the model could not read whole"),
                y_title=_("share of requests"),
            ),
            pd.DataFrame(
                [[q.version, q.requests, q.mean_prompt_chars, q.share_unseen, q.share_truncated] for q in quality],
                columns=[
                    _("version"),
                    _("requests"),
                    _("mean prompt chars"),
                    _("share with unseen chars"),
                    _("share truncated"),
                ],
            ),  # fmt: skip
            listed(
                _(
                    "version {version}: mean prompt {chars} characters, {unseen}% with characters outside the "
                    "vocabulary, {truncated}% cut to the context"
                ).format(
                    version=escape_markdown(q.version),
                    chars=i18n.number(q.mean_prompt_chars, 1),
                    unseen=i18n.number(100 * q.share_unseen, 1),
                    truncated=i18n.number(100 * q.share_truncated, 1),
                )
                for q in quality
            ),
            key="mon_quality",
        )

    with tabs[PREDICTIONS]:
        predictions = figures.predictions
        chart(
            charts.grouped_bars(
                monitor.BIN_LABELS,
                {p.version: list(monitor.shares(p.histogram)) for p in predictions},
                title=_("Top-1 probability of the next character"),
                y_title=_("share of requests"),
                x_title=_("top-1 probability"),
                fmt=".2f",
            ),
            pd.DataFrame(
                [
                    [p.version, label, count, share]
                    for p in predictions
                    for label, count, share in zip(monitor.BIN_LABELS, p.histogram, monitor.shares(p.histogram))
                ],
                columns=[_("version"), _("top-1 bin"), _("requests"), _("share")],
            ),
            listed(
                _(
                    "version {version}: mean top-1 {top1}, mean entropy {entropy} nats, shown (clearing the "
                    "threshold) {shown}"
                ).format(
                    version=escape_markdown(p.version),
                    top1=figure_text(p.mean_top1),
                    entropy=figure_text(p.mean_entropy_nats),
                    shown=figure_text(p.shown_rate),
                )
                for p in predictions
            ),
            key="mon_predictions",
        )

    with tabs[OUTCOMES]:
        st.markdown(
            _(
                "A shown suggestion's outcome matures when the next text decides it: **accepted** when the text goes "
                "on with the whole suggestion, **typed other** when it diverges. Acceptance rate = accepted / matured. "
                "Net keystrokes saved per matured suggestion = (keystrokes the accepted ones saved − the price of "
                "attention × the ones typed over) / matured: above 0, the suggestions are worth their interruption "
                "(docs/RELEASE.md: The price of attention)."
            )
        )
        results = figures.outcomes
        chart(
            charts.grouped_bars(
                [_("acceptance rate")],
                {o.version: [o.acceptance_rate] for o in results},
                title=_("Acceptance rate of shown suggestions"),
                y_title=_("accepted / matured"),
            ),
            pd.DataFrame(
                [
                    {
                        _("version"): o.version,
                        _("shown"): o.shown,
                        _("matured"): o.matured,
                        _("accepted"): o.accepted,
                        _("typed other"): o.typed_other,
                        _("acceptance rate"): o.acceptance_rate,
                        _("keystrokes saved (gross)"): o.saved,
                        _("net keystrokes saved per matured suggestion (attention cost {cost})").format(
                            cost=i18n.formatted(o.attention_cost)
                        ): o.net_per_shown,
                    }
                    for o in results
                ]
            ),  # fmt: skip
            listed(
                _(
                    "version {version}: {accepted} of {matured} matured shown suggestions accepted (acceptance rate "
                    "{rate}; net keystrokes saved per matured suggestion, at {cost} keystroke(s) for each one typed "
                    "over: {net})"
                ).format(
                    version=escape_markdown(o.version),
                    accepted=o.accepted,
                    matured=o.matured,
                    rate=figure_text(o.acceptance_rate),
                    cost=i18n.formatted(o.attention_cost),
                    net=figure_text(o.net_per_shown),
                )
                for o in results
            ),
            key="mon_outcomes",
            table_open=True,
        )

    with tabs[SLICES]:
        family = st.selectbox(_("Slice family (as in the evaluation)"), SLICE_FAMILIES, key="mon_family")
        found = figures.slices[family]
        names = list(dict.fromkeys(s.name for s in found))
        cell = {(s.version, s.name): s for s in found}

        def slice_name(name: str) -> str:
            """A slice's name as shown: the evaluation's own, or 'not known yet' in the reader's language."""
            return i18n._(monitor.UNLABELLED) if name == monitor.UNLABELLED else name

        chart(
            charts.grouped_bars(
                [slice_name(n) for n in names],
                {v: [cell[(v, n)].acceptance_rate if (v, n) in cell else None for n in names] for v in versions},
                title=_("Acceptance rate by {family}").format(family=family),
                y_title=_("accepted / matured"),
                x_title=family,
            ),
            pd.DataFrame(
                [
                    [
                        s.version,
                        f"{s.family}={slice_name(s.name)}",
                        s.requests,
                        s.shown,
                        s.matured,
                        s.accepted,
                        s.acceptance_rate,
                        s.mean_top1,
                    ]
                    for s in found
                ],
                columns=[
                    _("version"),
                    _("slice"),
                    _("requests"),
                    _("shown"),
                    _("matured"),
                    _("accepted"),
                    _("acceptance rate"),
                    _("mean top-1"),
                ],
            ),  # fmt: skip
            _(
                "Acceptance rate of shown suggestions in {n} {family} slice(s) per version; the table lists the "
                "requests and outcomes behind each."
            ).format(n=len(names), family=escape_markdown(family)),
            key="mon_slices",
            table_open=True,
        )

    with tabs[DRIFT]:
        st.markdown(
            _(
                "The selected model's live top-1 probabilities against its **release-time reference**: its held-out "
                "documents replayed through the same serving path ({events} suggestions, seed {seed}). **The rule:** "
                "{rule}"
            ).format(events=monitor.REFERENCE_EVENTS, seed=monitor.REFERENCE_SEED, rule=monitor.drift_rule())
        )
        source = models.selected_model()
        if source is None:
            st.info(_("No model is selected, so there is no version to compare: pick one in the sidebar."))
        else:
            live = figures.top1.get(source.version, [])
            if not live:
                st.info(i18n._(NO_LIVE[kind]).format(version=escape_markdown(source.version)))
            else:
                reference, problem = cached.reference_top1(source.version, source)
                found_drift = monitor.drift(live, reference)
                chart(
                    charts.grouped_bars(
                        monitor.BIN_LABELS,
                        {_("live"): found_drift.live_shares, _("release-time reference"): found_drift.reference_shares},
                        title=_("Top-1 probability: live against release time ({version})").format(
                            version=charts.plain(source.version)
                        ),
                        y_title=_("share of requests"),
                        x_title=_("top-1 probability"),
                        fmt=".2f",
                    ),
                    pd.DataFrame(
                        {
                            _("top-1 bin"): monitor.BIN_LABELS,
                            _("live share"): found_drift.live_shares,
                            _("reference share"): found_drift.reference_shares,
                        }
                    ),  # fmt: skip
                    _("PSI {psi} over {live} live and {reference} release-time suggestions.").format(
                        psi=figure_text(found_drift.psi), live=found_drift.live, reference=found_drift.reference
                    ),
                    key="mon_drift",
                )
                show = {"warning": st.warning, "stable": st.success}.get(found_drift.verdict, st.info)
                show(escape_markdown(found_drift.message))
                if problem:
                    st.caption(_("Why there is no reference: {problem}").format(problem=escape_markdown(problem)))

with tabs[FILL]:
    if figures is None:
        st.caption(_("Synthetic traffic needs a telemetry database that can be read."))
    else:
        st.markdown(
            _(
                "Replays held-out text of the model selected in the sidebar (the served version, or any bundle listed "
                "there) as typing: seeded users are served a suggestion at every position, accept it exactly when the "
                "text goes on with it, and every suggestion is recorded (surface *synthetic*) with its true outcome."
            )
        )
        done = st.session_state.pop(FILLED_KEY, None)
        if done:
            st.success(escape_markdown(done))
        if teacher.gate(_("synthetic fills"), why=_("write into the database every figure on this page comes from")):
            cols = st.columns(3)
            count = cols[0].number_input(_("Suggestions"), 1, MAX_SYNTHETIC, 200, 50, key="mon_fill_count")
            seed = cols[1].number_input(_("Seed"), 0, 2**31 - 1, 1, 1, key="mon_fill_seed")
            sessions = cols[2].number_input(_("Simulated users"), 1, 20, 3, 1, key="mon_fill_sessions")
            if st.button(_("Fill with synthetic traffic"), key="mon_fill", type="primary"):
                source = models.selected_model()
                if source is None:
                    st.warning(_("No model is selected: pick one in the sidebar first."))
                else:
                    try:
                        documents = held_out(source.manifest).val
                        with st.spinner(_("Serving {count} synthetic suggestions...").format(count=int(count))):
                            result = traffic.replay(
                                source, documents, seed=int(seed), sessions=int(sessions), store=store,
                                max_events=int(count),
                            )  # fmt: skip
                    except (CorpusError, ValueError, OSError) as e:
                        st.warning(_("No synthetic traffic: {error}").format(error=escape_markdown(e)))
                    else:
                        st.session_state[FILLED_KEY] = _(
                            "Served {events} synthetic suggestions with version {version} ({recorded} recorded, "
                            "{shown} shown, {accepted} accepted, {errors} errors)."
                        ).format(
                            events=result.events, version=result.version, recorded=result.recorded,
                            shown=result.shown, accepted=result.accepted, errors=result.errors,
                        )  # fmt: skip
                        st.rerun()
