"""The checkpoint end to end in a real browser: a learner answers every question, submits, passes; the answers
are in the server's class database; the teacher unlocks the class's results. Screenshots are kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from playwright.sync_api import expect

from core.classroom import checkpoint as cp

from .conftest import TEACHER_PASSCODE, open_page, save_screenshot, wait_for_app_idle

LEARNER, CLASS = "Browser Learner", "E2E-7B"


def test_a_learner_takes_the_checkpoint_and_the_teacher_sees_it(page, base_url, server, tmp_path):
    open_page(page, base_url, "/checkpoint")
    page.get_by_label("Your name").fill(LEARNER)
    page.get_by_label("Class code (from your teacher)").fill(CLASS)
    page.get_by_role("button", name="Start the checkpoint").click()
    wait_for_app_idle(page)
    questions = cp.checkpoint(cp.learner_seed(LEARNER, CLASS))
    numbers = page.locator('input[type="text"][aria-label="Your answer"]')
    choices = page.get_by_role("radiogroup", name="Your answer")
    expect(numbers).to_have_count(sum(not q.is_choice for q in questions))
    n = c = 0
    for q in questions:
        if q.is_choice:
            choices.nth(c).get_by_text(q.answer, exact=True).click()
            c += 1
        else:
            numbers.nth(n).fill(f"{q.answer:.6f}")
            n += 1
    page.get_by_role("button", name="Submit my answers").click()
    wait_for_app_idle(page)
    expect(page.get_by_text(f"Passed: {len(questions)} of {len(questions)} right (100%).")).to_be_visible()
    save_screenshot(page, tmp_path, "checkpoint-passed")

    db = Path(server.log_path).parent / "class.db"
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT question, correct FROM answers WHERE learner = ?", (LEARNER,)).fetchall()
    assert len(rows) == len(questions) and all(correct == 1 for _, correct in rows)

    page.get_by_label("Teacher passcode").fill(TEACHER_PASSCODE)
    page.get_by_role("button", name="Unlock", exact=True).click()
    wait_for_app_idle(page)
    expect(page.get_by_text("Pass rate (latest attempt of each learner)")).to_be_visible()
    expect(page.get_by_role("button", name="Download every answer of this class as CSV")).to_be_visible()
    save_screenshot(page, tmp_path, "checkpoint-teacher")
