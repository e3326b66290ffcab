"""Links stay short (issue 25): a text widget puts only the prefix of its text that fits LINK_TEXT_BYTES, URL-encoded,
into the address bar (a 200 KB paste once made a 280 KB URL that no reload survived), keeps the whole text in the
page, and says when the link carries less than the text."""

from urllib.parse import quote_plus

import pytest
from apptest import unescaped
from streamlit.testing.v1 import AppTest

from ui.params import LINK_TEXT_BYTES, link_prefix

CODE = "def área(r):\n    return 3.14159 * r ** 2  # π r²\n"


@pytest.fixture(autouse=True)
def _clean(fresh_streamlit_caches):
    yield


def encoded(text: str) -> int:
    """What a form-encoded query spends on `text` (urllib's encoder, not ui.params's count; '*' aside, the same)."""
    return len(quote_plus(text, safe="*"))


@pytest.mark.parametrize(
    "text",
    ["x" * 5_000, CODE * 100, "注意力" * 2_000, "🙂a" * 1_000, "a b+c%d" * 500, "short", ""],
)
def test_the_link_prefix_is_the_longest_that_fits(text):
    kept = link_prefix(text)
    assert text.startswith(kept)
    assert encoded(kept) <= LINK_TEXT_BYTES
    if kept != text:
        assert encoded(text[: len(kept) + 1]) > LINK_TEXT_BYTES  # one more character would not fit


def text_page():
    """A page with one text bound to the link, as the lab's pages use it (ui.params.text_area)."""
    from ui import params

    params.text_area("Prompt", "prompt", "the default")


def visit(query: dict[str, str]) -> AppTest:
    at = AppTest.from_function(text_page, default_timeout=30)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    return at


def in_link(at: AppTest) -> str | None:
    value = at.query_params.get("prompt")
    return value[-1] if isinstance(value, list) else value


def link_notes(at: AppTest) -> list[str]:
    return [unescaped(c.value) for c in at.caption]


def test_a_long_text_stays_whole_in_the_page_and_its_prefix_goes_in_the_link():
    at = visit({})
    assert in_link(at) is None  # the default text is not in the link
    text = (CODE * 400)[:10_000]
    at.text_area(key="prompt").set_value(text).run()
    assert at.text_area(key="prompt").value == text  # nothing typed is lost
    kept = in_link(at)
    assert kept == link_prefix(text) and len(kept) < len(text)
    assert encoded(kept) <= LINK_TEXT_BYTES
    assert link_notes(at) == [
        f"This page's link keeps the first {len(kept):,} of these 10,000 characters (a link stays short enough "
        "to open anywhere); the page itself uses them all."
    ]

    reopened = visit({"prompt": kept})  # the shared link opens on its prefix, with no note
    assert reopened.text_area(key="prompt").value == kept
    assert link_notes(reopened) == []

    at.text_area(key="prompt").set_value("x = 1").run()  # a short text goes in whole, and the note goes
    assert in_link(at) == "x = 1" and link_notes(at) == []
    at.text_area(key="prompt").set_value("").run()  # an empty text is a value too
    assert in_link(at) == ""
    at.text_area(key="prompt").set_value("the default").run()
    assert in_link(at) is None


def test_a_link_with_a_longer_text_is_cut_to_what_a_link_carries_and_says_so():
    text = "注意力" * 5_000  # 15,000 characters, 135,000 bytes URL-encoded
    at = visit({"prompt": text})
    kept = link_prefix(text)
    assert at.text_area(key="prompt").value == kept and len(kept) == LINK_TEXT_BYTES // 9
    assert link_notes(at) == [
        f"The link set 'Prompt' to a text of 15,000 characters, more than a link carries; only its first "
        f"{len(kept):,} are used."
    ]
    assert in_link(at) == kept  # the URL now holds only what the page uses
    at.text_area(key="prompt").set_value("typed").run()
    assert link_notes(at) == []  # the note goes once the learner has changed the text
