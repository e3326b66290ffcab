"""Issue 23's second "done when", in real browsers through the class server's proxy (HAProxy in front of two workers):
a class answers the Checkpoint; part-way through, the worker that serves the first learner is SIGKILLed (its whole
process group, as the kernel's OOM killer or a crash would leave it); the learners pinned to it reconnect (HAProxy's
redispatch sends their pages to the live worker, or to the restarted one) and carry on; at the end every submission
a page confirmed is in the class database, answer by answer, read back through ClassStore. Once on SQLite (the
server's LAB_CLASS_DB) and once with LAB_DATABASE_URL on the throwaway PostgreSQL of tests/db.py.

Why browsers and not bench/bench_load_protocol.py's protocol client: the claim is that a learner's *page* reconnects
after its worker dies. Only Streamlit's own frontend shows what a learner sees then (it reconnects by itself, and its
session, held in the dead worker's memory, is gone); a hand-written client would test my reconnection code instead.
Four learners in one Chromium are light enough for this machine. Screenshots go to /tmp/class-shots/.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from db import Where
from playwright.sync_api import expect

from cli.haproxy import COOKIE
from core.classroom import checkpoint as cp
from core.classroom.store import ClassStore

from .conftest import VIEWPORT, open_page, save_screenshot, serve_class, wait_for_app_idle, wait_until, when_idle

SHOTS = Path("/tmp/class-shots")
CLASS = "KILL-23"
LEARNERS = 4
STEP_TIMEOUT_MS = 120_000  # one submission or one reconnection on a busy 2-core machine; polled, never slept


@dataclass(frozen=True)
class Submission:
    """What one learner submitted and the page confirmed: their name and, per question id, (answer, correct)."""

    learner: str
    answers: frozenset[tuple[str, str, bool]]


@dataclass
class Learner:
    name: str
    page: object
    submitted: list[Submission] = field(default_factory=list)
    sockets: list[str] = field(default_factory=list)  # every websocket the page opened (a reconnection opens one)
    lost: int = 0  # submissions a fresh session never received (the page had reconnected to another worker)

    @property
    def worker(self) -> str | None:
        return {c["name"]: c["value"] for c in self.page.context.cookies()}.get(COOKIE)


def given_answer(q: cp.Question, right: bool) -> str:
    """The text a learner gives: the lab's answer, or one that is wrong by construction (another option; a number
    far outside the stated tolerance), so the expected verdict never comes from the code under test."""
    if q.is_choice:
        return q.answer if right else next(o for o in q.options if o != q.answer)
    return f"{q.answer if right else q.answer + 100 * q.tolerance + 1:.6f}"


def no_exception(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator("body").inner_text()[-1500:]


def begin(learner: Learner) -> None:
    """Get to an open answer form: take it again after a submission, and give the name and class code whenever the
    page asks for them (the first visit, or a session the worker never held)."""
    page = learner.page
    wait_for_app_idle(page, STEP_TIMEOUT_MS)
    again = page.get_by_role("button", name="Take it again")
    if again.count():
        when_idle(page, again, STEP_TIMEOUT_MS).click()
        wait_for_app_idle(page, STEP_TIMEOUT_MS)
    if page.get_by_label("Your name").count():
        when_idle(page, page.get_by_label("Your name"), STEP_TIMEOUT_MS).fill(learner.name)
        page.get_by_label("Class code (from your teacher)").fill(CLASS)
        when_idle(page, page.get_by_role("button", name="Start the checkpoint"), STEP_TIMEOUT_MS).click()
    expect(page.get_by_role("button", name="Submit my answers")).to_be_enabled(timeout=STEP_TIMEOUT_MS)
    wait_for_app_idle(page, STEP_TIMEOUT_MS)
    no_exception(page)


def take_checkpoint(learner: Learner, wrong: set[int]) -> Submission:
    """Answer every question (those numbered in `wrong` wrongly), submit, and wait for the page's verdict.

    A page that reconnected to another worker after its own died still shows the old session's form (Streamlit's
    frontend does not rerun on reconnecting); pressing Submit there runs the page in a fresh session, which asks for
    the name again and has received no answers. That submission was never confirmed: the learner starts again."""
    page = learner.page
    questions = cp.checkpoint(cp.learner_seed(learner.name, CLASS))
    right = len(questions) - len(wrong)
    verdict = page.get_by_text(f"{right} of {len(questions)} right (")  # drawn after store().record returned
    for _ in range(2):
        begin(learner)
        numbers = page.locator('input[type="text"][aria-label="Your answer"]')
        choices = page.get_by_role("radiogroup", name="Your answer")
        expect(numbers).to_have_count(sum(not q.is_choice for q in questions))
        rows, n, c = [], 0, 0
        for i, q in enumerate(questions):
            text = given_answer(q, right=i not in wrong)
            if q.is_choice:
                choices.nth(c).get_by_text(text, exact=True).click()
                c += 1
            else:
                numbers.nth(n).fill(text)
                n += 1
            rows.append((q.id, text, i not in wrong))
        when_idle(page, page.get_by_role("button", name="Submit my answers"), STEP_TIMEOUT_MS).click()
        wait_until(
            page,
            lambda: verdict.count() > 0 or page.get_by_label("Your name").count() > 0,
            STEP_TIMEOUT_MS,
            lambda: f"{learner.name}'s submission was neither confirmed nor refused: {page_state(page)}",
        )
        wait_for_app_idle(page, STEP_TIMEOUT_MS)
        no_exception(page)
        if verdict.count():
            assert page.get_by_text("could not be kept for your teacher").count() == 0
            submission = Submission(learner.name, frozenset(rows))
            learner.submitted.append(submission)
            return submission
        learner.lost += 1
    pytest.fail(f"{learner.name} could not submit twice in a row: {page_state(page)}", pytrace=False)


def page_state(page) -> str:
    """What a learner's page shows (for a failure's message), its screenshot kept."""
    app = page.locator('[data-testid="stApp"]')
    state = (app.get_attribute("data-test-connection-state"), app.get_attribute("data-test-script-state"))
    save_screenshot(page, SHOTS, "class-checkpoint-stuck")
    return f"{state}: {page.locator('body').inner_text()[:600]!r}"


def command_line(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:  # exited meanwhile, or a zombie (serve reaps a finished warm-up only when it stops)
        return []


def streamlit_worker(server, name: str) -> psutil.Process:
    """The Streamlit process of worker `name`, found among serve's children by the port on its command line."""
    port = server.worker_port(name)
    children = psutil.Process(server.proc.pid).children(recursive=True)
    found = [
        p for p in children if "streamlit" in command_line(p) and f"--server.port {port}" in " ".join(command_line(p))
    ]
    assert len(found) == 1, [command_line(p) for p in children]
    return found[0]


