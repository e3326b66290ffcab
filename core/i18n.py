"""The lab's words in the reader's language: one translation function over gettext catalogs managed with Babel.

Every string a learner or a teacher reads is written in English in the code and wrapped in `_()`; a string defined
before any language is known (a module constant, a question bank) is marked with `N_()` and translated with `_()`
where it is shown. `_()` looks the English up in locales/<code>/LC_MESSAGES/messages.mo for the language of the
current run: the app sets it at the start of every run and every fragment run (ui/language.py); the command line
and the tests read English unless they set one with `speaking()`.

Numbers are computed, never translated: a translated sentence carries `{name}` placeholders filled with `number()`,
which writes the computed value with the language's decimal and group signs (Babel's locale data; Python's own
rounding, so English reads exactly as `f"{x:.2f}"`). Technical symbols (Q, K, V, d_k, softmax) stay as they are.

The catalogs: `make messages` extracts every `_()` / `N_()` / `ngettext()` string (babel.cfg) into
locales/messages.pot and updates each language's messages.po; the install compiles them to .mo
(`core.i18n.compile_all`). Where no .mo was built (a plain `pip install -r requirements.txt`), the .po is compiled in
memory on first use. Compiling never runs Babel's python-format checker: our messages are `str.format` templates,
and the checker reads every `%` in them (a Plotly hovertemplate's `%{y}`, "95%") as a printf placeholder and
reports false errors; tests/i18n/test_catalogs.py checks the `{placeholders}` and markup instead.
"""

from __future__ import annotations

import gettext
import io
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path

LANGUAGES = {"en": "English", "es": "Español", "zh": "中文"}  # code -> its own name, as the picker shows it
DEFAULT = "en"
LOCALES = Path(__file__).resolve().parent.parent / "locales"
DOMAIN = "messages"
BABEL_LOCALE = {"en": "en", "es": "es", "zh": "zh_Hans_CN"}  # the locale whose number signs a language uses

_language: ContextVar[str] = ContextVar("lab_language", default=DEFAULT)


def parse(raw: object) -> str | None:
    """The lab's language code for `raw` ("es", "es-419", "zh-CN", "zh_Hans", "ZH"), None when the lab has none.
    Only the first 35 characters are read (a language tag is at most that long, RFC 5646)."""
    if not isinstance(raw, str):
        return None
    primary = raw.strip()[:35].replace("_", "-").split("-")[0].lower()
    return primary if primary in LANGUAGES else None


def language() -> str:
    """The language of the current run (DEFAULT outside the app)."""
    return _language.get()


def use(code: str) -> None:
    """Make `code` the language of the rest of this run (ValueError for a code the lab has no catalog for)."""
    if code not in LANGUAGES:
        raise ValueError(f"no catalog for language {code!r}; the lab speaks {', '.join(LANGUAGES)}")
    _language.set(code)


@contextmanager
def speaking(code: str) -> Iterator[None]:
    """Within the block, `_()` answers in `code`."""
    if code not in LANGUAGES:
        raise ValueError(f"no catalog for language {code!r}; the lab speaks {', '.join(LANGUAGES)}")
    token = _language.set(code)
    try:
        yield
    finally:
        _language.reset(token)


def catalog_path(code: str, suffix: str = ".po") -> Path:
    return LOCALES / code / "LC_MESSAGES" / f"{DOMAIN}{suffix}"


@cache
def translations(code: str) -> gettext.NullTranslations:
    """The compiled catalog of `code` (English is the source text itself)."""
    if code == DEFAULT:
        return gettext.NullTranslations()
    po, mo = catalog_path(code), catalog_path(code, ".mo")
    if mo.is_file() and (not po.is_file() or mo.stat().st_mtime >= po.stat().st_mtime):
        with mo.open("rb") as f:
            return gettext.GNUTranslations(f)
    return gettext.GNUTranslations(io.BytesIO(compiled(code)))


def compiled(code: str) -> bytes:
    """The .mo bytes of `code`'s catalog (Babel's reader and writer, without its checkers: see the docstring)."""
    from babel.messages.mofile import write_mo  # only where a catalog is compiled
    from babel.messages.pofile import read_po

    with catalog_path(code).open("rb") as f:
        catalog = read_po(f, locale=BABEL_LOCALE[code], domain=DOMAIN)
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


def compile_all() -> list[Path]:
    """Write every language's messages.mo beside its messages.po (the install's step); the paths written."""
    written = []
    for code in LANGUAGES.keys() - {DEFAULT}:
        mo = catalog_path(code, ".mo")
        tmp = mo.with_suffix(".mo.tmp")
        tmp.write_bytes(compiled(code))
        tmp.replace(mo)  # a running server never reads half a catalog
        written.append(mo)
    return sorted(written)


def _(message: str) -> str:
    """`message` (English, as written in the code) in the current run's language; "" stays "" (gettext would
    give the catalog's header for it)."""
    return translations(language()).gettext(message) if message else message


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form for `n`, by the current language's plural rule."""
    return translations(language()).ngettext(singular, plural, n)


def pgettext(context: str, message: str) -> str:
    """`message` in the current language where the English word means more than one thing: `context` says which
    ("hidden unit" for the MLP's "unit", beside the "unit" of a measure)."""
    return translations(language()).pgettext(context, message)


def N_(message: str) -> str:
    """Mark `message` for the catalogs without translating it now (translate it with `_()` where it is shown)."""
    return message


@cache
def _signs(code: str) -> tuple[str, str]:
    from babel.numbers import get_decimal_symbol, get_group_symbol

    return get_decimal_symbol(BABEL_LOCALE[code]), get_group_symbol(BABEL_LOCALE[code])


def signs(text: str) -> str:
    """A number Python wrote (str(x), f"{x:g}", f"{x:,.2f}") with the current language's decimal and group signs."""
    code = language()
    if code == DEFAULT:
        return text
    decimal, grouping = _signs(code)
    return "".join(decimal if c == "." else grouping if c == "," else c for c in text)


def formatted(value: float, spec: str = "g") -> str:
    """format(value, spec) ("g", ".3g", ".2e", "+.2f") in the current language's signs: 1.5e-06 reads 1,5e-06 in
    Spanish; English is exactly Python's."""
    return signs(format(value, spec))


def number(value: float, digits: int = 2, *, group: bool = False) -> str:
    """`value` with `digits` decimals in the current language: 0.55 reads "0,55" in Spanish. `group` separates
    thousands ("12,345" / "12.345"). English is exactly Python's f"{value:.{digits}f}" (or ",.{digits}f")."""
    return formatted(value, f",.{digits}f" if group else f".{digits}f")


def integer(value: int) -> str:
    """A whole number with the language's thousands separator: 12,345 / 12.345."""
    return number(value, 0, group=True)


def plotly_separators() -> str:
    """Plotly's layout.separators for the current language: its decimal sign, then its group sign."""
    code = language()
    return ".," if code == DEFAULT else "".join(_signs(code))
