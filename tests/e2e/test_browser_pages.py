"""What only a real browser shows: every page of app.py renders without errors and draws its charts;
the temperature slider redraws the chart and writes its value into the address bar.

Pages are discovered from app.py (see conftest.discover_pages), so a new lesson is covered as soon as
it is in the navigation. Screenshots land in /tmp/attention-lab-shots/ for people to look at.
"""

from __future__ import annotations

import math
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from .conftest import (
    ALWAYS,
    APP_IDLE_TIMEOUT_MS,
    UNLESS_STOPPED,
    discover_pages,
    open_page,
    outside_requests,
    page_params,
    save_screenshot,
    wait_for_app_idle,
    wait_until,
)

PAGES = discover_pages()


# st.error boxes that are lesson content, not faults: (page file stem, start of the text). None now: a lesson
# case is a labelled callout (ui.layout.lesson_case), never an error box a projected room reads as a crash.
LESSON_ERROR_BOXES: list[tuple[str, str]] = []


def error_texts(page, stem: str | None = None) -> list[str]:
    """Texts of Streamlit exception boxes, st.error alerts (except the LESSON_ERROR_BOXES of page
    `stem`) and anything showing a traceback."""
    found = [f"exception: {t}" for t in page.locator('[data-testid="stException"]').all_inner_texts()]
    expected = tuple(prefix for s, prefix in LESSON_ERROR_BOXES if s == stem)
    found += [
        f"st.error: {t}"
        for t in page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
        if not (expected and t.strip().startswith(expected))
    ]
    body = page.locator('[data-testid="stApp"]').inner_text()
    if "Traceback" in body:
        found.append("'Traceback' in the page text: " + body[body.index("Traceback") :][:400])
    return found


def plotly_summary(page, scope: str = "") -> list[dict]:
    """Per drawn Plotly chart under `scope`: its SVG title and how many points its traces hold."""
    return page.evaluate(
        """(scope) => [...document.querySelectorAll(scope + ' .js-plotly-plot')].map(gd => ({
              title: (gd.querySelector('.gtitle') || {}).textContent || '',
              traces: (gd.data || []).length,
              points: (gd.data || []).reduce((n, t) => n + ((t.y || t.z || t.x || []).length || 0), 0),
           }))""",
        scope,
    )


def nav_current(page) -> str:
    """The sidebar navigation link marked as the current page ('' if there is none)."""
    link = page.locator('[data-testid="stSidebarNav"] a[aria-current="page"]')
    return link.first.inner_text().strip() if link.count() else ""


@pytest.mark.parametrize("app_page", page_params())
def test_page_renders_without_errors(visit, app_page, tmp_path):
    """The page runs without an exception, error alert or traceback, is the page the navigation
    names for that URL, and draws every chart it has with data in it."""
    page = visit(app_page).page
    save_screenshot(page, tmp_path, f"page-{app_page.stem}")

    assert error_texts(page, app_page.stem) == [], f"{app_page.script} at {app_page.url} shows errors"
    assert nav_current(page) == app_page.title, (
        f"{app_page.url} should be the page titled {app_page.title!r} in app.py's navigation; "
        f"the sidebar marks {nav_current(page)!r}"
    )
    charts = plotly_summary(page)
    if app_page.charts == ALWAYS:
        assert charts, f"{app_page.script} calls a chart function on every load but no Plotly chart was drawn"
    elif app_page.charts == UNLESS_STOPPED and not charts:
        # It stopped before its charts (e.g. no model bundle): it must say why.
        notes = page.locator('[data-testid="stMain"] [data-testid="stAlertContainer"]').all_inner_texts()
        assert notes, f"{app_page.script} drew no chart and shows no message saying why"
    empty = [c for c in charts if c["traces"] == 0 or c["points"] == 0]
    assert not empty, f"{app_page.script} drew Plotly charts without data: {empty}"


# --------------------------------------------------------------------------- temperature

TEMPERATURE = next((p for p in PAGES if p.stem == "temperature"), None)
needs_temperature = pytest.mark.skipif(TEMPERATURE is None, reason="no temperature.py page in app.py")
CHART = ".st-key-temperature_probs"  # ui.companion.chart(..., key="temperature_probs")


def bar_values(page) -> list[float]:
    """The probabilities printed on the temperature chart's bars (SVG text)."""
    return [float(t) for t in page.locator(f"{CHART} .js-plotly-plot text.bartext").all_text_contents()]


def page_scores(page) -> list[float]:
    """The scores the temperature page is using, read from its text box."""
    return [float(x) for x in page.locator(".st-key-scores input").input_value().split(",")]


def softmax(scores: list[float], temperature: float) -> list[float]:
    """The reference, computed here and not by the lab: exp(s / t) / sum exp(s / t)."""
    top = max(s / temperature for s in scores)
    exps = [math.exp(s / temperature - top) for s in scores]
    return [e / sum(exps) for e in exps]


