"""What the Training and Monitoring pages compute on every rerun, cached per server: ui/cached.py's rule (its
docstring) for pages of the Transformer and Release groups that ui/cached.py does not serve.

Two costs are avoided. The computation itself: a model's forward pass for a picture nobody changed. And the
definition: a function decorated with st.cache_* inside a page script is decorated again on every rerun (the
script runs top to bottom each time), and the decorator hashes the function's source to find its cache, a
millisecond or more per function per rerun; defined here, in a module imported once, it is decorated once.

A model is not hashed: `version` (the bundle's content hash) stands for it. tests/views/test_model_cache.py holds
each function to the uncached core call; the Monitoring page's two, moved here as they were, are held by its page
test (tests/views/test_page_monitoring.py).
"""

from __future__ import annotations

import streamlit as st

from core.lessons.overfit import Overfit, overfit_on_corpus
from core.model.corpus import Corpus, CorpusError
from core.model.gpt import GPT
from core.model.tokenizer import SPECIAL_TOKENS, CharTokenizer
from core.release.evaluation.held_out import held_out
from core.runs import events, job
from core.runs.events import Snapshot
from core.telemetry import monitor, traffic
from ui.suggestion_view import telemetry_store


@st.cache_data(max_entries=8, show_spinner=False)
def attention_snapshot(
    _model: GPT, _tokenizer: CharTokenizer, version: str, text: str, layer: int, head: int, step: int
) -> Snapshot:
    """The run's attention_snapshot of the model whose bundle version is `version` (a forward pass): the
    Training page's picture of the shipped model before any run, the same on every rerun."""
    return events.attention_snapshot(_model, _tokenizer, text, layer=layer, head=head, step=step)


@st.cache_resource(show_spinner="Reading the standard-library corpus...")
def stdlib_corpus() -> Corpus:
    """The pinned standard-library corpus, read once per server (shared, never changed by a caller)."""
    return job.load_run_corpus("stdlib")


@st.cache_data(max_entries=8, show_spinner="Training a tiny model on one batch...")
def overfit_result(steps: int) -> Overfit:
    """core.lessons.overfit.overfit_on_corpus on the standard library with seed 0: the Training page's exercise."""
    return overfit_on_corpus(stdlib_corpus(), steps=steps, seed=0)


@st.cache_data(max_entries=16, show_spinner=False)
def vocabulary_size(fingerprint: str, _text: str) -> int:
    """Distinct characters plus the special tokens, counted once per text (97 ms for the stdlib corpus); keyed by
    the text's fingerprint, so the text itself is never hashed on a rerun."""
    return len(set(_text)) + len(SPECIAL_TOKENS)


@st.cache_data(max_entries=16, show_spinner="Reading the telemetry database...")
def telemetry_figures(path: str, stamp: tuple[int, int, int], kind: str, surfaces: tuple[str, ...]) -> monitor.Figures:
    """Every figure of one read of the database at `path`, computed again only when its `stamp` changed (a new
    event or a matured outcome; TelemetryStore.stamp): up to 200,000 rows take seconds to read and sum."""
    return monitor.figures(monitor.load(telemetry_store(), kind=kind, surfaces=surfaces))


@st.cache_resource(max_entries=8, show_spinner="Replaying the version's held-out text for its reference...")
def reference_top1(version: str, _source) -> tuple[tuple[float, ...] | None, str | None]:
    """The release-time top-1 reference of a version (core.telemetry.monitor's docstring), once per server."""
    try:
        documents = held_out(_source.manifest).val
        result = traffic.replay(
            _source, documents, seed=monitor.REFERENCE_SEED, store=None, max_events=monitor.REFERENCE_EVENTS
        )
    except (CorpusError, ValueError, OSError) as e:
        return None, str(e)
    return result.top1, None
