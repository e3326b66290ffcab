"""Shared test settings: hypothesis without deadlines (a shared 2-core CI machine), fresh Streamlit caches."""
import os
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Tiny test models run fastest on one thread, and it leaves the other core to the browser tests' server.
torch.set_num_threads(int(os.environ.get("LAB_TEST_THREADS", "1")))

settings.register_profile("lab", deadline=None, max_examples=60, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "lab"))


@pytest.fixture
def fresh_streamlit_caches():
    """st.cache_* is shared across AppTest instances in one process: start each page test clean."""
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()
    yield
