"""Follow a suggestion (issue 27): from the Autocomplete page's text to the suggestion shown, the call stack at the
suggestion's first forward pass crosses at most three wings (ui -> release -> model) and the run encodes the
prompt exactly once and cuts it to its window exactly once (issue 36: the predictor used to cut it again), for a
short text and for one longer than the model's context (tests/suggestion_walk.py)."""

import pytest
from suggestion_walk import walk


@pytest.mark.parametrize("length", [10, 150])
def test_a_suggestion_crosses_three_wings_and_encodes_and_cuts_the_prompt_once(length, fresh_streamlit_caches):
    text = ("x = compute_total(items)\n" * 8)[:length]
    assert len(text) == length
    w = walk(text)
    assert w.wings == ("ui", "release", "model"), w.frames
    assert w.encodes == 1, w.encoders
    assert w.cuts == 1, w.cutters
