"""ui.models when the registry empties between two reads of one rerun: the picker listed the released version
(served_version() was not None when `choices()` ran), then `served_version()` finds nothing. The sidebar and
`selected_model()` must then show and return nothing, never raise on None. And the server's LAB_* settings
it cannot use are named above every page instead of failing its import."""

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

import ui.models
from core.release.registry.served import ServedVersion

LISTED = ServedVersion(None, "0123456789abcdef", "transformer", "serving the current version", False)


def _script():
    import streamlit as st

    from ui import models

    st.session_state["lab_bundle"] = models.RELEASED_LABEL
    st.text(f"selected: {models.selected_model()!r}")
    models.sidebar()


def test_a_registry_emptied_after_the_picker_listed_it_serves_nothing_without_an_error(
    monkeypatch, tmp_path, fresh_streamlit_caches
):
    monkeypatch.setattr(ui.models, "SHIPPED_DIR", tmp_path / "no-shipped-bundle")
    # served_version() alternates: listed when choices() asks, gone when the caller reads what is served
    answers = itertools.cycle([LISTED, None])
    calls = []
    monkeypatch.setattr(ui.models, "served_version", lambda: calls.append(1) or next(answers))
    at = AppTest.from_function(_script, default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.text] == ["selected: None"]
    # choices + served in selected_model, then in sidebar choices, the version for the URL (a None read: no
    # version is pinned) and the description
    assert len(calls) == 5
    assert "model" not in at.query_params
    assert at.sidebar.selectbox(key="lab_bundle").value == ui.models.RELEASED_LABEL


# The server's settings are read when ui.models is first imported, so the app runs in a process of its own.
BAD_SETTINGS = """
import json, torch
from tests.apptest import open_page
at = open_page("temperature")
print(json.dumps({"warnings": [w.value for w in at.warning], "threads": torch.get_num_threads()}))
"""


def test_settings_the_server_cannot_use_are_named_above_the_page_and_their_defaults_used(tmp_path):
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "LAB_MAX_TRAINING_RUNS": "two", "LAB_TORCH_THREADS": "0", "LAB_REGISTRY_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", BAD_SETTINGS], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]  # open_page asserts the page ran without an exception
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    warnings = " ".join(shown["warnings"])
    assert "LAB\\_MAX\\_TRAINING\\_RUNS='two' is not a whole number from 1 to 64" in warnings, warnings
    assert "LAB\\_TORCH\\_THREADS='0'" in warnings and "Using 1 until the server restarts" in warnings, warnings
    assert shown["threads"] == 1
