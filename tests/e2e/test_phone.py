"""A learner's phone (issue 39): a class through the class server (HAProxy in front of two workers), at 390x844 in
Chromium's mobile emulation (touch, 2x pixels), every action a tap.

- The learner's path: a teacher (a laptop) opens a session; one phone joins by typing the code, another through the
  join link of the QR code the teacher shows (scanned from the screen, as a phone's camera would); both answer
  Masks' predict-first question, see the teacher's reveal, and one follows the teacher to Temperature.
- Every lesson page read at that size: its picture starts on the first screen (before the controls above it on a
  laptop: ui/projector.py's phone CSS), no sideways scrolling (the document no wider than the screen), every chart
  within the screen, visible text at least 14 px (Streamlit's own smallest, its captions and labels; a chart's text
  is held to ui.projector.MIN_TEXT_PX by tests/views/test_projector_text.py; maths is measured by its base size, as
  sub- and superscripts are smaller in print too), and every control at least 24 x 24 CSS px. 24 px is WCAG 2.2's
  minimum target size (success criterion 2.5.8, level AA): a finger needs a target about that large to hit it
  without hitting its neighbour. The controls are buttons, text and number inputs, selects, sliders' thumbs (what a
  finger drags), expanders' and tabs' headers, and the labels of radio buttons and checkboxes (what a finger taps:
  the box itself is drawn inside its label). Each page's widths at 390 px are printed and saved in
  /tmp/attention-lab-shots/phone-widths.json, its first screen in phone-<page>.png.
- Chinese at ?lang=zh: the page's text and its charts declare ui.projector.FONT_FAMILY, a Chinese text is drawn in
  one of its Chinese faces (asked of Chromium, CSS.getPlatformFontsForNode), and nothing is fetched from outside
  127.0.0.1.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from ui import projector

from .conftest import (
    SHOTS_DIR,
    discover_pages,
    open_page,
    outside_requests,
    wait_for_app_idle,
    wait_until,
    when_idle,
)
from .test_first_screen import NO_PICTURE
from .test_follow import go, urlpath
from .test_live_class import SIDEBAR, STEP_TIMEOUT_MS, TAB, click, idle, teacher_opens_a_session

PHONE = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 2,
    "reduced_motion": "reduce",
    "service_workers": "block",
}
LAPTOP = {"viewport": {"width": 1440, "height": 900}, "reduced_motion": "reduce", "service_workers": "block"}
TEXT_PX = 14
TARGET_PX = 24
REVEALED = "Your teacher revealed the lab's answer"
WIDTHS = SHOTS_DIR / "phone-widths.json"
PAGES = discover_pages()
CJK = re.compile(r"[\u3400-\u9fff]")


def name(app_page) -> str:
    """A page's name for files: its URL path (three pages' files are all page.py), "home" for the default one."""
    return app_page.url.strip("/") or "home"


def shot(page, label: str) -> None:
    """The phone's screen as the learner sees it, in SHOTS_DIR/phone-<label>.png."""
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS_DIR / f"phone-{label}.png"), animations="disabled")


def tap(page, target) -> None:
    """Tap `target` once the app is idle, then wait for the run the tap starts."""
    when_idle(page, target, STEP_TIMEOUT_MS).tap()
    idle(page)


def sidebar_open(page, wanted: bool = True):
    """Open (or close) the phone's sidebar, which Streamlit keeps folded on a narrow screen; the sidebar."""
    side = page.locator(SIDEBAR)
    if (side.get_attribute("data-collapsed") == "true") == wanted:
        button = '[data-testid="stExpandSidebarButton"]' if wanted else '[data-testid="stSidebarCollapseButton"] button'
        when_idle(page, page.locator(button).first, STEP_TIMEOUT_MS).tap()
        expect(side).to_have_attribute("data-collapsed", "false" if wanted else "true")
    return side


def class_session(page):
    """The sidebar's Class session expander, open, on the phone."""
    box = sidebar_open(page).locator('[data-testid="stExpander"]').filter(has_text="Class session")
    if not box.locator('[data-testid="stExpanderDetails"]').is_visible():
        tap(page, box.locator("summary"))
        expect(box.locator('[data-testid="stExpanderDetails"]')).to_be_visible()
    return box


