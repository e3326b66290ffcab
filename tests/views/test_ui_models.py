"""ui.models when the registry empties between two reads of one rerun: the picker listed the released version
(served() was not None when `choices()` ran), then `served()` finds nothing. The sidebar and
`selected_served()` must then show and return nothing, never raise on None."""

import itertools

from streamlit.testing.v1 import AppTest

import ui.models
from core.release.registry import Served

LISTED = Served(None, "0123456789abcdef", "transformer", "serving the current version", False)


def _script():
    import streamlit as st

    from ui import models

    st.session_state["lab_bundle"] = models.RELEASED_LABEL
    st.text(f"selected: {models.selected_served()!r}")
    models.sidebar()


def test_a_registry_emptied_after_the_picker_listed_it_serves_nothing_without_an_error(
    monkeypatch, tmp_path, fresh_streamlit_caches
):
    monkeypatch.setattr(ui.models, "SHIPPED_DIR", tmp_path / "no-shipped-bundle")
    # served() alternates: listed when choices() asks, gone when the caller reads what is served
    answers = itertools.cycle([LISTED, None])
    calls = []
    monkeypatch.setattr(ui.models, "served", lambda: calls.append(1) or next(answers))
    at = AppTest.from_function(_script, default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.text] == ["selected: None"]
    # choices + served in selected_served, then in sidebar choices, the version for the URL (a None read: no
    # version is pinned) and the description
    assert len(calls) == 5
    assert "model" not in at.query_params
    assert at.sidebar.selectbox(key="lab_bundle").value == ui.models.RELEASED_LABEL
