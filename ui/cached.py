"""What the pages compute on every rerun, cached per server: one rule for every page.

Each function is a core computation keyed on its inputs, so a widget that does not change them reuses the result.
Defined here, in a module imported once, a function is decorated once (inside a page script st.cache_* would hash
its source again on every rerun). Only computations that cost more than st.cache_data's pickled copy are here (a
result of many small tensors can cost as much to copy as to compute). A model is not hashed: its `version` (the
bundle's content hash) stands for it. Every caller gets its own copy, so a page may not change what another sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import streamlit as st
import torch
from torch import Tensor

from core import i18n
from core.i18n import _
from core.lessons import masks as masking
from core.lessons import rope as rope_lab
from core.lessons import scores as lessons
from core.lessons.example_run import EXAMPLE
from core.lessons.overfit import Overfit, overfit_on_corpus
from core.model import introspect
from core.model.corpus import Corpus, CorpusError
from core.model.gpt import GPT
from core.model.tokenizer import CharTokenizer
from core.release.evaluation.held_out import held_out
from core.runs import events, job
from core.runs.events import Snapshot
from core.telemetry import monitor, traffic
from ui import charts
from ui.companion import matrix_table
from ui.suggestion_view import telemetry_store

ENTRIES = 64  # per function: a class exploring a page stays well inside it


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def score_variance(widths: tuple[int, ...], seed: int) -> list[lessons.VarianceRow]:
    """The lesson's `score_variance`: 4096 random (q, k) pairs per width, about 150 ms."""
    return lessons.score_variance(list(widths), seed=seed)


@dataclass(frozen=True)
class GeometryView:
    """What the Score geometry page shows of the lesson's `score_geometry` for batch element b and head h, as
    plain numbers: the whole result's tensors would cost more to copy out of the cache than the page reads."""

    scale: float
    scores: list[list[float]]  # (T, S) of element b, head h
    weights: list[list[float]]  # (T, S)
    max_abs_score: float  # of that score matrix
    max_weight: list[float]  # (T,) largest weight of each row
    steps: tuple[lessons.ShapeStep, ...]
    score_variance: float  # over the whole batch
    expected_variance: float
    numel: int  # scores in the whole batch


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def score_geometry(B: int, H: int, T: int, D: int, seed: int, scaled: bool, b: int, h: int) -> GeometryView:
    """The lesson's `score_geometry(B, H, T, D, seed=seed, scaled=scaled)`, read at element b, head h."""
    geo = lessons.score_geometry(B, H, T, D, seed=seed, scaled=scaled)
    return GeometryView(
        geo.scale,
        geo.result.scores[b, h].tolist(),
        geo.result.weights[b, h].tolist(),
        geo.max_abs_score[b, h].item(),
        geo.max_weight[b, h].tolist(),
        geo.steps,
        geo.score_variance,
        geo.expected_variance,
        geo.result.scores.numel(),
    )


@dataclass(frozen=True)
class SweepPoint:
    """The numbers of one `RenormalisedRow` that the Masks page's sweep draws and tables."""

    forbidden_logit: float
    kept_mass: float
    undefined: bool
    max_error: float


@st.cache_data(max_entries=4, show_spinner=False)
def worked_row_sweep(row: int, forbidden_logits: tuple[float, ...]) -> list[SweepPoint]:
    """`renormalise_after_softmax` of row `row` of the worked example
    (`worked_example`) for each forbidden logit: the Masks page's sweep (12 ms), kept as
    plain numbers (the rows' tensors would take 30 ms to unpickle)."""
    example = lessons.worked_example()
    scores, allowed = example.result.scores[0, row], example.mask[row]  # (S,), (S,)
    rows = [masking.renormalise_after_softmax(scores, allowed, forbidden_logit=x) for x in forbidden_logits]
    return [SweepPoint(r.forbidden_logit, r.kept_mass, r.undefined, r.max_error) for r in rows]


@st.cache_data(max_entries=len(i18n.LANGUAGES), show_spinner=False)
def worked_example_weights(lang: str = i18n.DEFAULT) -> tuple[list[list[float | None]], pd.DataFrame]:
    """Start here's picture: the worked example's weights (`worked_example`) with the forbidden
    cells None, and their data table (`matrix_table`, its headers in `lang`); the same on every run of every
    learner who reads that language."""
    example = lessons.worked_example()
    weights = charts.masked(example.result.weights[0].tolist(), example.mask.tolist())  # (T, S)
    labels = [str(i) for i in range(len(weights))]
    with i18n.speaking(lang):
        return weights, matrix_table(weights, labels, labels, value_name=_("weight"))


