"""No text a person reads is written in views/, ui/ or app.py outside the translation function (issue 39).

Each file is scanned (source_scan.py): a literal that reads as text and is not handed to _(), N_() or ngettext()
fails, with its line. What reads as text but is never shown to a person is listed in ALLOWED with the reason.
"""

from __future__ import annotations

import pytest
from source_scan import SCANNED, scan, scan_source

# path -> {literal: why it is not translated}. Symbols stay as they are (Q, K, V, d_k, softmax); a name of the lab
# or of a language is the same in every language.
ALLOWED: dict[str, dict[str, str]] = {
    "app.py": {"Attention Lab": "the lab's name"},
    "ui/language.py": {"Language · Idioma · 语言": "the picker's label in all three languages at once"},
}


@pytest.mark.parametrize("path", SCANNED)
def test_every_literal_a_person_reads_goes_through_the_catalogs(path):
    allowed = ALLOWED.get(path, {})
    left = [f for f in scan(path) if f.problem != "not translated" or f.text not in allowed]
    assert not left, "\n".join(f"{f.path}:{f.line}: {f.problem}: {f.text[:90]!r}" for f in left)


def test_the_scan_finds_what_it_must_and_skips_what_it_may():
    source = '''
"""A docstring."""
import streamlit as st
from core.i18n import _, N_
KEY = "live_class_code"
OPTIONS = [N_("All at once"), N_("Step by step")]
st.title(_("Read one row"))
st.caption("Weights sum to one")
st.button("Stop", key="train_stop", type="primary")
st.markdown(f"loss {loss:.3f} after {n} steps")
st.write(_(f"not {extractable}"))
_LOGGER.info("Warm-up finished")
'''
    found = [(f.text, f.problem) for f in scan_source(source, "x.py")]
    assert found == [
        ("Weights sum to one", "not translated"),
        ("Stop", "not translated"),
        ("loss {} after {} steps", "not translated"),
        ("f'not {extractable}'", "not extractable"),
    ]
