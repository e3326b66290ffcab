"""Words and numbers the Release page shows from its data, in the reader's language (core/i18n.py).

A check's name, its result, a rule that core writes as a constant (marked N_ where core defines it) or a log's
event is a code of a file: it stays English there and in the command line's output, and is translated only where
the page shows it. A figure or a sentence composed from measurements stays as core wrote it.
"""

from __future__ import annotations

from core import i18n
from core.i18n import N_, _

# Codes of the registry and the evaluation the page shows as words (the gate's check names are GUARDS' keys,
# views/release/rubric.py): a predictor's kind, a log's event, a version's role.
CODES = (
    N_("rule"),
    N_("ngram"),
    N_("n-gram"),
    N_("transformer"),
    N_("promote"),
    N_("refuse"),
    N_("rollback"),
    N_("rollback-refused"),
)


def known(text: object) -> object:
    """`text` in the reader's language when the catalogs hold it (a code marked N_), else exactly as it is
    (a figure, a sentence from a file); anything but a string is returned unchanged."""
    return i18n._(text) if isinstance(text, str) else text


def interval(low: float, high: float, digits: int) -> str:
    """[low, high] with `digits` decimals (a language with a decimal comma separates the two otherwise)."""
    return _("[{low}, {high}]").format(low=i18n.number(low, digits), high=i18n.number(high, digits))
