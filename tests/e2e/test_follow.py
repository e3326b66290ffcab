"""Follow the teacher in a real browser (issue 29, done-when): a teacher context opens a class session, a learner
context joins it (the sidebar's form) and turns Follow the teacher on. The teacher moves Masks' first length slider
and the learner's same slider shows the teacher's value; the teacher goes to Temperature and the learner's page
follows; the learner moves the temperature slider and is told that follow mode is off and how to rejoin.

On a server of its own, warm-up off (its class database is this module's). Every action waits for an idle app first
(when_idle) and is done once; every wait polls the page (wait_until, expect), with a generous bound: the learner's
page learns of a change through its pulse poll (ui.live_class.POLL_S) and the teacher's through the view check
(ui.follow.POLL_S); a bound is a failure message, never a measurement."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

from core.classroom.live import SESSION_CODE
from ui import follow, live_class

from .conftest import (
    APP_IDLE_TIMEOUT_MS,
    TEACHER_PASSCODE,
    VIEWPORT,
    open_page,
    save_screenshot,
    streamlit_server,
    wait_for_app_idle,
    wait_until,
    when_idle,
)

FOLLOW_MS = 30_000  # a shared 2-core machine: the issue asks for a second or two, the test only for "it follows"


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    with streamlit_server(tmp_path_factory.mktemp("follow-server"), warmup=False) as srv:
        yield srv


@pytest.fixture
def two_pages(browser):
    """A teacher's page and a learner's page, each in a context of its own (two browsers in the room)."""
    contexts = [
        browser.new_context(viewport=VIEWPORT, reduced_motion="reduce", service_workers="block") for _ in range(2)
    ]
    yield [c.new_page() for c in contexts]
    for c in contexts:
        c.close()


def sidebar(page):
    return page.locator('[data-testid="stSidebar"]')


def class_session(page):
    """The sidebar's Class session expander, opened."""
    expander = sidebar(page).locator('[data-testid="stExpander"]').filter(has_text="Class session")
    if not expander.locator('[data-testid="stExpanderDetails"]').is_visible():
        when_idle(page, expander.locator("summary")).click()
        expect(expander.locator('[data-testid="stExpanderDetails"]')).to_be_visible()
    return expander


def switch_on(page, box, label: str) -> None:
    """Turn the toggle `label` on, once the app is idle, and wait until it shows on and its run has finished."""
    when_idle(page, box.get_by_text(label, exact=True)).click()
    expect(box.get_by_label(label, exact=True)).to_be_checked(timeout=APP_IDLE_TIMEOUT_MS)
    wait_for_app_idle(page)


def open_session(page) -> str:
    """As the teacher: unlock with the passcode and open a session; its code as shown."""
    box = class_session(page)
    switch_on(page, box, "I am the teacher")
    when_idle(page, box.get_by_label("Teacher passcode")).fill(TEACHER_PASSCODE)
    when_idle(page, box.get_by_role("button", name="Unlock", exact=True)).click()
    open_button = box.get_by_role("button", name="Open a class session")
    when_idle(page, open_button).click()
    code = sidebar(page).locator("p[data-session-code]")  # ui.live_class's large code
    expect(code).to_have_count(1, timeout=APP_IDLE_TIMEOUT_MS)
    shown = code.inner_text().strip()
    assert SESSION_CODE.fullmatch(shown), shown
    dialog = page.get_by_role("dialog")  # the code is shown to the room at once; closed to teach
    expect(dialog).to_have_count(1)
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    return shown


def join(page, code: str) -> None:
    box = class_session(page)
    when_idle(page, box.get_by_label("Session code (from your teacher)")).fill(code)
    box.get_by_label("Your display name").fill("Ada")
    when_idle(page, box.get_by_role("button", name="Join", exact=True)).click()
    expect(box.get_by_text(f"In session {code}")).to_be_visible(timeout=APP_IDLE_TIMEOUT_MS)


def go(page, title: str) -> None:
    """Change page the way a teacher does, through the sidebar's navigation (a new URL would be a new session)."""
    link = sidebar(page).locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True)
    when_idle(page, link).click()
    wait_for_app_idle(page)


def thumb(page, key: str):
    return page.locator(f".st-key-{key}").get_by_role("slider")


