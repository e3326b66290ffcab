"""The server's start-up (ui/startup.py): app.py calls `start` before anything else, which sets torch's threads and
freezes the heap once per process; `settle` freezes once per page; importing `ui` and its modules changes nothing
in the process (no thread count, no freeze). tests/views/test_ui_models.py runs the app with settings it cannot use."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ui import startup

ROOT = Path(__file__).resolve().parents[2]


def test_app_calls_start_first_and_settle_after_the_page():
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    code = [ast.unparse(s) for s in tree.body[1:] if not isinstance(s, (ast.Import, ast.ImportFrom))]  # no docstring
    assert code[0] == "startup.start()"  # before st.set_page_config and every widget
    assert code[-2:] == ["page.run()", "startup.settle(page.url_path)"]


def test_start_sets_the_threads_and_freezes_once_per_process(monkeypatch):
    startup.start.cache_clear()
    frozen, threads = [], []
    monkeypatch.setattr(startup.gc, "freeze", lambda: frozen.append(1))  # the real ones are process-wide
    monkeypatch.setattr(startup.torch, "set_num_threads", threads.append)
    monkeypatch.setenv("LAB_TORCH_THREADS", "3")
    startup.start()
    startup.start()
    assert threads == [3] and len(frozen) == 1
    startup.start.cache_clear()


def test_a_threads_setting_it_cannot_use_is_kept_to_be_shown_and_the_default_used(monkeypatch):
    startup.start.cache_clear()
    threads = []
    monkeypatch.setattr(startup.gc, "freeze", lambda: None)
    monkeypatch.setattr(startup.torch, "set_num_threads", threads.append)
    monkeypatch.setattr(startup, "SETTING_PROBLEMS", [])
    monkeypatch.setenv("LAB_TORCH_THREADS", "many")
    startup.start()
    assert threads == [1]
    assert len(startup.SETTING_PROBLEMS) == 1 and "LAB_TORCH_THREADS='many'" in startup.SETTING_PROBLEMS[0]
    startup.start.cache_clear()


def test_settle_freezes_once_per_page(monkeypatch):
    """What a page's first run left alive moves out of the collector's sight once; a later run of the same page
    freezes nothing more (its garbage stays collectable), another page's first run does."""
    startup.settle.cache_clear()
    frozen: list[int] = []
    monkeypatch.setattr(startup.gc, "freeze", lambda: frozen.append(1))
    startup.settle("masks")
    startup.settle("masks")
    assert len(frozen) == 1
    startup.settle("rope")
    assert len(frozen) == 2
    startup.settle.cache_clear()


IMPORT_UI = """
import gc, importlib, json, pkgutil, torch
torch.set_num_threads(2)
before = gc.get_freeze_count()
import ui
for m in pkgutil.iter_modules(ui.__path__):
    importlib.import_module("ui." + m.name)
print(json.dumps({"frozen": gc.get_freeze_count() - before, "threads": torch.get_num_threads()}))
"""


@pytest.mark.smoke
def test_importing_ui_changes_nothing_in_the_process():
    env = {**os.environ, "LAB_TORCH_THREADS": "3"}
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_UI], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == '{"frozen": 0, "threads": 2}'