def join(page, code: str | None, learner: str) -> None:
    """Type the code (unless a join link filled it in), a display name, and tap Join."""
    box = class_session(page)
    field = box.get_by_label("Session code (from your teacher)")
    if code is None:
        code = field.input_value()  # the link's
    else:
        when_idle(page, field, STEP_TIMEOUT_MS).fill(code)
    when_idle(page, box.get_by_label("Your display name"), STEP_TIMEOUT_MS).fill(learner)
    tap(page, box.get_by_role("button", name="Join", exact=True))
    expect(box.get_by_text(f"In session {code} as {learner}")).to_be_visible(timeout=STEP_TIMEOUT_MS)
    sidebar_open(page, False)


def answer(page, value: str) -> None:
    """Masks' predict-first question, in its tab."""
    tap(page, page.get_by_role("tab", name=TAB))
    when_idle(page, page.get_by_label(re.compile(r"^Your prediction")), STEP_TIMEOUT_MS).fill(value)
    tap(page, page.get_by_role("button", name="Check my prediction"))
    assert page.get_by_text("not recorded for your teacher").count() == 0


def scanned_join_link(teacher) -> str:
    """The link in the QR code the teacher shows the room, read from the teacher's screen."""
    from .test_serve_class import scanned  # zxing-cpp reads it as a phone's camera would (skips without it)

    click(teacher, teacher.locator(SIDEBAR).get_by_role("button", name="Show the code to the room"))
    dialog = teacher.get_by_role("dialog")
    qr = dialog.get_by_role("img")
    expect(qr).to_have_count(1, timeout=STEP_TIMEOUT_MS)
    links = scanned(qr.screenshot())
    teacher.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    assert len(links) == 1, links
    return links[0]


