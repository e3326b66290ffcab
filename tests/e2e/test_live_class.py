"""Issue 29's "done when", in real browsers on one server: a teacher opens a class session, three learners join through
the join link (`?session=CODE`) and answer Masks' predict-first question, the teacher's panel shows the three answers
(counted, in bins, without a name), the teacher reveals, and every learner's page says so within its polling.

Each browser is its own context (its own Streamlit session), as four devices in a room. The teacher's view is kept
as screenshots at 1440x900 and in projector mode (with the code shown to the room) in /tmp/attention-lab-shots/.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import (
    SHOTS_DIR,
    TEACHER_PASSCODE,
    VIEWPORT,
    open_page,
    outside_requests,
    streamlit_server,
    wait_for_app_idle,
    wait_until,
    when_idle,
)
from .test_offline_and_a11y import FAILING_IMPACTS, describe, run_axe

STEP_TIMEOUT_MS = 120_000  # one run on a busy 2-core machine with four browsers; polled, never slept
LEARNERS = {"Ada Quillfeather": "0.5", "Bo Zanzibar": "0.5", "Cy Wexworth": "0.95"}  # names found nowhere else
JOIN_URL = "http://192.168.1.20:8501/"  # the address a class server announces (ui.join); shown, never fetched
TAB = "Mask before softmax, or zero after?"  # the Masks tab that holds the question
SIDEBAR = '[data-testid="stSidebar"]'


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAB_JOIN_URL", JOIN_URL)
        with streamlit_server(tmp_path_factory.mktemp("live-class"), warmup=False) as server:
            yield server


def new_page(browser, seen: list[str], viewport=VIEWPORT):
    context = browser.new_context(viewport=viewport, reduced_motion="reduce", service_workers="block")
    context.on("request", lambda req: seen.append(req.url))
    return context.new_page()


def no_exception(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator("body").inner_text()[-1500:]


def idle(page) -> None:
    wait_for_app_idle(page, STEP_TIMEOUT_MS)
    no_exception(page)


def shot(page, name: str) -> Path:
    """The viewport as the room sees it (not the whole page), in SHOTS_DIR."""
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    path = SHOTS_DIR / f"{name}.png"
    page.screenshot(path=str(path), animations="disabled")
    return path


def switch_on(page, box, label: str) -> None:
    """Turn the toggle `label` on, once the app is idle, and wait until it shows on and its run has finished."""
    when_idle(page, box.get_by_text(label, exact=True), STEP_TIMEOUT_MS).click()
    expect(box.get_by_label(label, exact=True)).to_be_checked(timeout=STEP_TIMEOUT_MS)
    idle(page)


def click(page, target) -> None:
    """Click `target` once the app is idle (when_idle), then wait for the run it starts."""
    when_idle(page, target, STEP_TIMEOUT_MS).click()
    idle(page)


def teacher_opens_a_session(page, url: str) -> str:
    open_page(page, url, "/masks")
    side = page.locator(SIDEBAR)
    when_idle(page, side.get_by_text("Class session", exact=True), STEP_TIMEOUT_MS).click()
    switch_on(page, side, "I am the teacher")
    when_idle(page, side.get_by_label("Teacher passcode"), STEP_TIMEOUT_MS).fill(TEACHER_PASSCODE)
    click(page, side.get_by_role("button", name="Unlock", exact=True))
    click(page, side.get_by_role("button", name="Open a class session"))
    code_shown = side.locator("p[data-session-code]")
    expect(code_shown).to_have_count(1, timeout=STEP_TIMEOUT_MS)
    code = code_shown.inner_text().strip()
    dialog = page.get_by_role("dialog")  # the code is shown to the room at once
    expect(dialog.get_by_text(code, exact=True)).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    assert re.fullmatch(r"[A-HJKMNP-Z2-9]{6}", code), code
    return code


def learner_joins_and_answers(page, url: str, code: str, name: str, answer: str) -> None:
    open_page(page, url, f"/masks?session={code}")  # the join QR code's link
    side = page.locator(SIDEBAR)
    expect(side.get_by_label("Session code (from your teacher)")).to_have_value(code)  # filled in by the link
    when_idle(page, side.get_by_label("Your display name"), STEP_TIMEOUT_MS).fill(name)
    click(page, side.get_by_role("button", name="Join", exact=True))
    expect(side.get_by_text(f"In session {code} as {name}")).to_be_visible(timeout=STEP_TIMEOUT_MS)
    when_idle(page, page.get_by_role("tab", name=TAB), STEP_TIMEOUT_MS).click()
    when_idle(page, page.get_by_label(re.compile(r"^Your prediction")), STEP_TIMEOUT_MS).fill(answer)
    click(page, page.get_by_role("button", name="Check my prediction"))
    assert page.get_by_text("not recorded for your teacher").count() == 0


def serious_axe(page) -> list[dict]:
    """axe-core's critical and serious violations, as every page is held to them (test_offline_and_a11y)."""
    return [v for v in run_axe(page) if v.get("impact") in FAILING_IMPACTS]


