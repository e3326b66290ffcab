"""The Checkpoint page (AppTest): answer, submit, graded by core, kept in LAB_CLASS_DB; the teacher's view
behind the passcode; two sessions writing at once lose nothing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.classroom import checkpoint as cp
from core.classroom.store import ClassStore
from tests.apptest import open_page

PASSCODE = "test-teacher-7c2e"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def class_db(tmp_path, monkeypatch):
    path = tmp_path / "class.db"
    monkeypatch.setenv("LAB_CLASS_DB", str(path))
    return path


def start(name="Ada", code="7B"):
    at = open_page("checkpoint")
    at.text_input(key="checkpoint_name").input(name)
    at.text_input(key="checkpoint_class").input(code)
    at.button[0].click().run()  # the form's submit button
    assert not at.exception, [e.value for e in at.exception]
    return at


def answer(at, questions, n_right):
    """Answer the first n_right questions with the lab's answer, the others wrongly; submit."""
    for i, q in enumerate(questions):
        key = f"cp_answer_{q.id}"
        if q.is_choice:
            value = q.answer if i < n_right else next(o for o in q.options if o != q.answer)
            at.radio(key=key).set_value(value)
        else:
            at.text_input(key=key).input(f"{q.answer:.6f}" if i < n_right else "12345")
    next(b for b in at.button if b.label == "Submit my answers").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("n_right, passed", [(12, True), (10, True), (9, False)])
def test_a_learner_is_graded_by_the_lab_and_the_answers_are_kept(class_db, n_right, passed):
    questions = cp.checkpoint(cp.learner_seed("Ada", "7B"))
    at = answer(start(), questions, n_right)
    if passed:
        assert any(f"Passed: {n_right} of 12 right" in s.value for s in at.success)
    else:
        assert any(f"Not yet: {n_right} of 12 right" in e.value for e in at.error)
        assert any("Revisit" in str(link.proto) for link in at.get("page_link"))  # the missed questions link
    kept = ClassStore(class_db).answers("7B")
    assert len(kept) == 12 and sum(a.correct for a in kept) == n_right
    assert {a.question for a in kept} == {q.id for q in questions}


def test_the_prompts_show_the_numbers_core_draws_for_this_learner(class_db):
    at = start("Bo", "7B")
    shown = " ".join(m.value for m in at.markdown).replace("\\", "")  # the page escapes markdown characters
    for q in cp.checkpoint(cp.learner_seed("Bo", "7B")):
        assert q.prompt in shown


def test_a_bad_name_or_class_code_is_refused_with_a_message(class_db):
    at = start("Ada", "7B; DROP TABLE")
    assert any("class code" in e.value for e in at.error)
    assert not any(b.label == "Submit my answers" for b in at.button)


def test_the_teacher_view_needs_the_passcode_and_then_shows_the_class(class_db, monkeypatch):
    questions = cp.checkpoint(cp.learner_seed("Ada", "7B"))
    answer(start(), questions, 10)
    at = open_page("checkpoint")
    assert not at.get("metric")  # no passcode configured: read-only, nothing shown
    monkeypatch.setenv("LAB_TEACHER_PASSCODE", PASSCODE)
    at = open_page("checkpoint")
    assert not at.get("metric")
    at.text_input(key="teacher_passcode_input").input(PASSCODE)
    next(b for b in at.button if b.label == "Unlock").click().run()
    assert not at.exception
    metric = at.get("metric")[0]
    assert "100%" in str(metric.proto)  # Ada passed with 10 of 12
    assert any("1 learners; pass rate 100%" in c.value for c in at.caption)


SESSION = """
import sys
from core.classroom import checkpoint as cp
from tests.views.test_page_checkpoint import answer, start
name = sys.argv[1]
questions = cp.checkpoint(cp.learner_seed(name, "7B"))
at = start(name, "7B")
for _ in range(5):
    answer(at, questions, 6)
    next(b for b in at.button if b.label == "Take it again").click().run()
"""


def test_two_sessions_writing_fifty_results_each_lose_none(class_db):
    """Two browser sessions (AppTest, each in its own process, as two server sessions are independent) submit
    five checkpoints each, 60 answers a session, at the same time, into one database."""
    env = {**os.environ, "LAB_CLASS_DB": str(class_db)}
    sessions = [
        subprocess.Popen([sys.executable, "-c", SESSION, name], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        for name in ("Ada", "Bo")
    ]
    for proc in sessions:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
    kept = ClassStore(class_db).answers("7B")
    assert len(kept) == 120 and {a.learner for a in kept} == {"Ada", "Bo"}
    assert len({a.attempt for a in kept}) == 10  # every submission its own attempt