def missing(page, key: str) -> str:
    """What the page shows instead of one slider `key`, for a failure message (and a screenshot beside it)."""
    shot = save_screenshot(page, Path(tempfile.mkdtemp(prefix="follow-")), f"follow-missing-{key}")
    main = page.locator('[data-testid="stMain"]')  # Streamlit's <main>
    shown = main.inner_text(timeout=5_000)[:800] if main.count() == 1 else "(no main element)"
    return f"{thumb(page, key).count()} sliders {key} on {page.url}; the page shows: {shown!r}; screenshot {shot}"


def value(page, key: str) -> str | None:
    found = thumb(page, key)
    return found.get_attribute("aria-valuetext") if found.count() == 1 else None


def test_a_learner_follows_the_teachers_slider_and_page_and_leaves_by_moving_one(own_server, two_pages):
    teacher, learner = two_pages
    open_page(teacher, own_server.url, "/")
    code = open_session(teacher)
    open_page(learner, own_server.url, "/")
    join(learner, code)
    switch_on(learner, sidebar(learner), "Follow the teacher")

    go(teacher, "Masks")
    wait_until(learner, lambda: urlpath(learner) == "/masks", FOLLOW_MS, lambda: f"learner still at {learner.url}")
    wait_until(
        learner, lambda: value(learner, "mask_len0") is not None, FOLLOW_MS, lambda: missing(learner, "mask_len0")
    )
    slider = when_idle(teacher, thumb(teacher, "mask_len0"))
    slider.focus()
    slider.press("ArrowLeft")
    slider.press("ArrowLeft")
    wait_for_app_idle(teacher)
    moved = value(teacher, "mask_len0")
    assert moved == "4", moved  # Masks' first length starts at 6 (views/masks.py), two steps down
    wait_until(
        learner,
        lambda: value(learner, "mask_len0") == moved,
        FOLLOW_MS,
        lambda: (
            f"the learner's mask_len0 is {value(learner, 'mask_len0')}, the teacher's {moved}; learner's sidebar: "
            f"{sidebar(learner).inner_text()[-300:]!r}"
        ),
    )

    go(teacher, "Temperature")
    wait_until(
        learner, lambda: urlpath(learner) == "/temperature", FOLLOW_MS, lambda: f"learner still at {learner.url}"
    )
    wait_until(
        learner, lambda: value(learner, "temperature") is not None, FOLLOW_MS, lambda: missing(learner, "temperature")
    )
    mine = when_idle(learner, thumb(learner, "temperature"))
    mine.focus()
    mine.press("ArrowRight")
    left = sidebar(learner).get_by_text(re.compile(r"You left follow mode by moving a slider"))
    wait_until(learner, lambda: left.count() == 1, FOLLOW_MS, lambda: "no 'left follow mode' message")
    assert left.inner_text().strip() == follow.LEFT
    toggle = sidebar(learner).locator(f".st-key-{live_class.FOLLOW_KEY} input")
    expect(toggle).not_to_be_checked()


def urlpath(page) -> str:
    return re.sub(r"^https?://[^/]+", "", page.url).split("?")[0]


def test_a_followers_address_is_the_teachers_page_and_a_reload_comes_back_to_it(own_server, two_pages):
    """Issue 38: the address bar follows the teacher's page, and a reload (a new session, from the address alone)
    follows the teacher again, even when the address bar was left at the page the learner had been on."""
    teacher, learner = two_pages
    open_page(teacher, own_server.url, "/")
    code = open_session(teacher)
    go(teacher, "Masks")
    open_page(learner, own_server.url, "/")
    join(learner, code)
    switch_on(learner, sidebar(learner), "Follow the teacher")
    wait_until(learner, lambda: urlpath(learner) == "/masks", FOLLOW_MS, lambda: f"learner still at {learner.url}")

    go(teacher, "Temperature")
    wait_until(
        learner, lambda: urlpath(learner) == "/temperature", FOLLOW_MS, lambda: f"learner still at {learner.url}"
    )
    wait_for_app_idle(learner)
    learner.evaluate("() => history.replaceState({}, '', '/masks' + location.search)")  # the stale address bar
    learner.reload(wait_until="domcontentloaded")
    wait_until(
        learner,
        lambda: urlpath(learner) == "/temperature" and value(learner, "temperature") is not None,
        FOLLOW_MS,
        lambda: missing(learner, "temperature"),
    )
    wait_for_app_idle(learner)
    expect(sidebar(learner).locator(f".st-key-{live_class.FOLLOW_KEY} input")).to_be_checked()