def room_counts(page) -> list[float]:
    """The bar heights of the teacher's room chart, read from the drawn Plotly figure."""
    return page.evaluate(
        """() => {
          for (const el of document.querySelectorAll('.js-plotly-plot')) {
            const title = el.layout && el.layout.title && el.layout.title.text;
            if (title && title.includes("The room's answers")) return el.data.flatMap(t => Array.from(t.y));
          }
          return null;
        }"""
    )


def test_three_learners_answer_the_teacher_sees_the_counts_without_names_and_reveals_to_all(browser, live_server):
    seen: list[str] = []
    teacher = new_page(browser, seen, viewport={"width": 1440, "height": 900})
    code = teacher_opens_a_session(teacher, live_server.url)

    learners = {}
    for name, answer in LEARNERS.items():
        learners[name] = new_page(browser, seen)
        learner_joins_and_answers(learners[name], live_server.url, code, name, answer)

    when_idle(teacher, teacher.get_by_role("tab", name=TAB), STEP_TIMEOUT_MS).click()
    main = teacher.locator('[data-testid="stMain"]')
    wait_until(  # the teacher's panel re-reads the room every second: no reload, no click
        teacher,
        lambda: "3 answered" in main.inner_text(),
        STEP_TIMEOUT_MS,
        lambda: f"the teacher's panel never showed 3 answers: {main.inner_text()[-1500:]!r}",
    )
    idle(teacher)
    counts = room_counts(teacher)
    assert counts is not None and sum(counts) == 3 and sorted(c for c in counts if c) == [1, 2], counts
    text = teacher.locator("body").inner_text()
    for name in LEARNERS:  # the class sees the teacher's screen: no name, whole or in part
        assert name not in text and name.split()[0] not in text and name.split()[1] not in text
    no_exception(teacher)

    assert not (failing := serious_axe(teacher)), describe(failing)  # the room's panel and the open session
    room_chart = teacher.locator('[data-testid="stPlotlyChart"]').filter(has_text="The room's answers")
    room_chart.scroll_into_view_if_needed()
    shot(teacher, "live-class-teacher-1440x900")
    click(teacher, teacher.locator(SIDEBAR).get_by_text("Projector mode (large type)"))
    room_chart.scroll_into_view_if_needed()
    shot(teacher, "live-class-teacher-projector")
    if teacher.locator(SIDEBAR).get_attribute("data-collapsed") == "true":  # projector mode collapses the sidebar
        teacher.locator('[data-testid="stExpandSidebarButton"]').click()
        teacher.wait_for_function(
            "() => document.querySelector('[data-testid=\"stSidebar\"]').getBoundingClientRect().right > 0"
        )
    when_idle(teacher, teacher.locator(SIDEBAR).get_by_role("button", name="Show the code to the room")).click()
    dialog = teacher.get_by_role("dialog")
    expect(dialog.get_by_text(code, exact=True)).to_be_visible(timeout=STEP_TIMEOUT_MS)
    expect(dialog.get_by_role("img")).to_have_count(1)  # the join QR code (LAB_JOIN_URL is set)
    idle(teacher)
    shot(teacher, "live-class-code-projector")
    teacher.keyboard.press("Escape")
    expect(dialog).to_have_count(0)

    click(teacher, teacher.get_by_role("button", name="Reveal to everyone"))
    for name, page in learners.items():  # each learner's page polls the session and reruns on the reveal
        revealed = page.get_by_text("Your teacher revealed the lab's answer")
        wait_until(
            page,
            lambda revealed=revealed: revealed.count() > 0,
            STEP_TIMEOUT_MS,
            lambda name=name, page=page: f"{name} never saw the reveal: {page.locator('body').inner_text()[-800:]!r}",
        )
        no_exception(page)
    first = next(iter(learners.values()))
    first.get_by_text("Your teacher revealed the lab's answer").scroll_into_view_if_needed()
    shot(first, "live-class-learner-revealed")
    assert not (failing := serious_axe(first)), describe(failing)  # a learner in the session, after the reveal
    assert outside_requests(seen) == []
    assert os.path.getsize(SHOTS_DIR / "live-class-teacher-1440x900.png") > 0
