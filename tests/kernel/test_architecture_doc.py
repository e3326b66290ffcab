"""docs/ARCHITECTURE.md names every first-party module once, and nothing that does not exist (issue 27).

The doc's module tables are the markdown tables whose header's first cell is `module`; each row names one module by
its path in backticks in the first column: `core/model/gpt.py`, or a package by its folder, `core/release/serving/`
(its __init__.py). The first-party modules are app.py and every .py file under core/, cli/, ui/ and views/ (the
files tests/kernel/test_layout.py holds to the import direction). Elsewhere in the doc (prose, the "Follow a
suggestion" walk), a backticked `path.py` must exist and a backticked `path.py:function` must define that function,
so the walk cannot keep naming a function that was renamed or moved.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
FOLDERS = ("core", "cli", "ui", "views")
TICKED = re.compile(r"`([^`]+)`")
# a backticked repository path outside the tables: `core/model/gpt.py`, `ui/`, `core/model/gpt.py:forward`
REPO_PATH = re.compile(r"^(?:(?:core|cli|ui|views|tests|docs|bench|examples)/[\w./-]*|[\w-]+\.py)(?::[\w.<>]+)?$")


def doc_name(path: Path) -> str:
    """How the doc names a module file: its path from the repository root, a package by its folder."""
    rel = path.relative_to(ROOT)
    if rel.name == "__init__.py":
        return rel.parent.as_posix() + "/"
    return rel.as_posix()


def first_party() -> set[str]:
    files = [ROOT / "app.py"] + [p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")]
    return {doc_name(p) for p in files if "__pycache__" not in p.parts}


def exists(name: str) -> bool:
    return (ROOT / name / "__init__.py").is_file() if name.endswith("/") else (ROOT / name).is_file()


def cells(line: str) -> list[str] | None:
    """The cells of a markdown table row, None for a line outside a table."""
    return [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None


def is_separator(line: str) -> bool:
    return set(line.replace("|", "").strip()) <= set("-: ")


def table_rows(text: str) -> list[tuple[int, str]]:
    """(line number, first cell) of every body row of every module table: a table whose header's first cell is
    `module`, from the row under its separator to the first line that is not a row."""
    rows: list[tuple[int, str]] = []
    lines = text.splitlines()
    in_table = False
    for n, line in enumerate(lines, 1):
        row = cells(line)
        if row is None:
            in_table = False
        elif not in_table:
            in_table = row[0] == "module" and n < len(lines) and is_separator(lines[n])  # lines[n]: the next line
        elif not is_separator(line):
            rows.append((n, row[0]))
    return rows


@dataclass(frozen=True)
class Findings:
    missing: tuple[str, ...]  # a module in the code that no table names
    extra: tuple[str, ...]  # a table row naming a module that does not exist
    doubled: tuple[str, ...]  # a module named in more than one row
    malformed: tuple[str, ...]  # a row whose first cell is not one backticked path
    dangling: tuple[str, ...]  # a backticked path (or path:function) outside the tables that does not exist

    def problems(self) -> list[str]:
        return [f"{what}: {', '.join(names)}" for what, names in vars(self).items() if names]


def defines(path: Path, name: str) -> bool:
    """Whether the file defines `name` (a function or a class, at any depth; `Class.method` as written)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    if name == "<module>":
        return True
    *owner, leaf = name.split(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and owner and node.name == owner[-1]:
            return any(isinstance(m, defs) and m.name == leaf for m in node.body)
        if not owner and isinstance(node, defs) and node.name == leaf:
            return True
    return False


def check(text: str, modules: set[str]) -> Findings:
    rows = table_rows(text)
    named: list[str] = []
    malformed = []
    for n, cell in rows:
        ticked = TICKED.findall(cell)
        if len(ticked) != 1 or TICKED.sub("", cell).strip():
            malformed.append(f"line {n}: {cell!r}")
        named += ticked
    row_lines = {n for n, _ in rows}
    dangling = []
    for n, line in enumerate(text.splitlines(), 1):
        if n in row_lines:
            line = line.strip().strip("|").split("|", 1)[-1]  # the concept column; the first is checked above
        for token in TICKED.findall(line):
            if not REPO_PATH.match(token) or "<" in token.split(":")[0]:
                continue
            path, _, function = token.partition(":")
            if not (ROOT / path).exists():
                dangling.append(f"line {n}: {token}")
            elif function and (not path.endswith(".py") or not defines(ROOT / path, function)):
                dangling.append(f"line {n}: {token} (no such function)")
    return Findings(
        missing=tuple(sorted(modules - set(named))),
        extra=tuple(sorted({m for m in named if not exists(m)})),
        doubled=tuple(sorted({m for m in named if named.count(m) > 1})),
        malformed=tuple(malformed),
        dangling=tuple(dangling),
    )


def test_every_module_is_listed_once_and_every_listed_module_exists():
    findings = check(DOC.read_text(encoding="utf-8"), first_party())
    assert findings.problems() == [], "docs/ARCHITECTURE.md's module tables:\n" + "\n".join(findings.problems())


def test_the_tables_are_found():
    """The parser reads the doc's tables at all: a doc whose tables it missed would report every module missing,
    but a first-party set that came out empty would pass silently."""
    modules = first_party()
    assert {"app.py", "core/", "core/model/gpt.py", "core/release/serving/"} <= modules
    assert len(table_rows(DOC.read_text(encoding="utf-8"))) >= len(modules)


GOOD = """\
| module | concept |
|---|---|
| `core/attention.py` | attention |
| `core/release/serving/` | the unit |

The walk: `core/attention.py:scaled_dot_product_attention`, then `ui/` renders.
"""


@pytest.mark.parametrize(
    "doc, what, expected",
    [
        (GOOD.replace("| `core/release/serving/` | the unit |\n", ""), "missing", ("core/release/serving/",)),
        (
            GOOD + "\n| module | concept |\n|---|---|\n| `core/release/forward.py` | old |\n",
            "extra",
            ("core/release/forward.py",),
        ),
        (
            GOOD + "\n| module | concept |\n|---|---|\n| `core/attention.py` | again |\n",
            "doubled",
            ("core/attention.py",),
        ),
        (GOOD.replace("| `core/attention.py` |", "| `core/attention.py`, `core/files.py` |"), "malformed", ("line 3",)),
        (GOOD.replace(":scaled_dot_product_attention", ":no_such_function"), "dangling", ("line 6",)),
        (GOOD.replace("then `ui/`", "then `ui/gone.py`"), "dangling", ("line 6",)),
    ],
)
def test_the_checker_reports_each_kind_of_problem(doc, what, expected):
    """The checker itself: a planted problem of each kind is reported, under its own name."""
    modules = {"core/attention.py", "core/release/serving/"}
    assert check(GOOD, modules).problems() == []
    found = getattr(check(doc, modules), what)
    assert len(found) == len(expected) and all(f.startswith(e) for f, e in zip(found, expected, strict=True)), found
