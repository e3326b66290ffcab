"""Fragments (st.fragment): a page section that reruns alone when one of its own widgets moves, with the view's
export kept whole; and a polling fragment, kept on the page it was drawn on.

A section is correct only when everything that depends on its widgets is drawn inside it. A fragment run does not
run app.py, so `section` puts its new charts in their place in the view's export list instead of after the old
ones. `polled`: when the server switches page (a learner following the teacher), a tick the browser sent before it
heard of the new page runs as a run of the old page, and Streamlit (1.67) then blanks the new page; a tick that
finds itself on another page switches back to it instead of running its body.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import streamlit as st
from streamlit.navigation.page import StreamlitPage
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui import export, language

_SPANS = "_fragment_export_spans"  # session key: {section name: (start, end)} of its charts in the view list
_PAGE = "_fragment_page"  # session key: (page_script_hash, st.navigation's page) of the last whole-script run


def fragment_run() -> bool:
    """True while Streamlit runs only fragments (a widget inside one moved), not the whole script."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def section(func: Callable[..., None]) -> Callable[..., None]:
    """`func` as an st.fragment whose charts keep their place in the view's export (see the module docstring)."""
    name = f"{func.__module__}.{func.__qualname__}"

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> None:
        language.apply()  # a fragment run does not run app.py, which sets it
        view = st.session_state.get(export._VIEW)
        spans: dict[str, tuple[int, int]] = st.session_state.setdefault(_SPANS, {})
        if view is None:  # no export list (a page run on its own): nothing to keep in order
            func(*args, **kwargs)
            return
        if not fragment_run() or name not in spans:
            start = len(view)
            try:
                func(*args, **kwargs)
            finally:
                if not fragment_run():
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


def remember_page(page: StreamlitPage) -> None:
    """app.py, with st.navigation's page: the page of this whole-script run, the one a polled fragment's tick belongs
    to. The page object itself is kept: a fragment run has no registry of the app's pages to look a path up in, and
    st.switch_page takes the object as it is."""
    ctx = get_script_run_ctx()
    if ctx is not None and not ctx.fragment_ids_this_run:
        st.session_state[_PAGE] = (ctx.page_script_hash, page)  # the hash st.navigation resolved for this run


def left_page() -> StreamlitPage | None:
    """In a fragment run: the page this session is on when the run is one of another page (a tick sent before a
    switch_page, see the module docstring); None when the run is on its page, or the page is not known."""
    ctx = get_script_run_ctx()
    kept = st.session_state.get(_PAGE)
    if ctx is None or not ctx.fragment_ids_this_run or kept is None:
        return None
    page_script_hash, page = kept
    return None if ctx.page_script_hash == page_script_hash else page


def polled(run_every: float | None) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """st.fragment(run_every=...) whose tick on a page this session has left switches back to its page (the URL's
    query parameters kept) instead of running: see the module docstring. Same fragment identity as st.fragment's
    (functools.wraps keeps the module and name it is keyed on)."""

    def wrap(func: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> None:
            language.apply()  # a fragment run does not run app.py, which sets it
            page = left_page()
            if page is not None:
                st.switch_page(page, query_params=st.query_params.to_dict())
            func(*args, **kwargs)

        return st.fragment(run, run_every=run_every)

    return wrap
