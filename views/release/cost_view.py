"""The Release page's "What it costs" tab: the cost report of the selected bundle.

It times the model, so it runs only when the button is pressed; the report is cached per bundle version (and
corpus, registry, database), so a second press, or another session, shows the same snapshot at once, with the
time it was taken. Notes come from files and the environment: every markdown value is escaped, and the server's
paths are named, never shown.
"""

from __future__ import annotations

import datetime

import pandas as pd
import streamlit as st

from core import i18n
from core.i18n import _
from core.model.bundle_checks import BundleError
from core.model.corpus import CorpusError
from core.telemetry.cost import CostReport, cost_report
from core.telemetry.store import telemetry_location
from ui import charts, companion, models, projector
from ui.text import escape_markdown

SAMPLES = 100  # suggestions timed on the page: a few seconds for the shipped model on one thread
SHOWN_KEY = "rel_cost_shown"  # session state: the report keys measured (or fetched from the cache) this session


@st.cache_data(max_entries=8, show_spinner=False)
def _measured(version: str, path: str, corpus_key: str | None, registry: str, telemetry: str, _corpus) -> tuple:
    """(report, when): one measurement per bundle version, corpus, registry and database."""
    report = cost_report(
        path,
        registry=registry,
        telemetry=telemetry,
        corpus=_corpus,
        samples=SAMPLES,
        training_slots=models.MAX_RUNNING,
    )
    return report, datetime.datetime.now().strftime("%H:%M:%S")


def section(bundle, corpus, registry) -> None:
    st.markdown(
        _(
            "What this version costs to keep, to train and to serve, and whether this machine serves a whole class "
            "in time. **Storage** counts the bundle, the registry and the telemetry database. **Training compute** "
            "estimates FLOPs from the architecture (6 per parameter per token, plus attention). **Serving** times "
            "real suggestions after held-out text. **Queueing** feeds those measured times to a simulated class: "
            "learners ask for suggestions at random (Poisson) moments, a training run holds one core, and a "
            "suggestion waits its turn when every worker is busy. The latency a learner feels is the wait plus the "
            "service time."
        )
    )
    key = (bundle.version, str(bundle.path), corpus.fingerprint if corpus is not None else None)
    where = (str(registry), str(telemetry_location()))
    shown = st.session_state.setdefault(SHOWN_KEY, set())
    if st.button(
        _("Measure the cost"),
        key="rel_cost",
        help=_("Times {samples} suggestions on the held-out text and simulates the class's queue (seconds)").format(
            samples=str(SAMPLES)
        ),
    ):
        with st.spinner(
            _("Timing {samples} suggestions of version {version} and simulating the class...").format(
                samples=str(SAMPLES), version=escape_markdown(bundle.version)
            )
        ):
            try:
                _measured(*key, *where, corpus)
                shown.add(key + where)
            except CorpusError as err:  # a ValueError too: the text the held-out prompts come from
                st.warning(
                    _(
                        "The cost could not be measured: {error}. On this page, upload the bundle's training text at "
                        "the top of the page: suggestions are timed on its held-out documents."
                    ).format(error=escape_markdown(err))
                )
            except (BundleError, OSError, ValueError) as err:
                st.warning(_("The cost could not be measured: {error}").format(error=escape_markdown(err)))
    if key + where not in shown:
        st.info(
            _(
                "Press **Measure the cost** to time {samples} suggestions of version {version} and simulate a class "
                "on this machine (a few seconds)."
            ).format(samples=str(SAMPLES), version=escape_markdown(bundle.version))
        )
        return
    report, when = _measured(*key, *where, corpus)
    show(report, when, {where[0]: _("the registry folder"), where[1]: _("the telemetry database")})


def named_places(text: str, places: dict[str, str]) -> str:
    """`text` with each server path of `places` (as is, or quoted as a note quotes it) replaced by its name:
    a learner sees which place a note is about, never where it lives on the server."""
    for path, name in places.items():
        text = text.replace(repr(path), name).replace(path, name)
    return text


