"""Which model bundle the pages use, loaded once per server, and the shared training queue.

The sidebar offers the shipped default bundle plus the bundles this browser session trained (other
sessions' runs are never listed). A bundle is loaded through core.bundle.load_bundle, which verifies
it first; the loaded model is cached per server, keyed by the files' identity so an edited bundle is
verified again. Pages call `require_bundle()`.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import streamlit as st
import torch

from core.bundle import Bundle, BundleError, load_bundle
from core.jobs import JobQueue

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_DIR = ROOT / "models" / "default"
SHIPPED_LABEL = "Shipped default (Python standard library)"
RUNS_DIR = Path(os.environ.get("LAB_RUNS_DIR", ROOT / "runs"))
MAX_RUNNING = int(os.environ.get("LAB_MAX_TRAINING_RUNS", "1"))
_SESSION_BUNDLES = "lab_session_bundles"

# One torch thread for the server: a page's forward passes on this small model are small matmuls that a
# second thread barely speeds up, while a background training run or another class member needs that
# core. (Measured by the autocomplete work with the machine under load: 5.8 ms/token on one thread,
# 57 ms/token on two.) LAB_TORCH_THREADS overrides it.
torch.set_num_threads(int(os.environ.get("LAB_TORCH_THREADS", "1")))


def session_id() -> str:
    """A random id for this browser session: the owner of its training runs."""
    return st.session_state.setdefault("lab_session_id", uuid.uuid4().hex)


@st.cache_resource
def job_queue() -> JobQueue:
    """One queue per server: at most MAX_RUNNING trainings at once, the rest wait their turn."""
    return JobQueue(max_running=MAX_RUNNING)


def _identity(path: Path) -> tuple:
    """Size and modification time of every file: changes when a bundle is edited or replaced."""
    try:
        return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in path.iterdir()))
    except OSError:
        return ()


@st.cache_resource(max_entries=16, show_spinner="Verifying and loading the model bundle...")
def _load(path: str, identity: tuple) -> Bundle:
    return load_bundle(path)


def load(path: Path) -> Bundle:
    """Verify and load the bundle at `path` (cached per server); raises BundleError."""
    return _load(str(path), _identity(path))


def session_bundles() -> list[tuple[str, str]]:
    """(label, path) of every bundle this session trained, oldest first."""
    return st.session_state.setdefault(_SESSION_BUNDLES, [])


def add_session_bundle(label: str, path: Path) -> None:
    session_bundles().append((label, str(path)))


def choices() -> dict[str, Path]:
    options = {SHIPPED_LABEL: SHIPPED_DIR} if SHIPPED_DIR.is_dir() else {}
    for label, path in session_bundles():
        options[label] = Path(path)
    return options


def sidebar() -> None:
    """The bundle picker with the selected manifest's version and safety status, on every page."""
    options = choices()
    with st.sidebar:
        st.subheader("Model")
        if not options:
            st.caption("No model bundle yet: train one on the Training page.")
            return
        label = st.selectbox("Model bundle", list(options), key="lab_bundle")
        try:
            bundle = load(options[label])
        except BundleError as err:
            st.error(f"This bundle cannot be used: {err}")
            return
        arch = bundle.config
        st.caption(f"Version `{bundle.version}` · {arch.n_layer} layers, {arch.n_head} heads, width {arch.d_model}, "
                   f"context {arch.context_length}, vocabulary {arch.vocab_size}")
        if bundle.safe:
            st.caption("Safety: passed its training checks (causal mask on).")
        else:
            st.warning(f"Unsafe bundle: {bundle.manifest.get('unsafe_reason') or 'marked unsafe'}")


def selected_bundle() -> Bundle | None:
    options = choices()
    label = st.session_state.get("lab_bundle")
    path = options.get(label) or next(iter(options.values()), None)
    if path is None:
        return None
    try:
        return load(path)
    except BundleError:
        return None


def require_bundle() -> Bundle:
    """The selected bundle, or a message saying what to do and a stop of this page's run."""
    bundle = selected_bundle()
    if bundle is None:
        st.info("This page needs a model. Pick a usable bundle in the sidebar, or train one on the Training page.")
        st.stop()
    return bundle
