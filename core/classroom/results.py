"""What a teacher reads of the class's answers: the pass rate, each question's difficulty, a CSV export.

A learner's score is the share of questions right in their latest attempt; they pass at PASS_MARK (80%,
../shared/docs/LESSON.md) or more. A question's difficulty is the share of latest attempts that got it wrong.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from core.classroom.store import Answer

PASS_MARK = Fraction(4, 5)  # exact: 8 of 10 passes, 7 of 10 does not, with no float rounding in between
CSV_COLUMNS = ("learner", "class_code", "attempt", "question", "answer", "correct", "at")


@dataclass(frozen=True)
class LearnerScore:
    learner: str
    attempt: str
    right: int
    asked: int
    at: str

    @property
    def passed(self) -> bool:
        return passes(self.right, self.asked)


@dataclass(frozen=True)
class QuestionDifficulty:
    question: str
    wrong: int
    asked: int

    @property
    def share_wrong(self) -> float:
        return self.wrong / self.asked


@dataclass(frozen=True)
class ClassSummary:
    learners: tuple[LearnerScore, ...]  # each learner's latest attempt, by name
    questions: tuple[QuestionDifficulty, ...]  # hardest first

    @property
    def pass_rate(self) -> float | None:
        """Share of learners whose latest attempt passed; None for an empty class."""
        if not self.learners:
            return None
        return sum(s.passed for s in self.learners) / len(self.learners)


def passes(right: int, asked: int) -> bool:
    """The checkpoint's rule, the one the page and the teacher view share: right / asked >= PASS_MARK."""
    return asked > 0 and Fraction(right, asked) >= PASS_MARK


def summarise(answers: Sequence[Answer]) -> ClassSummary:
    latest: dict[str, str] = {}  # learner -> their latest attempt (answers are oldest first)
    for a in answers:
        latest[a.learner] = a.attempt
    kept = [a for a in answers if latest[a.learner] == a.attempt]
    learners = []
    for name in sorted(latest):
        mine = [a for a in kept if a.learner == name]
        learners.append(LearnerScore(name, latest[name], sum(a.correct for a in mine), len(mine), mine[-1].at))
    by_question: dict[str, list[bool]] = {}
    for a in kept:
        by_question.setdefault(a.question, []).append(a.correct)
    questions = [QuestionDifficulty(q, marks.count(False), len(marks)) for q, marks in by_question.items()]
    questions.sort(key=lambda d: (-d.share_wrong, d.question))
    return ClassSummary(tuple(learners), tuple(questions))


def safe_cell(value: object) -> str:
    """A CSV cell a spreadsheet will not run: text starting with = + - @ (or a tab, a return) gets a leading '."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def to_csv(answers: Sequence[Answer]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for a in answers:
        writer.writerow([safe_cell(getattr(a, column)) for column in CSV_COLUMNS])
    return out.getvalue()