def assert_bars_show_softmax(page, temperature: float) -> list[float]:
    """The bars print softmax(scores / temperature) to 4 decimals."""
    bars = bar_values(page)
    assert bars == pytest.approx(softmax(page_scores(page), temperature), abs=6e-5), (temperature, bars)
    return bars


def chart_titles(page) -> list[str]:
    """The SVG titles of every Plotly chart drawn under the temperature chart's key (one when settled)."""
    return page.locator(f"{CHART} .js-plotly-plot .gtitle").all_text_contents()


def chart_title(page) -> str:
    titles = chart_titles(page)
    assert len(titles) == 1, f"expected one temperature chart, found titles {titles}"
    return titles[0]


def query_value(url: str, key: str) -> str | None:
    values = parse_qs(urlsplit(url).query).get(key)
    return values[-1] if values else None


def wait_for_query_value(page, key: str, expected: float) -> None:
    """Poll the address bar until ?key= holds `expected` (bind="query-params" writes it after the rerun)."""

    def ok() -> bool:
        raw = query_value(page.url, key)
        try:
            return raw is not None and abs(float(raw) - expected) < 1e-6
        except ValueError:
            return False

    wait_until(page, ok, 30_000, lambda: f"the URL should carry {key}={expected:g}; it is {page.url}")


@needs_temperature
def test_temperature_slider_redraws_chart_and_updates_url(page, base_url, requests_seen, tmp_path):
    """Keyboard on the slider thumb: after quick presses the chart's title and bars follow the final
    value, the distribution flattens as the temperature rises, and after one press from a settled
    app the address bar carries temperature=..."""
    open_page(page, base_url, TEMPERATURE.url)
    thumb = page.locator(".st-key-temperature").get_by_role("slider")
    expect(thumb).to_have_count(1)
    start = float(thumb.get_attribute("aria-valuetext"))
    step = float(thumb.get_attribute("step"))
    before_title, before_bars = chart_title(page), assert_bars_show_softmax(page, start)
    assert f"{start:.2f}" in before_title, (before_title, start)

    def settle_at(expected: float) -> tuple[str, list[float]]:
        # Key presses are debounced and a rerun may be superseded by the next: wait for the final
        # value's chart (during a rerun the old and new chart briefly coexist), never count reruns.
        want = f"{expected:.2f}"

        def only_final_chart() -> bool:
            titles = chart_titles(page)
            return len(titles) == 1 and want in titles[0]

        wait_until(
            page,
            only_final_chart,
            APP_IDLE_TIMEOUT_MS,
            lambda: f"the temperature chart should show only {want} in its title; titles: {chart_titles(page)}",
        )
        wait_for_app_idle(page, settle_checks=3)
        assert only_final_chart(), f"the chart changed again after the app settled: {chart_titles(page)}"
        return chart_title(page), assert_bars_show_softmax(page, expected)

    thumb.focus()
    for _ in range(3):
        thumb.press("ArrowRight")
    hotter = start + 3 * step
    expect(thumb).to_have_attribute("aria-valuetext", f"{hotter:.2f}")
    hot_title, hot_bars = settle_at(hotter)

    assert hot_title != before_title
    assert hot_bars != before_bars, "the bars did not change when the temperature rose"
    assert max(hot_bars) < max(before_bars), f"a higher temperature should flatten: {before_bars} -> {hot_bars}"
    # The address bar is written by Streamlit's frontend, not by the lab. After presses faster than its
    # debounce it can keep an intermediate value (the buffered flush does not sync the URL: streamlit PR
    # #14828), so the URL is checked after one press from a settled app, the way a link is made.

    thumb.press("ArrowLeft")
    back = hotter - step
    expect(thumb).to_have_attribute("aria-valuetext", f"{back:.2f}")
    back_title, back_bars = settle_at(back)
    assert max(hot_bars) < max(back_bars) < max(before_bars), (before_bars, back_bars, hot_bars)
    wait_for_query_value(page, "temperature", back)
    save_screenshot(page, tmp_path, "temperature-after-keys")
    assert not outside_requests(requests_seen), outside_requests(requests_seen)


@needs_temperature
def test_temperature_link_sets_the_distribution(page, base_url):
    """/temperature?temperature=0.5 shows softmax(scores / 0.5), sharper than at temperature 1."""
    open_page(page, base_url, f"{TEMPERATURE.url}?temperature=0.5")
    assert "0.50" in chart_title(page), chart_title(page)
    expect(page.locator(".st-key-temperature").get_by_role("slider")).to_have_attribute("aria-valuetext", "0.50")
    assert "not usable" not in page.locator('[data-testid="stMain"]').inner_text()
    bars = assert_bars_show_softmax(page, 0.5)
    assert max(bars) > max(softmax(page_scores(page), 1.0)), bars
    assert error_texts(page) == []


