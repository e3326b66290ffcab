"""Every JSON the lab reads from disk (bundles, the registry, runs, the passcode record) is read one bounded way.

    read_json(data, label, *, max_bytes, max_depth)   the value of `data` (bytes or str), or JsonFileError
    read_json_file(path, label, *, max_bytes)         the same for a file, its size checked before it is read

Python's json accepts what a hostile file needs to take a server down, so each is refused first, with a
JsonFileError (a ValueError) whose message names the file (`label`), the field where one is known, what was
wrong and what to do:
- more than `max_bytes` (a file's size is checked before a byte is read);
- nesting deeper than `max_depth`. json.loads recurses once per `[` or `{`: half a million of them raised
  RecursionError, which no caller's `except ValueError` caught, and every page went down. The depth is
  measured first by a linear scan that skips strings (a bracket inside a string is text), so json.loads
  only ever sees shallow documents;
- NaN, Infinity and -Infinity: not JSON, yet json.loads turns them into floats (a NaN in a manifest became
  a NaN in a model's configuration); the message names the field that holds one;
- anything else json.loads or UTF-8 decoding refuses, an integer of more than 4300 digits included.
"""

from __future__ import annotations

import json
import os
import re
import stat
from itertools import accumulate
from pathlib import Path
from typing import Any

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
    """What json.loads makes of NaN / Infinity here: a marker, found afterwards to name its field."""

    def __new__(cls, name: str) -> _NonFinite:
        marker = super().__new__(cls, "nan")
        marker.name = name  # type: ignore[attr-defined]
        return marker


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
    found: list[_NonFinite] = []

    def non_finite(name: str) -> _NonFinite:  # json.loads calls it for NaN, Infinity and -Infinity
        found.append(_NonFinite(name))
        return found[-1]

    try:
        value = json.loads(text, parse_constant=non_finite)
    except RecursionError:  # the scan above makes this unreachable; kept so that it can never escape
        raise JsonFileError(label, "nested too deeply to read", fix) from None
    except ValueError as e:  # JSONDecodeError, an integer of more than 4300 digits
        raise JsonFileError(label, f"not valid JSON ({' '.join(str(e).split())[:160]})", fix) from None
    if found:
        where, name = _non_finite_field(value)
        raise JsonFileError(
            label, f"field {where!r} holds {name}, which JSON does not allow (a number must be finite)", fix
        )
    return value


def read_json_file(
    path: str | os.PathLike, label: str | None = None, *, max_bytes: int = MAX_JSON_BYTES, fix: str = DEFAULT_FIX
) -> Any:
    """read_json of a regular file, refused by its size before it is read. OSError (missing, unreadable) passes
    through: callers already treat it as an unreadable file."""
    path = Path(path)
    label = path.name if label is None else label
    seen = path.stat()
    if not stat.S_ISREG(seen.st_mode):  # a FIFO would block the read until someone writes to it
        raise JsonFileError(label, "not a regular file", fix)
    size = seen.st_size
    if size > max_bytes:
        raise JsonFileError(label, f"{size:,} bytes is more than the {max_bytes:,} it may hold", fix)
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)  # the file may have grown since stat
    return read_json(data, label, max_bytes=max_bytes, fix=fix)


def _non_finite_field(value: Any) -> tuple[str, str]:
    """(the dotted path of the first NaN / Infinity marker in `value`, the literal written there). Iterative:
    the depth is bounded already, but nothing here should rely on that."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, _NonFinite):
            return where or "(the whole document)", item.name  # type: ignore[attr-defined]
        if isinstance(item, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return "(unknown)", "NaN"
