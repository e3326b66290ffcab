"""The first stage's corpus of the shipped code model: the running CPython's other standard-library modules.

    .venv/bin/python scripts/other_stdlib_corpus.py OUT.txt

The pinned "stdlib" corpus holds 207 modules (core.model.corpus.STDLIB_MODULES) and the shipped model is judged on
the 21 its split holds out (seed 0, a tenth). The interpreter carries about 1,200 more pure-Python files: the test
suite, idlelib, lib2to3, distutils and the rest. This writes them as one text (documents joined by blank lines,
the form `train --corpus FILE` reads), leaving out, so that the held-out figures stay honest:

- every module of the pinned corpus, train side and held-out side alike;
- every file whose path names a held-out module or its package (its tests, its helpers: test_typing.py,
  test_email/, typinganndata/, xml/etree/ElementPath.py);
- every file that shares 20 or more long lines (30 characters or more, imports and comments aside), or more than
  5% of its long lines, with a held-out module (aifc.py and sunau.py share wave.py's code, chunk.py too);
- files under 300 or over 200,000 characters, and files with a character outside the shipped model's vocabulary.

docs/RELEASE.md says how the shipped model was trained from it.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.model.corpus import STDLIB_MODULES, load_corpus, split_documents  # noqa: E402

MIN_CHARS, MAX_CHARS = 300, 200_000
LONG_LINE = 30  # characters: shorter lines ("return self", "else:") are shared by any two Python files
MAX_SHARED_LINES, MAX_SHARED_SHARE = 20, 0.05


def long_lines(text: str) -> set[str]:
    lines = (line.strip() for line in text.splitlines())
    return {line for line in lines if len(line) >= LONG_LINE and not line.startswith(("from ", "import ", "#"))}


def main(out: Path) -> None:
    manifest = json.loads((ROOT / "models" / "default" / "manifest.json").read_text())
    vocabulary = set(manifest["tokenizer"]["chars"])
    _, held_out = split_documents(load_corpus("stdlib"), 0.1, 0)
    held_lines = set().union(*(long_lines(d.text) for d in held_out))
    # "typing" for typing.py, "dbm" for dbm/__init__.py; "email" and "etree" for email/_header_value_parser.py and
    # xml/etree/ElementTree.py, whose packages hold their relatives under other names
    names = {Path(d.name).parent.name if d.name.endswith("__init__.py") else Path(d.name).stem for d in held_out}
    names = {n.strip("_") for n in names} | {"email", "etree"}
    root = Path(sysconfig.get_paths()["stdlib"])
    pinned = set(STDLIB_MODULES)
    kept: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in pinned or "site-packages" in rel or any(name in rel for name in names):
            continue
        try:
            text = path.read_text("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if not MIN_CHARS <= len(text) <= MAX_CHARS or not set(text) <= vocabulary:
            continue
        lines = long_lines(text)
        shared = len(lines & held_lines)
        if shared >= MAX_SHARED_LINES or (lines and shared / len(lines) > MAX_SHARED_SHARE):
            continue
        kept.append(text.strip("\n") + "\n")
    out.write_text("\n\n".join(kept), encoding="utf-8")
    print(f"{out}: {len(kept):,} files, {sum(map(len, kept)):,} characters")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    main(Path(sys.argv[1]))
