"""The translation catalogs (issue 39): in step with the code, complete, and faithful to every placeholder; numbers
written in each language's signs by core.i18n.number, English exactly as Python writes it."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from core import i18n

TRANSLATED = [code for code in i18n.LANGUAGES if code != i18n.DEFAULT]
PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*(?:![rsa])?(?::[^{}]*)?\}")  # str.format fields: {n}, {x:.2f}
MARKUP = re.compile(r"\*\*|`|\$|<br>|\n\n")  # bold, code, LaTeX, line breaks: a translation keeps their count


def source_messages() -> set[str]:
    """Every msgid the code hands to _(), N_() or ngettext() (the singular of a plural), as babel.cfg extracts."""
    method_map = [(p, "python") for p in ("app.py", "core/**.py", "ui/**.py", "views/**.py")]
    found = set()
    for _file, _line, message, _comments, _context in extract_from_dir(str(i18n.LOCALES.parent), method_map):
        found.add(message[0] if isinstance(message, tuple) else message)
    return found


def catalog(code: str):
    with i18n.catalog_path(code).open("rb") as f:
        return read_po(f, locale=i18n.BABEL_LOCALE[code])


def entries(code: str):
    return [m for m in catalog(code) if m.id]


@pytest.fixture(scope="module")
def in_code() -> set[str]:
    return source_messages()


@pytest.mark.parametrize("code", TRANSLATED)
def test_the_catalog_holds_exactly_the_messages_of_the_code(code, in_code):
    held = {m.id[0] if isinstance(m.id, tuple) else m.id for m in entries(code)}
    assert not in_code - held, f"not in {code}'s catalog (run `make messages-update`): {sorted(in_code - held)[:10]}"
    assert not held - in_code, f"no longer in the code (run `make messages-update`): {sorted(held - in_code)[:10]}"


@pytest.mark.parametrize("code", TRANSLATED)
def test_every_message_is_translated_and_none_is_fuzzy(code):
    left = [m.id for m in entries(code) if m.fuzzy or not (all(m.string) if isinstance(m.string, tuple) else m.string)]
    assert not left, f"{len(left)} messages of {code} untranslated or fuzzy, e.g. {left[:5]}"


@pytest.mark.parametrize("code", TRANSLATED)
def test_a_translation_keeps_every_placeholder_and_markup(code):
    wrong = []
    for m in entries(code):
        sources = m.id if isinstance(m.id, tuple) else (m.id,)
        translations = m.string if isinstance(m.string, tuple) else (m.string,)
        want = Counter(PLACEHOLDER.findall(sources[-1]))
        for text in translations:
            if Counter(PLACEHOLDER.findall(text)) != want or len(MARKUP.findall(text)) != len(
                MARKUP.findall(sources[0])
            ):
                wrong.append((sources[0][:60], text[:60]))
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("code", TRANSLATED)
def test_the_compiled_catalog_answers(code):
    i18n.translations.cache_clear()
    first = entries(code)[0]
    msgid = first.id[0] if isinstance(first.id, tuple) else first.id
    with i18n.speaking(code):
        got = i18n._(msgid) if not isinstance(first.id, tuple) else i18n.ngettext(*first.id, 1)
    assert got == (first.string[0] if isinstance(first.string, tuple) else first.string)


@pytest.mark.parametrize("value", [0.0, 0.55, -3.14159, 1234.5, 2.675, 0.125, 1e6 + 0.5])
@pytest.mark.parametrize("digits", [0, 1, 2, 3])
def test_numbers_are_written_in_the_languages_signs(value, digits):
    assert i18n.number(value, digits) == f"{value:.{digits}f}"  # English: Python's own, rounding included
    assert i18n.number(value, digits, group=True) == f"{value:,.{digits}f}"
    with i18n.speaking("es"):
        assert i18n.number(value, digits, group=True) == f"{value:,.{digits}f}".translate(str.maketrans(",.", ".,"))
    with i18n.speaking("zh"):
        assert i18n.number(value, digits, group=True) == f"{value:,.{digits}f}"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("es", "es"),
        ("es-419", "es"),
        ("ES_es", "es"),
        ("zh-CN", "zh"),
        ("zh_Hans", "zh"),
        ("en-GB", "en"),
        ("fr", None),
        ("", None),
        (None, None),
        ("e" * 10_000, None),
        ("es" + "-x" * 5_000, "es"),
    ],
)
def test_a_language_tag_is_read_or_refused(raw, code):
    assert i18n.parse(raw) == code


def test_an_unknown_language_is_refused_with_the_ones_there_are():
    with pytest.raises(ValueError, match="en, es, zh"):
        i18n.use("fr")


@pytest.mark.parametrize(("value", "spec"), [(1.5e-06, ".1e"), (0.35, "g"), (1234567.0, ".4g"), (-2.5, "+.2f")])
def test_any_format_is_written_in_the_languages_signs(value, spec):
    assert i18n.formatted(value, spec) == format(value, spec)
    with i18n.speaking("es"):
        assert i18n.formatted(value, spec) == format(value, spec).translate(str.maketrans(",.", ".,"))


def test_without_a_compiled_catalog_the_po_is_compiled_in_memory(tmp_path, monkeypatch):
    """The Streamlit way (`pip install -r requirements.txt`, `streamlit run app.py`) builds no .mo: the lab still
    speaks Spanish, from the .po."""
    (tmp_path / "es" / "LC_MESSAGES").mkdir(parents=True)
    (tmp_path / "es" / "LC_MESSAGES" / "messages.po").write_bytes(i18n.catalog_path("es").read_bytes())
    monkeypatch.setattr(i18n, "LOCALES", tmp_path)
    i18n.translations.cache_clear()
    try:
        with i18n.speaking("es"):
            assert i18n._("Masks") == "Máscaras"
        assert not (tmp_path / "es" / "LC_MESSAGES" / "messages.mo").exists()  # nothing written
    finally:
        i18n.translations.cache_clear()


def test_the_install_compiles_every_catalog_to_what_the_po_says(tmp_path, monkeypatch):
    """compile_all (what lab.py's setup runs) writes a .mo per language that answers as its .po does, and prints no
    checker's false errors on the way (there is no checker to print them)."""
    for code in TRANSLATED:
        (tmp_path / code / "LC_MESSAGES").mkdir(parents=True)
        (tmp_path / code / "LC_MESSAGES" / "messages.po").write_bytes(i18n.catalog_path(code).read_bytes())
    monkeypatch.setattr(i18n, "LOCALES", tmp_path)
    i18n.translations.cache_clear()
    try:
        assert i18n.compile_all() == sorted(tmp_path / c / "LC_MESSAGES" / "messages.mo" for c in TRANSLATED)
        with i18n.speaking("es"):
            assert i18n._("Masks") == "Máscaras"
            assert i18n._("") == ""  # gettext("") is the catalog's header
    finally:
        i18n.translations.cache_clear()
