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
        "What this version costs to keep, to train and to serve, and whether this machine serves a whole class in "
        "time. **Storage** counts the bundle, the registry and the telemetry database. **Training compute** "
        "estimates FLOPs from the architecture (6 per parameter per token, plus attention). **Serving** times real "
        "suggestions after held-out text. **Queueing** feeds those measured times to a simulated class: learners ask "
        "for suggestions at random (Poisson) moments, a training run holds one core, and a suggestion waits its "
        "turn when every worker is busy. The latency a learner feels is the wait plus the service time."
    )
    key = (bundle.version, str(bundle.path), corpus.fingerprint if corpus is not None else None)
    where = (str(registry), str(telemetry_location()))
    shown = st.session_state.setdefault(SHOWN_KEY, set())
    if st.button(
        "Measure the cost",
        key="rel_cost",
        help=f"Times {SAMPLES} suggestions on the held-out text and simulates the class's queue (seconds)",
    ):
        with st.spinner(
            f"Timing {SAMPLES} suggestions of version {escape_markdown(bundle.version)} and simulating the class..."
        ):
            try:
                _measured(*key, *where, corpus)
                shown.add(key + where)
            except CorpusError as err:  # a ValueError too: the text the held-out prompts come from
                st.warning(
                    f"The cost could not be measured: {escape_markdown(err)}. On this page, upload the bundle's "
                    "training text at the top of the page: suggestions are timed on its held-out "
                    "documents."
                )
            except (BundleError, OSError, ValueError) as err:
                st.warning(f"The cost could not be measured: {escape_markdown(err)}")
    if key + where not in shown:
        st.info(
            f"Press **Measure the cost** to time {SAMPLES} suggestions of version {escape_markdown(bundle.version)} "
            "and simulate a class on this machine (a few seconds)."
        )
        return
    report, when = _measured(*key, *where, corpus)
    show(report, when, {where[0]: "the registry folder", where[1]: "the telemetry database"})


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
        f"Measured at {when} on this shared machine (times change from run to run). Request rate: "
        f"{q.requests_per_learner_per_second:g} suggestion(s) per learner a second, "
        f"{escape_markdown(named_places(q.rate_note, places))}."
    )
    projector.dataframe(pd.DataFrame(report.table()), hide_index=True, key="rel_cost_table")
    curve = pd.DataFrame(
        {
            "learners": [p.learners for p in q.curve],
            "offered load": [p.offered_load for p in q.curve],
            "stable": [p.stable for p in q.curve],
            "wait p95 ms": [p.wait_p95_ms for p in q.curve],
            "time to a suggestion p95 ms": [p.sojourn_p95_ms for p in q.curve],
        }
    )
    fig = charts.lines(
        curve["learners"].tolist(),
        {
            "wait p95": curve["wait p95 ms"].tolist(),
            "time to a suggestion p95": curve["time to a suggestion p95 ms"].tolist(),
        },
        title="p95 wait and time to a suggestion by class size",
        x_title="learners in the class",
        y_title="milliseconds",
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
                text=f"target {q.latency_target_ms:g} ms",
                showarrow=False,
                yanchor="bottom",
                xanchor="left",
            ),
            dict(
                yref="paper",
                y=1.0,
                x=q.largest_class,
                text=f"largest class {q.largest_class:,}",
                showarrow=False,
                yanchor="top",
                xanchor="right",
            ),
        ],
    )
    beyond = [p.learners for p in q.curve if not p.stable]
    unstable = f" From {beyond[0]} learners the queue is unstable (offered load 1 or more)." if beyond else ""
    at_class = "unstable" if q.sojourn_p95_ms is None else f"{q.sojourn_p95_ms:.1f} ms"
    best = f"{q.largest_class:,}{' or more' if q.largest_class_capped else ''}"
    summary = (
        f"With {q.serving_workers} serving worker(s) and {q.requests_per_learner_per_second:g} suggestion(s) per "
        f"learner a second, the p95 time to a suggestion stays within {q.latency_target_ms:g} ms up to {best} "
        f"learners; for {q.learners} learners it is {at_class} (utilisation {q.utilisation:.2f}).{unstable}"
    )
    companion.chart(fig, curve, summary, key="rel_cost_curve")
    for note in report.notes:
        st.caption(f"Note: {escape_markdown(named_places(note, places))}")