def test_learners_on_phones_join_answer_see_the_reveal_and_follow_the_teacher(browser, class_server):
    seen: list[str] = []
    contexts = [browser.new_context(**LAPTOP), browser.new_context(**PHONE), browser.new_context(**PHONE)]
    for context in contexts[1:]:
        context.on("request", lambda req: seen.append(req.url))
    try:
        teacher, typed, linked = (c.new_page() for c in contexts)
        code = teacher_opens_a_session(teacher, class_server.url)

        open_page(typed, class_server.url, "/masks")
        join(typed, code, "Ada Quillfeather")
        shot(typed, "joined-by-code")
        link = scanned_join_link(teacher)
        assert link == f"{class_server.url}/?session={code}", link
        open_page(linked, class_server.url, link.removeprefix(class_server.url))
        join(linked, None, "Bo Zanzibar")
        sidebar_open(linked)  # the link opens the Start page: Masks is a tap away in the navigation
        tap(linked, linked.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Masks", exact=True))
        sidebar_open(linked, False)
        shot(linked, "joined-by-link")

        for phone, value in ((typed, "0.5"), (linked, "0.95")):
            answer(phone, value)
        shot(typed, "answered")

        when_idle(teacher, teacher.get_by_role("tab", name=TAB), STEP_TIMEOUT_MS).click()
        main = teacher.locator('[data-testid="stMain"]')
        wait_until(
            teacher,
            lambda: "2 answered" in main.inner_text(),
            STEP_TIMEOUT_MS,
            lambda: f"the teacher's panel never showed 2 answers: {main.inner_text()[-1200:]!r}",
        )
        click(teacher, teacher.get_by_role("button", name="Reveal to everyone"))
        for phone in (typed, linked):
            revealed = phone.get_by_text(REVEALED)
            wait_until(
                phone,
                lambda revealed=revealed: revealed.count() > 0,
                STEP_TIMEOUT_MS,
                lambda phone=phone: f"a phone never saw the reveal: {phone.locator('body').inner_text()[-800:]!r}",
            )
        typed.get_by_text(REVEALED).first.scroll_into_view_if_needed()
        shot(typed, "revealed")

        side = sidebar_open(typed)
        tap(typed, side.get_by_text("Follow the teacher", exact=True))
        expect(side.get_by_label("Follow the teacher", exact=True)).to_be_checked(timeout=STEP_TIMEOUT_MS)
        sidebar_open(typed, False)
        go(teacher, "Temperature")
        wait_until(
            typed, lambda: urlpath(typed) == "/temperature", STEP_TIMEOUT_MS, lambda: f"the phone is at {typed.url}"
        )
        wait_for_app_idle(typed, STEP_TIMEOUT_MS)
        chart = typed.locator(".st-key-picture .js-plotly-plot").first
        expect(chart).to_be_visible(timeout=STEP_TIMEOUT_MS)
        box = chart.bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["viewport"]["width"] + 1, box
        shot(typed, "followed")
        assert outside_requests(seen) == []
    finally:
        for context in contexts:
            context.close()


# Measured in the page: its widths, the text under TEXT_PX and the controls under TARGET_PX (both visible only).
_MEASURE_JS = """([textPx, targetPx]) => {
  const main = document.querySelector('[data-testid="stMain"]');
  const shown = el => {
    const r = el.getBoundingClientRect();
    if (r.width < 2 || r.height < 2) return false;  // nothing, or visually hidden (1 px, clipped)
    for (let e = el; e; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden' || parseFloat(s.opacity) === 0) return false;
    }
    return true;
  };
  const describe = el => {
    const keyed = el.closest('[class*="st-key-"]');
    const key = keyed ? [...keyed.classList].find(c => c.startsWith('st-key-')) : '';
    const within = el.closest('[data-testid]');
    const text = (el.innerText || el.value || el.getAttribute('aria-label') || '').trim().slice(0, 40);
    return `${el.tagName.toLowerCase()} in ${within ? within.dataset.testid : '?'} ${key} "${text}"`;
  };
  const charts = [...main.querySelectorAll('.js-plotly-plot')].filter(shown).map(c => c.getBoundingClientRect());
  const small = [];
  const seen = new Set();
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.replace(/[\\s\\u200b-\\u200d\\u2060\\ufeff]/g, '')) continue;
    const el = node.parentElement.closest('.katex') || node.parentElement;  // maths: its base size
    if (seen.has(el) || el.closest('svg, .katex-mathml')) continue;
    seen.add(el);
    if (!shown(el)) continue;
    const px = parseFloat(getComputedStyle(el).fontSize);
    if (px < textPx) small.push(`${px} px: ${describe(el)}`);
  }
  const controls = [...main.querySelectorAll(
      'button, input, select, textarea, summary, [role="combobox"], [data-testid="stCheckbox"] label,'
      + ' [role="radiogroup"] label')]
    .filter(el => !(el.tagName === 'INPUT' && ['range', 'radio', 'checkbox', 'hidden'].includes(el.type)))
    .concat([...main.querySelectorAll('input[type="range"]')].map(i => i.parentElement.parentElement))  // thumbs
    .filter(el => !el.closest('.js-plotly-plot'))  // Plotly's own mode bar: a chart is read, not worked, on a phone
    .filter(shown);
  const tiny = controls.map(el => [el, el.getBoundingClientRect()])
    .filter(([, r]) => r.width < targetPx - 0.5 || r.height < targetPx - 0.5)
    .map(([el, r]) => `${Math.round(r.width)}x${Math.round(r.height)}: ${describe(el)}`);
  const picture = document.querySelector('.st-key-picture .js-plotly-plot');
  return {
    screen: window.innerWidth,
    pictureTop: picture ? Math.round(picture.getBoundingClientRect().top + main.scrollTop) : null,
    scrollWidth: document.scrollingElement.scrollWidth,
    mainScrollWidth: main.scrollWidth,
    charts: charts.length,
    widestChart: Math.round(Math.max(0, ...charts.map(r => r.width))),
    chartRight: Math.round(Math.max(0, ...charts.map(r => r.right))),
    chartLeft: Math.round(Math.min(0, ...charts.map(r => r.left))),
    controls: controls.length,
    small,
    tiny,
  };
}"""


@pytest.fixture(scope="module")
def widths():
    """Each page's widths at 390 px, saved for the notes once every page was read."""
    found: dict[str, dict] = {}
    yield found
    if found:
        SHOTS_DIR.mkdir(parents=True, exist_ok=True)
        WIDTHS.write_text(json.dumps(found, indent=1), encoding="utf-8")


@pytest.fixture(scope="module")
def phone(browser):
    context = browser.new_context(**PHONE)
    yield context
    context.close()


@pytest.mark.parametrize("app_page", PAGES, ids=[name(p) for p in PAGES])
def test_a_lesson_page_reads_on_a_phone(phone, class_server, widths, capsys, app_page):
    page = phone.new_page()
    try:
        open_page(page, class_server.url, app_page.url)
        assert page.locator('[data-testid="stException"]').count() == 0, page.locator("body").inner_text()[-1200:]
        found = page.evaluate(_MEASURE_JS, [TEXT_PX, TARGET_PX])
        shot(page, name(app_page))
    finally:
        page.close()
    widths[name(app_page)] = {
        k: found[k] for k in ("scrollWidth", "mainScrollWidth", "widestChart", "charts", "pictureTop")
    }
    with capsys.disabled():
        print(
            f"\n{app_page.url:<18} at {found['screen']} px: scrollWidth {found['scrollWidth']}, main "
            f"{found['mainScrollWidth']}, widest chart {found['widestChart']} ({found['charts']} charts), "
            f"{found['controls']} controls, picture at y = {found['pictureTop']}"
        )
    screen = found["screen"]
    assert found["scrollWidth"] <= screen and found["mainScrollWidth"] <= screen, f"{app_page.url} scrolls sideways"
    assert found["widestChart"] <= screen and found["chartRight"] <= screen and found["chartLeft"] >= 0, (
        f"{app_page.url}: a chart runs off the screen ({found['widestChart']} px wide, right {found['chartRight']})"
    )
    if app_page.stem not in NO_PICTURE:  # the picture before the controls: it starts on the first screen
        assert found["pictureTop"] is not None and found["pictureTop"] < PHONE["viewport"]["height"], found
    assert found["small"] == [], f"{app_page.url}: text under {TEXT_PX} px:\n" + "\n".join(found["small"])
    assert found["tiny"] == [], f"{app_page.url}: controls under {TARGET_PX} px:\n" + "\n".join(found["tiny"])


# The visible texts (their own text nodes) with Chinese characters: the headings once the page is translated, and the
# language picker's label, which names every language in its own script ("Language · Idioma · 语言").
_CHINESE_JS = """() => {
  const cjk = /[\\u3400-\\u9fff]/;
  const owns = el => el.checkVisibility({visibilityProperty: true})
    && [...el.childNodes].some(n => n.nodeType === 3 && cjk.test(n.textContent));
  const found = [...document.querySelectorAll(':is(h1, h2, h3, [data-testid="stWidgetLabel"]) *')]
    .concat([...document.querySelectorAll('h1, h2, h3')]).filter(owns);
  found.forEach((el, i) => el.setAttribute('data-cjk-probe', String(i)));
  return found.map(el => ({text: el.textContent.trim().slice(0, 40), heading: !!el.closest('h1, h2, h3'),
                           family: getComputedStyle(el).fontFamily}));
}"""


def families(stack: str) -> list[str]:
    return [f.strip().strip("'\"") for f in stack.split(",")]


def test_chinese_is_drawn_in_the_declared_faces_and_nothing_is_fetched_from_outside(browser, class_server, capsys):
    context = browser.new_context(**PHONE)
    seen: list[str] = []
    context.on("request", lambda req: seen.append(req.url))
    try:
        page = context.new_page()
        page.on("websocket", lambda ws: seen.append(ws.url))
        open_page(page, class_server.url, "/?lang=zh")
        sidebar_open(page)  # the picker's label is drawn only in an open sidebar
        wait_for_app_idle(page)
        texts = page.evaluate(_CHINESE_JS)
        sidebar_open(page, False)
        shot(page, "zh")
        assert texts, "no text with Chinese characters on the Start page at ?lang=zh"
        declared = families(projector.FONT_FAMILY)
        for text in texts:
            assert families(text["family"]) == declared, text
        cdp = context.new_cdp_session(page)
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
        for i, text in enumerate(texts):
            node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": f'[data-cjk-probe="{i}"]'})["nodeId"]
            fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
            used = [f["familyName"] for f in fonts]
            cjk = [f for f in used if f in projector.CJK_FAMILIES]
            assert cjk, f"{text['text']!r} drawn in {used}, none of the declared Chinese faces {projector.CJK_FAMILIES}"
            # the rest in the page's own Latin face (Streamlit's Source Sans, served from 127.0.0.1), no other
            assert all(f["isCustomFont"] or f["familyName"] in cjk for f in fonts), (text["text"], fonts)
            with capsys.disabled():
                print(f"\n{text['text']!r} ({'heading' if text['heading'] else 'label'}): drawn in {used}")
        chart_faces = page.evaluate(
            """() => [...new Set([...document.querySelectorAll('.js-plotly-plot .main-svg text')]
                 .map(t => getComputedStyle(t).fontFamily))]"""
        )
        assert chart_faces and all(families(f) == declared for f in chart_faces), chart_faces
        assert outside_requests(seen) == []
    finally:
        context.close()
