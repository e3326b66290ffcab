"""The one bounded JSON reader: every JSON the lab reads from disk (bundles, the registry, runs, the passcode record).

Python's json accepts what a hostile file needs to take a server down, so before a value is returned this refuses
a file too large or not regular, nesting too deep, NaN and Infinity, numbers too large for a float, and a key given
twice, each with a JsonFileError (a ValueError) naming the file, the field where one is known, and what to do.
"""

from __future__ import annotations

import json
import os
import re
import sys
from itertools import accumulate
from pathlib import Path
from typing import Any

from core.files import FileRefused, read_bounded

MAX_JSON_BYTES = 4 << 20  # the largest file the lab writes as JSON is a manifest, under MAX_MANIFEST_BYTES = 4 MiB
MAX_DEPTH = 32  # the lab's deepest JSON (a rubric's checks) is 4 levels; json.loads recurses once per level
DEFAULT_FIX = "the file was damaged or edited by hand; replace it with one the lab wrote"

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)  # a JSON string, escapes included
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JsonFileError(ValueError):
    """A JSON file (or text) the lab refuses to read; the message names it, what was wrong and what to do."""

    def __init__(self, label: str, problem: str, fix: str = DEFAULT_FIX):
        super().__init__(f"{label}: {problem}; {fix}")
        self.label, self.problem, self.fix = label, problem, fix

    def __reduce__(self):  # pickled as its parts (a training job's error crosses a process boundary)
        return type(self), (self.label, self.problem, self.fix)


class _NonFinite(float):
    """What json.loads makes of NaN / Infinity / 1e400 here: a marker, found afterwards to name its field."""

    def __new__(cls, name: str) -> _NonFinite:
        marker = super().__new__(cls, "nan")
        marker.name = name  # type: ignore[attr-defined]
        return marker


class _Repeated(dict):
    """An object that gave a key twice (json.loads keeps the last): a marker, found afterwards to name its field."""

    key: str


# json.loads recurses once per `[` or `{`: half a million of them raised RecursionError, which no caller's
# `except ValueError` caught, and every page went down. So the depth is measured first, and json.loads only ever
# sees shallow documents.
def nesting_depth(text: str) -> int:
    """How deeply `text`'s arrays and objects nest, without parsing it: strings are cut out (left to right, as
    json reads them), then the running sum of +1 per opening and -1 per closing bracket is taken. Linear in
    len(text) and run by the re module and itertools in C; never recurses."""
    outside = _STRING.sub("", text)
    # A quote left over opens a string that never ends: json.loads stops there, and so does the scan.
    brackets = _NOT_BRACKET.sub("", outside.split('"', 1)[0])
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def read_json(
    data: bytes | str,
    label: str,
    *,
    max_bytes: int = MAX_JSON_BYTES,
    max_depth: int = MAX_DEPTH,
    fix: str = DEFAULT_FIX,
) -> Any:
    """The JSON value of `data`, checked as the module docstring says; JsonFileError naming `label` otherwise."""
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise JsonFileError(label, f"{size:,} bytes is more than the {max_bytes:,} it may hold", fix)
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        raise JsonFileError(label, f"not UTF-8 text (byte {e.start})", fix) from None
    depth = nesting_depth(text)
    if depth > max_depth:
        raise JsonFileError(label, f"nested {depth:,} levels deep, more than the {max_depth} a lab file needs", fix)
    found: list[Any] = []  # the markers made below; any one refuses the document

    # NaN and Infinity are not JSON, yet json.loads makes floats of them (a NaN in a manifest became a NaN in a model's
    # configuration); 1e400 is valid JSON that json.loads turns into inf (one such metric in the current version's
    # manifest took every page down), and an integer of 400 digits overflows the first float() made of it.
    def non_finite(name: str) -> _NonFinite:  # json.loads calls it for NaN, Infinity and -Infinity
        found.append(_NonFinite(name))
        return found[-1]

    def finite_float(literal: str) -> float:
        number = float(literal)
        return number if number - number == 0.0 else non_finite(literal)  # inf - inf is NaN: 1e400 overflowed

    def finite_int(literal: str) -> int | float:
        number = int(literal)  # more than 4300 digits: ValueError, refused below as not valid JSON
        return number if len(literal) < 309 or abs(number) <= sys.float_info.max else non_finite(literal)

    # json.loads keeps the last of a key given twice, so what a reader saw would not be what was checked.
    def unique_keys(pairs: list[tuple[str, Any]]) -> dict:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        repeated, seen = _Repeated(obj), set()
        for key, _ in pairs:  # the first key given again
            if key in seen:
                repeated.key = key
                break
            seen.add(key)
        found.append(repeated)
        return repeated

    try:
        value = json.loads(
            text,
            parse_constant=non_finite,
            parse_float=finite_float,
            parse_int=finite_int,
            object_pairs_hook=unique_keys,
        )
    except RecursionError:  # the scan above makes this unreachable; kept so that it can never escape
        raise JsonFileError(label, "nested too deeply to read", fix) from None
    except ValueError as e:  # JSONDecodeError, an integer of more than 4300 digits
        raise JsonFileError(label, f"not valid JSON ({' '.join(str(e).split())[:160]})", fix) from None
    if found:
        raise JsonFileError(label, _first_refused(value), fix)
    return value


def read_json_file(
    path: str | os.PathLike, label: str | None = None, *, max_bytes: int = MAX_JSON_BYTES, fix: str = DEFAULT_FIX
) -> Any:
    """read_json of a regular file (a link to one is followed), refused by its size before it is read
    (`read_bounded`). OSError (missing, unreadable) passes through: callers already treat it as an
    unreadable file."""
    path = Path(path)
    label = path.name if label is None else label
    try:
        data = read_bounded(path, max_bytes, follow_symlinks=True)  # a FIFO would block the read until written
    except FileRefused as e:
        raise JsonFileError(label, e.problem, fix) from None
    return read_json(data, label, max_bytes=max_bytes, fix=fix)


def _first_refused(value: Any) -> str:
    """What the first marker in `value` (a NaN / Infinity / overflowing number, a key given twice) is, naming its
    field by its dotted path. Iterative: the depth is bounded already, but nothing here should rely on that."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, _NonFinite):
            name = item.name  # type: ignore[attr-defined]
            shown = name if len(name) <= 24 else f"{name[:12]}...{name[-8:]} ({len(name):,} characters)"
            why = "which JSON does not allow" if name.lstrip("-") in ("NaN", "Infinity") else "which overflows a float"
            return f"field {_field(where)!r} holds {shown}, {why} (a number must be finite)"
        if isinstance(item, _Repeated):
            key = f"{where}.{item.key}" if where else item.key
            return f"field {_field(key)!r} is given twice (json keeps the last); each key may appear once"
        if isinstance(item, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return "a value is not what JSON allows"


def _field(where: str, limit: int = 120) -> str:
    """A field's dotted path as a message shows it: the keys come from the file, so a long one is cut."""
    where = where or "(the whole document)"
    return where if len(where) <= limit else where[: limit - 3] + "..."