@needs_temperature
def test_temperature_link_with_unusable_value_says_so(page, base_url, tmp_path):
    """/temperature?temperature=abc falls back to the default and tells the reader why."""
    open_page(page, base_url, f"{TEMPERATURE.url}?temperature=abc")
    note = page.locator('[data-testid="stMain"]').get_by_text("not usable")
    expect(note).to_have_count(1)
    assert "abc" in note.inner_text()
    default = page.locator(".st-key-temperature").get_by_role("slider").get_attribute("aria-valuetext")
    assert default in chart_title(page), (default, chart_title(page))
    assert_bars_show_softmax(page, float(default))
    assert error_texts(page) == []
    save_screenshot(page, tmp_path, "temperature-unusable-link")


@needs_temperature
def test_temperature_revealed_measurement_draws_heatmaps(page, base_url, tmp_path):
    """The prediction exercise, revealed once the learner has checked a prediction, draws both weight heatmaps."""
    open_page(page, base_url, TEMPERATURE.url)
    assert not page.locator(".st-key-scaling_base").count(), "the measurement waits for the prediction"
    page.get_by_text("sharper: each row's largest weight grows, towards one-hot", exact=True).click()
    page.get_by_role("button", name="Check my prediction").click()
    wait_for_app_idle(page)
    expect(page.get_by_text("Right. You predicted")).to_be_visible()
    save_screenshot(page, tmp_path, "temperature-revealed")
    assert error_texts(page) == []
    for key in ("scaling_base", "scaling_big"):
        charts = plotly_summary(page, f".st-key-{key}")
        assert len(charts) == 1 and charts[0]["points"] > 0, (key, charts)
        assert charts[0]["title"].startswith("weights"), charts[0]


# The chart text a reader needs: titles, axis titles, legends, annotations, tick labels, bar values,
# colour bars. Two of them sharing more than OVERLAP_PX in both directions are drawn over each other.
# (Tick labels among themselves are Plotly's business; heatmap cell values are not checked.)
OVERLAP_PX = 2
_OVERLAPS_JS = """
([tolerance]) => {
  const kinds = [
    ['title', '.gtitle'], ['x axis title', '.xtitle, .x2title'], ['y axis title', '.ytitle, .y2title'],
    ['legend', 'g.legend'], ['annotation', 'g.annotation-text-g'], ['bar value', 'text.bartext'],
    ['tick label', '.xtick text, .ytick text, .x2tick text, .y2tick text'], ['colour bar', 'g.colorbar'],
  ];
  const found = [];
  document.querySelectorAll('.js-plotly-plot').forEach((gd, n) => {
    const chart = ((gd.querySelector('.gtitle') || {}).textContent || '').trim() || `chart ${n + 1}`;
    const boxes = [];
    for (const [kind, selector] of kinds) {
      gd.querySelectorAll(selector).forEach(el => {
        const r = el.getBoundingClientRect();
        if (r.width >= 1 && r.height >= 1) boxes.push({kind, text: (el.textContent || '').trim().slice(0, 40), r});
      });
    }
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      if (a.kind === 'tick label' && b.kind === 'tick label') continue;
      const w = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
      const h = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
      if (w > tolerance && h > tolerance)
        found.push(`'${chart}': ${a.kind} '${a.text}' overlaps ${b.kind} '${b.text}'`
                   + ` (${Math.round(w)} x ${Math.round(h)} px)`);
    }
  });
  return found;
}
"""


@pytest.mark.parametrize("app_page", page_params())
def test_chart_labels_do_not_overlap(visit, app_page):
    """No chart draws its title, axis titles, legend, annotations, tick labels or bar values over each other."""
    overlaps = visit(app_page).page.evaluate(_OVERLAPS_JS, [OVERLAP_PX])
    assert not overlaps, f"{app_page.script}: chart labels drawn over each other:\n" + "\n".join(overlaps)


def test_link_to_a_lesson_on_a_fresh_server_gets_app_navigation(first_visit):
    """A teacher starts the server and shares a link to a lesson: that first visitor gets app.py's
    navigation, not Streamlit's old pages/-directory app (each file run alone, without app.py)."""
    if first_visit.app_page is None:
        pytest.skip("app.py has no page besides the default one")
    assert not first_visit.error, f"the first visit to {first_visit.app_page.url} failed: {first_visit.error}"
    titles = [p.title for p in PAGES]
    assert first_visit.nav_links == titles, (
        f"The first visit to {first_visit.app_page.url} after the server started shows the navigation "
        f"{first_visit.nav_links}, not app.py's {titles}: Streamlit ran {first_visit.app_page.script} as an "
        f"old-style views/ app, without app.py (no st.set_page_config, no st.navigation). "
        f"Screenshot: {first_visit.screenshot}"
    )
