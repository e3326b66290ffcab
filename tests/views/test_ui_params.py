"""A shared link is anyone's text: the note ui.params writes about an unusable link value, and the pages that
echo a link's text (Temperature's scores, Masks' sentence), carry it escaped and bounded, never as markdown
that would fetch an image from another host."""

import re

import pytest
from apptest import open_page, unescaped

from ui.params import MAX_QUOTED_CHARS

IMAGE = "a` ![p](http://198.51.100.7/p.png) `b"  # the issue's link: the backticks closed the old code span
HTML = "<img src=http://198.51.100.7/x>"


def bare(markdown: str) -> str:
    """What markdown would interpret: the text with every backslash-escaped character removed."""
    return re.sub(r"\\.", "", markdown, flags=re.S)


def assert_inert(markdown: str) -> None:
    live = bare(markdown)
    for markup in ("![", "](", "<", "`", "\n"):
        assert markup not in live, (markup, markdown)
    # GFM links bare URLs and addresses in the parsed text, escapes or not: none may be left whole
    text = re.sub(r"\\(.)", r"\1", markdown, flags=re.S)
    assert not re.search(r"https?://|www\.|[-.\w+]@", text, re.IGNORECASE), markdown


def note(at, key_label: str) -> str:
    [found] = [c.value for c in at.caption if "not usable" in c.value and f"'{key_label}'" in unescaped(c.value)]
    return found


@pytest.fixture(autouse=True)
def _clean(fresh_streamlit_caches):
    yield


def test_the_issues_link_on_training_quotes_the_value_escaped_and_as_text():
    at = open_page("training", {"train_preset": IMAGE})
    caption = note(at, "Model size (preset)")
    assert_inert(caption)
    assert f"to '{IMAGE}', which is not usable" in unescaped(caption)  # the reader still sees what the link said
    assert at.selectbox(key="train_preset").value == "baby"  # and the default is used


def test_a_long_or_multi_line_link_value_is_cut_and_kept_on_one_line():
    long = "![x](http://198.51.100.7/" + "y" * 500 + ".png)"
    caption = note(open_page("temperature", {"temperature": long}), "Temperature τ")
    assert_inert(caption)
    assert f"to '{long[:MAX_QUOTED_CHARS]}…', which" in unescaped(caption)
    caption = note(open_page("temperature", {"temperature": "1\n\n# heading " + HTML}), "Temperature τ")
    assert_inert(caption)
    assert "to '1\ufffd\ufffd# heading <img src=http://198.51.100.7/x>'" in unescaped(caption)


def test_the_temperature_scores_from_a_link_are_echoed_escaped():
    image = "![p](http://198.51.100.7/t.png)"  # one score: the parser quotes the first bad one
    at = open_page("temperature", {"scores": "1, " + image})
    [warning] = [w.value for w in at.warning if "could not be read" in w.value]
    assert_inert(warning)
    assert f"'{image}' is not a number" in unescaped(warning)


def test_the_masks_sentence_from_a_link_reaches_the_chart_summary_escaped():
    words = "![p](http://198.51.100.7/m.png) " + HTML
    at = open_page("masks", {"mask_text": words})
    [summary] = [c.value for c in at.caption if c.value.startswith("Causal mask:")]
    assert_inert(summary)
    assert "'<img' sees ![p](http://198.51.100.7/m.png) <img" in unescaped(summary)