def show(report: CostReport, when: str, places: dict[str, str] | None = None) -> None:
    """The report as a table and the queueing curve; `places` ({server path: name}) are named in the notes."""
    places = places or {}
    q = report.queueing
    st.caption(
        _(
            "Measured at {when} on this shared machine (times change from run to run). Request rate: {rate} "
            "suggestion(s) per learner a second, {note}."
        ).format(
            when=when,
            rate=i18n.formatted(q.requests_per_learner_per_second),
            note=escape_markdown(named_places(q.rate_note, places)),
        )
    )
    # the report's rows are core.telemetry.cost's; its column headers are shown in the reader's language
    headers = {"figure": _("figure"), "value": _("value"), "unit": _("unit")}
    projector.dataframe(pd.DataFrame(report.table()).rename(columns=headers), hide_index=True, key="rel_cost_table")
    learners, wait, sojourn = _("learners"), _("wait p95 ms"), _("time to a suggestion p95 ms")
    curve = pd.DataFrame(
        {
            learners: [p.learners for p in q.curve],
            _("offered load"): [p.offered_load for p in q.curve],
            _("stable"): [p.stable for p in q.curve],
            wait: [p.wait_p95_ms for p in q.curve],
            sojourn: [p.sojourn_p95_ms for p in q.curve],
        }
    )
    fig = charts.lines(
        curve[learners].tolist(),
        {_("wait p95"): curve[wait].tolist(), _("time to a suggestion p95"): curve[sojourn].tolist()},
        title=_("p95 wait and time to a suggestion by class size"),
        x_title=_("learners in the class"),
        y_title=_("milliseconds"),
        shapes=[
            dict(
                type="line",
                xref="paper",
                x0=0,
                x1=1,
                y0=q.latency_target_ms,
                y1=q.latency_target_ms,
                line=dict(color=charts.OKABE_ITO[5], dash="dot"),
            ),
            dict(
                type="line",
                yref="paper",
                y0=0,
                y1=1,
                x0=q.largest_class,
                x1=q.largest_class,
                line=dict(color=charts.OKABE_ITO[7], dash="dash"),
            ),
        ],
        annotations=[
            dict(
                xref="paper",
                x=0.0,
                y=q.latency_target_ms,
                text=_("target {ms} ms").format(ms=i18n.formatted(q.latency_target_ms)),
                showarrow=False,
                yanchor="bottom",
                xanchor="left",
            ),
            dict(
                yref="paper",
                y=1.0,
                x=q.largest_class,
                text=_("largest class {learners}").format(learners=i18n.integer(q.largest_class)),
                showarrow=False,
                yanchor="top",
                xanchor="right",
            ),
        ],
    )
    beyond = [p.learners for p in q.curve if not p.stable]
    unstable = (
        " "
        + _("From {learners} learners the queue is unstable (offered load 1 or more).").format(learners=str(beyond[0]))
        if beyond
        else ""
    )
    at_class = _("unstable") if q.sojourn_p95_ms is None else i18n.number(q.sojourn_p95_ms, 1) + " ms"
    largest = i18n.integer(q.largest_class)
    best = _("{learners} or more").format(learners=largest) if q.largest_class_capped else largest
    summary = _(
        "With {workers} serving worker(s) and {rate} suggestion(s) per learner a second, the p95 time to a "
        "suggestion stays within {target} ms up to {best} learners; for {learners} learners it is {at_class} "
        "(utilisation {utilisation}).{unstable}"
    ).format(
        workers=str(q.serving_workers),
        rate=i18n.formatted(q.requests_per_learner_per_second),
        target=i18n.formatted(q.latency_target_ms),
        best=best,
        learners=str(q.learners),
        at_class=at_class,
        utilisation=i18n.number(q.utilisation, 2),
        unstable=unstable,
    )
    companion.chart(fig, curve, summary, key="rel_cost_curve")
    for note in report.notes:
        st.caption(_("Note: {note}").format(note=escape_markdown(named_places(note, places))))
