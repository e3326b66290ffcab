"""ui.text: user text escaped for markdown reads back unchanged and carries no unescaped markup character."""

import re

from hypothesis import given
from hypothesis import strategies as st

from ui.text import MARKDOWN_SPECIAL, WORD_JOINER, code_points, escape_markdown


@given(st.text(max_size=40))
def test_escape_markdown_reads_back_as_the_text_and_leaves_no_markup_character_bare(text):
    escaped = escape_markdown(text)
    seen = re.sub(r"\\(.)", r"\1", escaped, flags=re.S).replace(WORD_JOINER, "")  # what a reader sees (U+2060
    assert seen == text.replace(WORD_JOINER, "")  # is invisible: it only stops GFM making bare URLs links)
    bare = re.sub(r"\\.", "", escaped, flags=re.S)  # drop every escaped pair: nothing special may remain
    assert not any(c in MARKDOWN_SPECIAL for c in bare)


def test_escape_markdown_takes_any_object_and_escapes_streamlit_directives():
    assert escape_markdown(3.5) == "3\\.5"
    assert escape_markdown(":red[x] :material/home:") == "\\:red\\[x\\] \\:material/home\\:"


def test_code_points_names_each_character():
    assert code_points(["é", "∑", "*"]) == "é (U+00E9), ∑ (U+2211), \\* (U+002A)"
