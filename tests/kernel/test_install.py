"""What an install takes: requirements.txt and pyproject.toml name the same packages, every package the code imports
is declared, and the files a school's IT asks for are there.

The install itself (`pip install -r requirements.txt` then `streamlit run app.py` in a fresh venv) is
tests/install/test_fresh_venv.py.
"""

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
FIRST_PARTY = {"core", "cli", "ui", "views", "app"}


def requirement_lines(path: Path) -> list[str]:
    """The requirements of a requirements file: every line but comments, blanks and pip options."""
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def canonical(requirements: list[str]) -> set[str]:
    return {str(Requirement(r)) for r in requirements}


def test_requirements_txt_names_exactly_the_dependencies_of_pyproject():
    assert canonical(requirement_lines(ROOT / "requirements.txt")) == canonical(PYPROJECT["project"]["dependencies"])


def test_requirements_txt_takes_torch_from_the_cpu_index_and_pins_it():
    text = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text.splitlines()
    torch = [Requirement(r) for r in requirement_lines(ROOT / "requirements.txt") if Requirement(r).name == "torch"]
    assert [str(r.specifier) for r in torch] == ["==2.13.0"]


def third_party_imports() -> dict[str, set[str]]:
    """Top-level module name -> the files importing it, for the code an install runs (not tests or benches)."""
    files = [ROOT / "app.py", ROOT / "lab.py"]
    for folder in ("core", "cli", "ui", "views"):
        files += sorted((ROOT / folder).rglob("*.py"))
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.smoke
def test_every_package_the_code_imports_is_a_declared_dependency():
    declared = {Requirement(r).name.lower() for r in PYPROJECT["project"]["dependencies"]}
    providers = importlib.metadata.packages_distributions()
    undeclared = {
        module: sorted(files)
        for module, files in third_party_imports().items()
        if not {d.lower() for d in providers.get(module, [])} & declared
    }
    assert undeclared == {}


def test_lab_py_runs_before_anything_is_installed():
    """lab.py creates the environment, so it may import nothing but the standard library."""
    assert not any("lab.py" in files for files in third_party_imports().values())


def test_the_files_a_school_asks_for_are_there_and_packaged():
    for name in ("LICENSE", "CHANGELOG.md", "requirements.txt", ".streamlit/secrets.toml.example"):
        assert (ROOT / name).is_file(), name
    version = PYPROJECT["project"]["version"]
    assert f"## {version} " in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for licence in PYPROJECT["project"]["license-files"]:
        assert (ROOT / licence).is_file(), licence
    # the shipped corpora are package data, so a non-editable install carries them
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["core.model"]
    shipped = {p.name for p in (ROOT / "core/model/corpora").iterdir()}
    assert shipped == {p.name for pattern in patterns for p in (ROOT / "core/model").glob(pattern)}
    assert {"stdlib.json.xz", "pydoc.json.xz", "LICENSE-PSF.txt"} <= shipped
