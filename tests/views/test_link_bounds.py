"""A link carrying 20,000 characters in each of 8 widget keys (issue 24) renders: ui.params bounds every value it
reads from the URL before the page uses it. A text is cut to the prefix a link carries (ui.params.link_prefix) with a
caption saying so, and a number or option that long is unusable without being parsed, with the usual note and the
default."""

import pytest
from apptest import fresh_visit, unescaped

import ui.params
from ui.params import LINK_TEXT_BYTES, MAX_LINK_VALUE_CHARS

HUGE = "x" * 20_000
PROMPT_LABEL = "Text to complete (the prompt; Ctrl+Enter to apply)"  # views/autocomplete.py
KEYS = ["ac_prompt", "ac_temperature", "ac_top_k", "ac_top_p", "ac_k", "ac_length", "ac_seed", "ac_cache"]


@pytest.fixture(autouse=True)
def _clean(fresh_streamlit_caches):
    yield


def test_twenty_thousand_characters_in_eight_keys_render_bounded(monkeypatch):
    parsed = []
    real = ui.params._number_in

    def counting(kind, lo, hi):
        usable = real(kind, lo, hi)
        return lambda raw: parsed.append(len(raw)) or usable(raw)

    monkeypatch.setattr(ui.params, "_number_in", counting)
    at = fresh_visit("autocomplete", dict.fromkeys(KEYS, HUGE))
    assert at.text_area(key="ac_prompt").value == HUGE[:LINK_TEXT_BYTES]  # what the page suggests after
    captions = [unescaped(c.value) for c in at.caption]
    said = (
        f"The link set '{PROMPT_LABEL}' to a text of 20,000 characters, more than a link carries; only its first "
        f"{LINK_TEXT_BYTES:,} are used."
    )
    assert said in captions, captions
    notes = [c for c in captions if "which is not usable" in c]
    assert len(notes) == len(KEYS) - 1, notes  # every other key: the note, and the default shown
    assert at.slider(key="ac_temperature").value == 1.0 and at.toggle(key="ac_cache").value is True
    assert all(n <= MAX_LINK_VALUE_CHARS for n in parsed)  # nothing that long was ever handed to float() or int()


def test_a_text_within_the_bound_is_used_whole_and_without_a_note():
    text = "def f(x):\n    return x\n" * 20
    at = fresh_visit("autocomplete", {"ac_prompt": text})
    assert at.text_area(key="ac_prompt").value == text
    assert not [c for c in at.caption if "more than a link carries" in c.value]


# Issue 35: an integer widget's link value that overflows a float (Streamlit reads a number from a link as a float,
# then int() of infinity raised OverflowError before the page drew). ui.params refuses it before Streamlit parses it.
OVERFLOWING = [
    ("score_geometry", "geo_seed", "inf", "Random seed", 0),
    ("masks", "mask_seed", "1e999", "Seed for the scores", 0),
    ("training", "train_iters", "-inf", "Training steps (iteration budget)", 5000),
    ("autocomplete", "ac_top_k", "9" * 400, "Top-k: keep only the k most likely (0 = off)", 0),
]


@pytest.mark.parametrize(("page", "key", "raw", "label", "default"), OVERFLOWING, ids=[o[1] for o in OVERFLOWING])
def test_an_overflowing_number_in_a_link_gets_the_note_and_the_default(page, key, raw, label, default):
    at = fresh_visit(page, {key: raw})  # asserts the page drew without an exception
    assert at.number_input(key=key).value == default
    notes = [unescaped(c.value) for c in at.caption if "which is not usable" in c.value]
    assert any(n.startswith(f"The link set '{label}' to '{raw[:20]}") for n in notes), notes
    assert key not in at.query_params  # the refused value left the link: a reload shows the same page
    at.run()  # the next run (the widget now bound to the link again) keeps the default and the note
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key=key).value == default
    assert any("which is not usable" in c.value for c in at.caption)
