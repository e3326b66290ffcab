"""core.classroom.checkpoint: at least ten questions across the lesson, numbers per learner, answers that the
prompt's own numbers give by plain math, grading that survives any input, and the 4-in-5 pass mark."""

import ast
import math
import re
from pathlib import Path

import pytest

from core.classroom.checkpoint import QUESTIONS, checkpoint, grade, learner_seed, parse_number
from core.classroom.results import passes

ROOT = Path(__file__).resolve().parents[2]


def pages_in_app() -> set[str]:
    tree = ast.parse((ROOT / "app.py").read_text())
    return {
        n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Page"
    }


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


def test_ten_or_more_questions_across_the_lesson_each_naming_a_page_of_the_app():
    questions = checkpoint(learner_seed("Ada", "7B"))
    assert len(questions) == len(QUESTIONS) >= 10
    assert len({q.id for q in questions}) == len(questions)
    topics = {q.topic for q in questions}
    needed = {"score shapes", "why divide by √d", "saturation", "masks before softmax", "a fully masked row"}
    needed |= {"reading one row", "temperature", "RoPE: only m - n counts", "the KV cache", "the leak"}
    assert needed <= topics
    assert {q.page for q in questions} <= pages_in_app()


def test_neighbours_get_other_numbers_and_a_learner_the_same_ones_again():
    ada, bo = checkpoint(learner_seed("Ada", "7B")), checkpoint(learner_seed("Bo", "7B"))
    assert [q.prompt for q in ada] == [q.prompt for q in checkpoint(learner_seed("Ada", "7B"))]
    assert sum(a.prompt != b.prompt for a, b in zip(ada, bo)) >= 6
    assert learner_seed("Ada", "7B") != learner_seed("Ada", "8A")


@pytest.mark.numerics
@pytest.mark.parametrize("learner", ["Ada", "Bo", "Chen", "Dana"])
def test_the_answers_follow_from_the_numbers_in_the_prompt_by_plain_math(learner):
    by_id = {q.id: q for q in checkpoint(learner_seed(learner, "7B"))}
    q = by_id["temperature.prob"]
    *scores, tau, token = numbers(q.prompt)[:6]
    exps = [math.exp(s / tau) for s in scores]
    assert q.answer == pytest.approx(exps[int(token) - 1] / math.fsum(exps), abs=1e-12)
    q = by_id["masks.missing_mass"]
    *scores, forbidden = numbers(q.prompt)[:4]
    exps = [math.exp(s) for s in scores]
    assert q.answer == pytest.approx(1 - exps[int(forbidden)] / math.fsum(exps), abs=1e-12)
    q = by_id["row.output"]
    q1x, q1y, k0x, k0y, k1x, k1y, v0, v1 = numbers(q.prompt.replace("q1", "q").replace("k0", "k").replace("k1", "k")
                                                   .replace("v0", "v").replace("v1", "v"))[:8]  # fmt: skip
    s0, s1 = (q1x * k0x + q1y * k0y) / math.sqrt(2), (q1x * k1x + q1y * k1y) / math.sqrt(2)
    w0 = math.exp(s0) / (math.exp(s0) + math.exp(s1))
    assert q.answer == pytest.approx(w0 * v0 + (1 - w0) * v1, abs=1e-12)
    D = numbers(by_id["scaling.factor"].prompt)[0]
    assert by_id["scaling.factor"].answer == pytest.approx(1 / math.sqrt(D), rel=1e-6)  # float32 scores
    held = numbers(by_id["cache.keys"].prompt)[0]
    assert by_id["cache.keys"].answer == held + 1
    shown = numbers(by_id["rope.offset"].prompt)[1]
    assert by_id["rope.offset"].answer == pytest.approx(shown, abs=5e-4)  # only m - n counts


def test_the_right_answers_pass_and_eight_of_ten_is_the_pass_mark():
    questions = checkpoint(learner_seed("Ada", "7B"))
    right = [grade(q, q.answer if q.is_choice else f"{q.answer:.6f}") for q in questions]
    assert all(g.correct for g in right), [g.message for g in right if not g.correct]
    wrong = [grade(q, next(o for o in q.options if o != q.answer) if q.is_choice else "999") for q in questions]
    assert not any(g.correct for g in wrong)
    ten = questions[:10]
    for n_right, passed in ((8, True), (7, False), (10, True)):
        graded = [grade(q, q.answer if q.is_choice else f"{q.answer}") if i < n_right else grade(q, None)
                  for i, q in enumerate(ten)]  # fmt: skip
        assert passes(sum(g.correct for g in graded), len(graded)) is passed


def test_a_number_within_its_stated_tolerance_is_right_and_just_outside_it_is_wrong():
    q = next(q for q in checkpoint(learner_seed("Ada", "7B")) if q.id == "masks.missing_mass")
    assert grade(q, f"{q.answer + 0.009:.4f}").correct
    assert not grade(q, f"{q.answer + 0.02:.4f}").correct
    assert grade(q, f"{q.answer:.2f}".replace(".", ",")).correct  # a decimal comma is read too
    assert "off" in grade(q, "0").message and "tolerance 0.01" in grade(q, "0").message


@pytest.mark.parametrize("given", ["", "   ", "abc", "1e999", "nan", "__import__('os')", "9" * 100, None])
def test_any_input_is_graded_wrong_with_a_message_never_an_exception(given):
    q = next(q for q in checkpoint(learner_seed("Ada", "7B")) if not q.is_choice)
    graded = grade(q, given)
    assert not graded.correct and graded.message and len(graded.given) <= 40


def test_parse_number_reads_numbers_only():
    assert parse_number(" -1,5 ") == -1.5 and parse_number("1e-3") == 0.001
    with pytest.raises(ValueError, match="not a number"):
        parse_number("2+2")
