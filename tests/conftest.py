"""Shared test settings: hypothesis without deadlines (a shared 2-core CI machine), fresh Streamlit caches,
one trained tiny bundle for the model pages, and the store tests' databases (tests/db.py)."""

import os
import tempfile
import uuid
from pathlib import Path

import pytest
import torch
from db import engine, postgres_server  # noqa: F401 - fixtures: the store tests on SQLite and PostgreSQL
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent

# Tiny test models run fastest on one thread, and it leaves the other core to the browser tests' server.
TEST_THREADS = int(os.environ.get("LAB_TEST_THREADS", "1"))
torch.set_num_threads(TEST_THREADS)

# AppTest runs have no server to warm (ui/warmup.py): never let them open a socket to a lab on this machine's 8501.
os.environ.setdefault("LAB_WARMUP", "0")
# This process's scratch folder, removed when it exits (each run left two folders in /tmp before).
SCRATCH = tempfile.TemporaryDirectory(prefix="lab-tests-")

# Every suggestion served in a test is recorded (core.telemetry), into the test run's own database, not ./telemetry.db;
# one per pytest-xdist worker (.ci/run), which would otherwise inherit its parent's: a page test reads what it wrote.
if "PYTEST_XDIST_WORKER" in os.environ or "LAB_TELEMETRY_DB" not in os.environ:
    os.environ["LAB_TELEMETRY_DB"] = str(Path(SCRATCH.name) / "telemetry.db")

# Wrong teacher passcodes are counted per server in a file (ui.teacher, LAB_TEACHER_ATTEMPTS): each test gets its own
# (below), so one test's wrong passcodes never delay or lock out the next, and none lands beside ./class.db.
TEACHER_ATTEMPTS_DIR = Path(SCRATCH.name) / "teacher-attempts"
TEACHER_ATTEMPTS_DIR.mkdir()

settings.register_profile("lab", deadline=None, max_examples=60, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "lab"))


@pytest.fixture(autouse=True)
def test_threads():
    """Every test starts on LAB_TEST_THREADS torch threads. The command line run in-process sets its own (--threads,
    default 1), which would otherwise hold for the rest of the worker, so .ci/run's two-thread repeat ran most tests
    after the first such call on one thread."""
    torch.set_num_threads(TEST_THREADS)
    yield


@pytest.fixture(autouse=True)
def own_teacher_attempts(monkeypatch):
    """A record of wrong teacher passcodes of this test's own (see TEACHER_ATTEMPTS_DIR)."""
    monkeypatch.setenv("LAB_TEACHER_ATTEMPTS", str(TEACHER_ATTEMPTS_DIR / f"{uuid.uuid4().hex}.json"))


@pytest.fixture
def fresh_streamlit_caches():
    """st.cache_* is shared across AppTest instances in one process: start each page test clean."""
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()
    yield


@pytest.fixture(scope="session")
def trained_bundle_path(tmp_path_factory):
    """A tiny model trained for a few steps, saved once per session; the model pages' tests only read it."""
    from bundles import train_tiny_bundle

    return train_tiny_bundle(tmp_path_factory.mktemp("trained") / "bundle")


@pytest.fixture(scope="session")
def trained_bundle(trained_bundle_path):
    """trained_bundle_path loaded with core.model.bundle.load_bundle: the reference side of the page tests."""
    from core.model.bundle import load_bundle

    return load_bundle(trained_bundle_path)
