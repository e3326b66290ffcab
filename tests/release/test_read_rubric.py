"""read_rubric reads back what the gate recorded: the shipped model's rubric.json round-trips field for field
through Rubric.to_dict, its `passed` is recomputed from the checks (a file cannot claim it), and a file that is
not a rubric is refused with a ValueError naming the field, never a TypeError or KeyError."""

import json
import shutil
from pathlib import Path

import pytest

from core.jsonfile import JsonFileError
from core.release.gate.rubric import RUBRIC, read_rubric

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "default.release" / RUBRIC


def test_the_shipped_rubric_round_trips_field_for_field():
    recorded = json.loads(SHIPPED.read_text())
    rubric = read_rubric(SHIPPED)
    assert json.loads(json.dumps(rubric.to_dict())) == recorded  # as write_release_record writes it
    assert rubric.passed and len(rubric.checks) == len(recorded["checks"])


def test_passed_is_recomputed_from_the_checks(tmp_path):
    data = json.loads(SHIPPED.read_text())
    data["checks"][2]["passed"] = False  # one failed check, while the file still claims the rubric passed
    assert data["passed"] is True
    (tmp_path / RUBRIC).write_text(json.dumps(data))
    rubric = read_rubric(tmp_path / RUBRIC)
    assert not rubric.passed and rubric.failures()[0].startswith(data["checks"][2]["name"] + ": ")


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda d: d.pop("checks"), "checks is NoneType"),
        (lambda d: d["checks"][0].update(passed="yes"), "checks[0].passed is str"),
        (lambda d: d["checks"][3].update(value=True), "checks[3].value is bool"),
        (lambda d: d["checks"].append("a check"), "checks[12].name is NoneType"),
        (lambda d: d.update(summary=[]), "summary is list"),
        (lambda d: d.update(version=7), "version is int"),
    ],
)
def test_a_file_that_is_not_a_rubric_is_refused_naming_the_field(tmp_path, edit, said):
    data = json.loads(SHIPPED.read_text())
    edit(data)
    (tmp_path / RUBRIC).write_text(json.dumps(data))
    with pytest.raises(ValueError, match=said.replace("[", r"\[").replace("]", r"\]")):
        read_rubric(tmp_path / RUBRIC)


def test_damaged_json_is_the_bounded_readers_error_and_a_missing_file_an_oserror(tmp_path):
    shutil.copy(SHIPPED, tmp_path / RUBRIC)
    (tmp_path / RUBRIC).write_text((tmp_path / RUBRIC).read_text()[:-20])
    with pytest.raises(JsonFileError):
        read_rubric(tmp_path / RUBRIC)
    with pytest.raises(OSError):
        read_rubric(tmp_path / "absent.json")