@pytest.fixture(params=["sqlite", "postgresql"])
def class_db(request, tmp_path):
    """The extra settings of the class server and the class database's location, on each engine."""
    if request.param == "sqlite":
        yield {}, str(tmp_path / "class.db")  # serve_class's own LAB_CLASS_DB
        return
    where = Where("postgresql", tmp_path, request.getfixturevalue("postgres_server"))
    url = where.db()
    try:
        yield {"LAB_DATABASE_URL": url}, url
    finally:
        where.drop()


def test_every_confirmed_answer_survives_a_worker_killed_during_the_checkpoint(browser, class_db, tmp_path):
    settings, location = class_db
    with serve_class(tmp_path, **settings) as server:
        learners: list[Learner] = []
        try:
            for i in range(LEARNERS):
                context = browser.new_context(viewport=VIEWPORT, reduced_motion="reduce", service_workers="block")
                learner = Learner(f"Learner {i} Ünïcode", context.new_page())
                learner.page.on("websocket", lambda ws, sockets=learner.sockets: sockets.append(ws.url))
                learners.append(learner)
                open_page(learner.page, server.url, "/checkpoint")
            pinned = [learner.worker for learner in learners]
            assert set(pinned) == {"w1", "w2"}, pinned  # HAProxy spread the class over both workers (leastconn)

            # Part-way: two learners have submitted, the others are in the middle of the form.
            take_checkpoint(learners[0], wrong={0})
            take_checkpoint(learners[1], wrong={1, 2})
            for learner in learners[2:]:
                begin(learner)
                learner.page.locator('input[type="text"][aria-label="Your answer"]').first.fill("0.5")

            victim = pinned[0]
            on_victim = [learner for learner, worker in zip(learners, pinned, strict=True) if worker == victim]
            process = streamlit_worker(server, victim)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            wait_until(
                on_victim[0].page,
                lambda: all(len(p.sockets) > 1 for p in on_victim),
                STEP_TIMEOUT_MS,
                lambda: (
                    f"the pages on the killed worker {victim} never reconnected: "
                    + " | ".join(page_state(p.page) for p in on_victim)
                ),
            )
            for learner in on_victim:
                wait_for_app_idle(learner.page, STEP_TIMEOUT_MS)  # connected again, through the proxy
                assert all(url.startswith(server.url.replace("http", "ws", 1)) for url in learner.sockets)
            save_screenshot(on_victim[0].page, SHOTS, "class-checkpoint-reconnected")

            # After the kill every learner submits (again), the killed worker's learners through the proxy's choice.
            for i, learner in enumerate(learners):
                take_checkpoint(learner, wrong={i % 3, 5} if i % 2 else set())
            save_screenshot(learners[0].page, SHOTS, "class-checkpoint-after-kill")
            assert {learner.worker for learner in learners} <= {"w1", "w2"}
            untouched = [learner for learner in learners if learner not in on_victim]
            assert all(learner.lost == 0 for learner in untouched)  # the live worker's sessions never noticed
        finally:
            for learner in learners:
                learner.page.context.close()

    kept = ClassStore(location).answers(CLASS)
    attempts: dict[str, set] = {}
    for a in kept:
        attempts.setdefault(a.attempt, set()).add((a.learner, a.question, a.answer, a.correct))
    assert all(len({row[0] for row in rows}) == 1 for rows in attempts.values())  # an attempt is one learner's
    found = Counter(
        (next(iter(rows))[0], frozenset((q, text, ok) for _, q, text, ok in rows)) for rows in attempts.values()
    )
    confirmed = Counter((s.learner, s.answers) for learner in learners for s in learner.submitted)
    assert sum(confirmed.values()) == LEARNERS + 2
    assert found == confirmed  # every confirmed submission, answer by answer; nothing more
