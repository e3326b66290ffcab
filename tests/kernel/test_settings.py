"""core.settings: each LAB_* setting it owns has its default, takes a usable value, and refuses anything else
with a message that names the variable, the value, the range and the default."""

from pathlib import Path

import pytest

from core import settings
from core.settings import ROOT, SettingError


@pytest.mark.parametrize(
    "read,name,default,hi",
    [
        (settings.max_training_runs, "LAB_MAX_TRAINING_RUNS", 1, settings.MAX_TRAINING_RUNS),
        (settings.torch_threads, "LAB_TORCH_THREADS", 1, settings.MAX_TORCH_THREADS),
    ],
)
def test_a_number_has_its_default_takes_its_range_and_refuses_the_rest(read, name, default, hi):
    assert read({}) == default and read({name: "  "}) == default
    assert read({name: "1"}) == 1 and read({name: f" {hi} "}) == hi
    for bad in ("0", "-1", str(hi + 1), "two", "1.5", "9" * 5000, "\uff13", "1_0"):
        with pytest.raises(SettingError) as e:
            read({name: bad})
        message = str(e.value)
        assert name in message and f"from 1 to {hi}" in message and f"default of {default}" in message
        assert len(message) < 200, "a long value is cut in the message"


def test_directories_default_to_the_repository_not_the_working_directory():
    assert settings.registry_dir({}) == ROOT / "registry" == Path(__file__).resolve().parents[2] / "registry"
    assert settings.runs_dir({"LAB_RUNS_DIR": ""}) == ROOT / "runs"
    assert settings.registry_dir({"LAB_REGISTRY_DIR": "/srv/reg"}) == Path("/srv/reg")
    assert settings.runs_dir({"LAB_RUNS_DIR": "elsewhere"}) == Path("elsewhere")