@st.cache_data(max_entries=1, show_spinner=False)
def example_source() -> str:
    """The text of examples/attention_by_hand.py that Start here prints, read once per server, not every rerun."""
    return EXAMPLE.read_text(encoding="utf-8")


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def attention_grid(_model: GPT, version: str, ids: tuple[int, ...]) -> Tensor:
    """`attention_grid` of the model whose bundle version is `version`."""
    return introspect.attention_grid(_model, list(ids))


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def rope_offset_scores(
    D: int, offsets: tuple[int, ...], positions: tuple[int, ...], base: float
) -> rope_lab.OffsetScores:
    """The lesson's `offset_scores` of the RoPE page's seeded q and k of width D (`seeded_qk`):
    its offset curves rotate 4 × 65 pairs of vectors, the same for every m and n with the same anchors."""
    q, k = rope_lab.seeded_qk(D)
    return rope_lab.offset_scores(q, k, list(offsets), list(positions), base)


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def rope_layout_equivalence(D: int, m: int, n: int, base: float) -> rope_lab.LayoutEquivalence:
    """The lesson's `layout_equivalence` of the RoPE page's seeded q at position m and k at n (width D)."""
    q, k = rope_lab.seeded_qk(D)
    return rope_lab.layout_equivalence(torch.stack([q, k]), torch.tensor([m, n]), base)  # (2, D) at (m, n)


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def rope_on_off_scores(_model: GPT, version: str, ids: tuple[int, ...], layer: int, head: int) -> rope_lab.RopeOnOff:
    """The lesson's `rope_on_off_scores` of the model whose bundle version is `version`."""
    return rope_lab.rope_on_off_scores(_model, list(ids), layer, head)


def ids_key(ids: Sequence[int]) -> tuple[int, ...]:
    """Token ids as the hashable key the cached functions take."""
    return tuple(int(i) for i in ids)


@st.cache_data(max_entries=8, show_spinner=False)
def attention_snapshot(
    _model: GPT, _tokenizer: CharTokenizer, version: str, text: str, layer: int, head: int, step: int
) -> Snapshot:
    """The run's attention_snapshot of the model whose bundle version is `version` (a forward pass): the
    Training page's picture of the shipped model before any run, the same on every rerun."""
    return events.attention_snapshot(_model, _tokenizer, text, layer=layer, head=head, step=step)


# A cached function's show_spinner text is fixed when it is decorated, in no reader's language: the spinners below
# are drawn around the call instead, in the run's language (st.spinner shows only after half a second, so a cache
# hit draws nothing).


@st.cache_resource(show_spinner=False)
def _stdlib_corpus() -> Corpus:
    return job.load_run_corpus("stdlib")


def stdlib_corpus() -> Corpus:
    """The pinned standard-library corpus, read once per server (shared, never changed by a caller)."""
    with st.spinner(_("Reading the standard-library corpus...")):
        return _stdlib_corpus()


@st.cache_data(max_entries=8, show_spinner=False)
def _overfit_result(steps: int) -> Overfit:
    return overfit_on_corpus(_stdlib_corpus(), steps=steps, seed=0)


def overfit_result(steps: int) -> Overfit:
    """The lesson's `overfit_on_corpus` on the standard library with seed 0: the Training page's exercise."""
    with st.spinner(_("Training a tiny model on one batch...")):
        return _overfit_result(steps)


@st.cache_data(max_entries=16, show_spinner=False)
def vocabulary_size(fingerprint: str, _text: str, init_from: str | None = None) -> int:
    """A run's vocabulary (job.run_vocabulary_size: the text's characters, and the shipped model's it starts from),
    counted once per text (97 ms for the stdlib corpus); keyed by the text's fingerprint, so the text itself is never
    hashed on a rerun."""
    return job.run_vocabulary_size(_text, init_from)


@st.cache_data(max_entries=16, show_spinner=False)
def _telemetry_figures(path: str, stamp: tuple[int, int, int], kind: str, surfaces: tuple[str, ...]) -> monitor.Figures:
    return monitor.figures(monitor.load(telemetry_store(), kind=kind, surfaces=surfaces))


def telemetry_figures(path: str, stamp: tuple[int, int, int], kind: str, surfaces: tuple[str, ...]) -> monitor.Figures:
    """Every figure of one read of the database at `path`, computed again only when its `stamp` changed (a new
    event or a matured outcome; TelemetryStore.stamp): up to 200,000 rows take seconds to read and sum."""
    with st.spinner(_("Reading the telemetry database...")):
        return _telemetry_figures(path, stamp, kind, surfaces)


def reference_top1(version: str, source) -> tuple[tuple[float, ...] | None, str | None]:
    """The release-time top-1 reference of a version (see the monitor), once per server."""
    with st.spinner(_("Replaying the version's held-out text for its reference...")):
        return _reference_top1(version, source)


@st.cache_resource(max_entries=8, show_spinner=False)
def _reference_top1(version: str, _source) -> tuple[tuple[float, ...] | None, str | None]:
    try:
        documents = held_out(_source.manifest).val
        result = traffic.replay(
            _source, documents, seed=monitor.REFERENCE_SEED, store=None, max_events=monitor.REFERENCE_EVENTS
        )
    except (CorpusError, ValueError, OSError) as e:
        return None, str(e)
    return result.top1, None
