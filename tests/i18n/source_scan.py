"""The source scan behind test_source.py: every string literal in views/, ui/ and app.py that reads as text a person
sees, and is not handed to the translation function (core/i18n.py: _, N_, ngettext).

"Reads as text": a word of two or more letters, and a space or a capital first letter ("Stop", "query t"), and not
CSS (a declaration `name: value;`, a `data-testid` selector, a <style> block). Not
scanned: docstrings and bare string statements, the arguments of _(), N_() and ngettext() (an argument built in
place, an f-string or a `+`, is never in the catalogs: that is reported; a name is a constant marked N_() where it is
defined), and log calls. What remains and is not shown to a person
(CSS, a widget key with a space, a Plotly enum) is listed in test_source.ALLOWED with its reason.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ["app.py", *sorted(str(p.relative_to(ROOT)) for d in ("ui", "views") for p in (ROOT / d).rglob("*.py"))]
TRANSLATORS = frozenset({"_", "N_", "ngettext", "pgettext"})
WORD = re.compile(r"[A-Za-z]{2,}")
CAPITALISED = re.compile(r"\s*[*_`#>\-]*\s*[A-Z][a-z]")
STYLE = re.compile(r"<style|data-testid|\[data-|[\w-]+\s*:\s*[^;{}]+;")  # CSS, a selector or a style attribute


@dataclass(frozen=True)
class Literal:
    path: str
    line: int
    text: str
    problem: str  # "not translated" | "not extractable"


def reads_as_text(s: str) -> bool:
    return bool(WORD.search(s)) and (" " in s.strip() or bool(CAPITALISED.match(s))) and not STYLE.search(s)


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _is_log_call(node: ast.Call) -> bool:
    func = node.func
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and "log" in func.value.id.lower()


def scan_source(source: str, path: str) -> list[Literal]:
    tree = ast.parse(source)
    skip: set[int] = set()  # id() of nodes not to report
    found: list[Literal] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, (ast.Constant, ast.JoinedStr)):
            skip.add(id(node.value))  # a docstring or a bare string statement
        elif isinstance(node, ast.Call) and (_name(node.func) in TRANSLATORS or _is_log_call(node)):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                for inner in ast.walk(arg):
                    skip.add(id(inner))
            if _name(node.func) in TRANSLATORS and isinstance(node.func, ast.Name):
                literal_args = node.args[:2] if node.func.id in ("ngettext", "pgettext") else node.args[:1]
                for arg in literal_args:
                    # A literal, or a name bound to one marked N_() where it is defined; a string built in place
                    # (an f-string, a +, a %, a method call on a literal) is never in the catalogs.
                    if isinstance(arg, (ast.JoinedStr, ast.BinOp)) or (
                        isinstance(arg, ast.Call) and isinstance(getattr(arg.func, "value", None), ast.Constant)
                    ):
                        found.append(Literal(path, node.lineno, ast.unparse(arg)[:80], "not extractable"))
        elif isinstance(node, ast.JoinedStr):
            for part in node.values:
                skip.add(id(part))
                if isinstance(part, ast.FormattedValue) and part.format_spec is not None:
                    for inner in ast.walk(part.format_spec):
                        skip.add(id(inner))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(p.value if isinstance(p, ast.Constant) else "{}" for p in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if reads_as_text(text):
            found.append(Literal(path, node.lineno, text, "not translated"))
    return sorted(found, key=lambda f: f.line)


def scan(path: str) -> list[Literal]:
    return scan_source((ROOT / path).read_text(encoding="utf-8"), path)
