"""A section of a page that reruns alone when one of its own widgets moves (st.fragment), view export kept whole.

    @fragment.section
    def picture_section() -> None:
        ...  # the widgets that drive this section, and everything that depends on them

    picture_section()

A widget drawn inside an st.fragment makes the browser ask for a rerun of that fragment only: app.py (the
sidebar), the page's other sections and their computations do not run. That is correct only when every element
that depends on the section's widgets is drawn inside it (tests/views/test_fragments_attention.py holds each
section to a plain whole-script run). What the section cannot do: draw into a container made outside it.

The one run-scoped thing a fragment run would leave stale is the sidebar's "Download this view" file
(ui.export): app.py starts an empty list of the run's charts and every chart joins it, but a fragment run does
not run app.py, so the section's new charts would pile up after the old ones. `section` records where its
charts sit in that list in a whole-script run and, in a fragment run, puts the new charts in their place.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui import export

_SPANS = "_fragment_export_spans"  # session key: {section name: (start, end)} of its charts in the view list


def _fragment_run() -> bool:
    """True while Streamlit runs only fragments (a widget inside one moved), not the whole script."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def section(func: Callable[..., None]) -> Callable[..., None]:
    """`func` as an st.fragment whose charts keep their place in the view's export (see the module docstring)."""
    name = f"{func.__module__}.{func.__qualname__}"

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> None:
        view = st.session_state.get(export._VIEW)
        spans: dict[str, tuple[int, int]] = st.session_state.setdefault(_SPANS, {})
        if view is None:  # no export list (a page run on its own): nothing to keep in order
            func(*args, **kwargs)
            return
        if not _fragment_run() or name not in spans:
            start = len(view)
            try:
                func(*args, **kwargs)
            finally:
                if not _fragment_run():
                    spans[name] = (start, len(view))
            return
        start, end = spans[name]
        drawn: list = []
        st.session_state[export._VIEW] = drawn  # this run's charts of the section, collected apart
        try:
            func(*args, **kwargs)
        finally:
            st.session_state[export._VIEW] = view
            kept = drawn[: max(0, export.MAX_CHARTS - (len(view) - (end - start)))]  # export's cap still holds
            view[start:end] = kept
            shift = start + len(kept) - end  # sections drawn after this one move by the change of its length
            spans.update({n: (s + shift, e + shift) if s >= end else (s, e) for n, (s, e) in spans.items()})
            spans[name] = (start, start + len(kept))

    return st.fragment(run)
