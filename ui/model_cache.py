"""What the model and release pages (Training, ...) compute on every rerun, cached per server: ui/cached.py's rule
(its docstring) for the pages of the Transformer and Release groups that ui/cached.py does not serve.

Two costs are avoided. The computation itself: a model's forward pass for a picture nobody changed. And the
definition: a function decorated with st.cache_* inside a page script is decorated again on every rerun (the
script runs top to bottom each time), and the decorator hashes the function's source to find its cache, a
millisecond or more per function per rerun; defined here, in a module imported once, it is decorated once.

A model is not hashed: `version` (the bundle's content hash) stands for it. tests/views/test_model_cache.py holds
each function to the uncached core call.
"""

from __future__ import annotations

import streamlit as st

from core.lessons.overfit import Overfit, overfit_on_corpus
from core.model import runs
from core.model.corpus import Corpus
from core.model.gpt import GPT
from core.model.run_events import Snapshot
from core.model.tokenizer import SPECIAL_TOKENS, CharTokenizer


@st.cache_data(max_entries=8, show_spinner=False)
def attention_snapshot(
    _model: GPT, _tokenizer: CharTokenizer, version: str, text: str, layer: int, head: int, step: int
) -> Snapshot:
    """core.model.runs.attention_snapshot of the model whose bundle version is `version` (a forward pass): the
    Training page's picture of the shipped model before any run, the same on every rerun."""
    return runs.attention_snapshot(_model, _tokenizer, text, layer=layer, head=head, step=step)


@st.cache_resource(show_spinner="Reading the standard-library corpus...")
def stdlib_corpus() -> Corpus:
    """The pinned standard-library corpus, read once per server (shared, never changed by a caller)."""
    return runs.load_run_corpus("stdlib")


@st.cache_data(max_entries=8, show_spinner="Training a tiny model on one batch...")
def overfit_result(steps: int) -> Overfit:
    """core.lessons.overfit.overfit_on_corpus on the standard library with seed 0: the Training page's exercise."""
    return overfit_on_corpus(stdlib_corpus(), steps=steps, seed=0)


@st.cache_data(max_entries=16, show_spinner=False)
def vocabulary_size(fingerprint: str, _text: str) -> int:
    """Distinct characters plus the special tokens, counted once per text (97 ms for the stdlib corpus); keyed by
    the text's fingerprint, so the text itself is never hashed on a rerun."""
    return len(set(_text)) + len(SPECIAL_TOKENS)
