"""The model pages in a real browser: a training run started and stopped from the page with its loss
curve drawn, an autocomplete request that returns suggestions, and Accept typing with the model. Screenshots
are kept."""

from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from .conftest import APP_IDLE_TIMEOUT_MS, open_page, outside_requests, save_screenshot, wait_for_app_idle, wait_until

RUN_TIMEOUT_MS = 240_000  # a shared 2-core CI machine; polled, never slept


def plot_titles(page) -> list[str]:
    return page.locator(".js-plotly-plot .gtitle").all_text_contents()


def body_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def test_a_training_run_started_and_stopped_from_the_page_draws_its_curve(page, base_url, tmp_path, requests_seen):
    # The tiny preset (the page's default) with a budget large enough that Stop comes first.
    open_page(page, base_url, "/training?train_iters=3000&train_seconds=600")
    page.get_by_role("button", name="Start training", exact=True).click()
    wait_until(
        page,
        lambda: "Loss while training" in plot_titles(page),
        RUN_TIMEOUT_MS,
        lambda: f"no loss curve appeared; the page says:\n{body_text(page)[-1500:]}",
    )
    # The curve grows while the run goes on: at least one evaluation after step 0 before we stop.
    wait_until(
        page,
        lambda: page.locator(".js-plotly-plot .scatterlayer .trace").count() > 0,
        RUN_TIMEOUT_MS,
        lambda: "the loss chart has no line",
    )
    save_screenshot(page, tmp_path, "training-running")
    page.get_by_role("button", name="Stop", exact=True).click()
    wait_until(
        page,
        lambda: "Stopped at step" in body_text(page),
        RUN_TIMEOUT_MS,
        lambda: f"the run did not report its stop; the page says:\n{body_text(page)[-1500:]}",
    )
    wait_for_app_idle(page, APP_IDLE_TIMEOUT_MS)
    assert "Loss while training" in plot_titles(page)
    # The stopped run became a bundle this session can select in the sidebar.
    page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(has_text="Model bundle").click()
    options = page.get_by_role("option").all_text_contents()
    page.keyboard.press("Escape")
    assert any(o.startswith("Trained here") for o in options), options
    save_screenshot(page, tmp_path, "training-stopped")
    assert outside_requests(requests_seen) == []


MAP_TITLE = re.compile(r"^Your run, step (\d+): layer \d+, head \d+$")  # ui.training_view.snapshot_view's title


def map_step(page) -> int | None:
    """The evaluation step the run's attention map shows (None: no map of a run yet)."""
    steps = [int(m.group(1)) for t in plot_titles(page) if (m := MAP_TITLE.match(t))]
    return steps[0] if steps else None


def newest_step(page) -> int | None:
    """The newest evaluation's step, as the loss chart's summary names it."""
    m = re.search(r"At step (\d+) the train loss is", body_text(page))
    return int(m.group(1)) if m else None


def test_the_attention_map_follows_the_run_and_stays_where_a_learner_holds_it(page, base_url, tmp_path, requests_seen):
    """Issue 25's done-when: the snapshot step advances while the run goes on, the slider untouched. Then a learner
    switches Follow off and moves the slider to step 0 (keyboard: Home): it stays there while newer evaluations
    arrive; Follow on shows the newest again."""
    open_page(page, base_url, "/training?train_iters=5000&train_seconds=600")
    assert "Where training ends up" in body_text(page)  # before a run: the shipped model's map
    page.get_by_role("button", name="Start training", exact=True).click()
    wait_until(
        page,
        lambda: "Where training ends up" not in body_text(page),
        RUN_TIMEOUT_MS,
        lambda: f"the run's view did not replace the shipped map:\n{body_text(page)[-1500:]}",
    )
    wait_until(
        page,
        lambda: (map_step(page) or 0) > 0,
        RUN_TIMEOUT_MS,
        lambda: f"no map after step 0; the page says:\n{body_text(page)[-1500:]}",
    )
    first = map_step(page)
    wait_until(
        page,
        lambda: (map_step(page) or 0) > first,
        RUN_TIMEOUT_MS,
        lambda: f"the map stayed at step {first} while the run went on:\n{body_text(page)[-1500:]}",
    )
    save_screenshot(page, tmp_path, "training-following")

    follow = page.get_by_text("Follow newest", exact=True)
    follow.click()  # the learner takes the slider: switched off, nothing the run does moves it
    slider = page.get_by_role("slider").first
    wait_until(page, lambda: slider.is_enabled(), RUN_TIMEOUT_MS, lambda: "the slider stayed disabled")
    slider.focus()
    page.keyboard.press("Home")
    wait_until(page, lambda: map_step(page) == 0, RUN_TIMEOUT_MS, lambda: f"Home did not show step 0: {map_step(page)}")
    held_while = newest_step(page) or 0
    wait_until(
        page,
        lambda: (newest_step(page) or 0) > held_while,
        RUN_TIMEOUT_MS,
        lambda: f"no newer evaluation after {held_while}:\n{body_text(page)[-1500:]}",
    )
    assert map_step(page) == 0  # the learner's step outlives new evaluations

    follow.click()
    wait_until(
        page,
        lambda: (map_step(page) or 0) > 0 and map_step(page) == newest_step(page),
        RUN_TIMEOUT_MS,
        lambda: f"Follow did not follow the run again:\n{body_text(page)[-1500:]}",
    )
    page.get_by_role("button", name="Stop", exact=True).click()
    wait_until(
        page,
        lambda: "Stopped at step" in body_text(page),
        RUN_TIMEOUT_MS,
        lambda: f"the run did not report its stop; the page says:\n{body_text(page)[-1500:]}",
    )
    assert "/runs/" not in body_text(page)  # named by its label and version, never by a server path
    assert outside_requests(requests_seen) == []


QUOTED = "Quoted: "  # ui.suggestion_view: the suggestion as a JSON string, then what the glyphs mean
PROMPT_LABEL = "Text to complete (the prompt; Ctrl+Enter to apply)"


def quoted_suggestion(page) -> str | None:
    """The suggestion the page shows, read from its quoted line (None: the page offers none)."""
    for line in page.locator('[data-testid="stText"]').all_inner_texts():
        if line.startswith(QUOTED):
            return json.loads(line[len(QUOTED) : line.rindex(" (")])
    return None


def enter_prompt(page, text: str) -> None:
    prompt = page.get_by_label(PROMPT_LABEL)
    prompt.fill(text)
    prompt.press("Control+Enter")
    wait_for_app_idle(page, RUN_TIMEOUT_MS)
    # The candidates wait for the learner's prediction (ui.predict); the question is asked once the model answered.
    expect(page.get_by_text("Predict first.")).to_be_visible(timeout=RUN_TIMEOUT_MS)


def reveal_candidates(page) -> None:
    """Answer the page's prediction (any number) and wait for the candidate chart it reveals."""
    page.get_by_label(re.compile("^Your prediction")).fill("0.5")
    page.get_by_role("button", name="Check my prediction").click()
    wait_until(
        page,
        lambda: any("next characters" in t for t in plot_titles(page)),
        RUN_TIMEOUT_MS,
        lambda: "no candidate chart after the prediction",
    )
    wait_for_app_idle(page, RUN_TIMEOUT_MS)


def test_an_autocomplete_request_returns_candidates_and_a_suggestion(page, base_url, tmp_path, requests_seen):
    open_page(page, base_url, "/autocomplete")
    enter_prompt(page, "import ")
    code_blocks = page.locator('[data-testid="stCode"]').all_inner_texts()
    assert code_blocks[0].strip() == "import␣"  # what the model sees, whitespace made visible
    text = body_text(page)
    assert "Suggestion" in text and "Accept suggestion" in text
    assert "Probability" in text and "Keystrokes saved" in text  # the first tab: the suggestion's numbers
    page.get_by_role("tab", name="Sampled completion").click()  # the completion is one click away
    expect(page.get_by_text("Completion (", exact=False)).to_be_visible(timeout=RUN_TIMEOUT_MS)
    code_blocks = page.locator('[data-testid="stCode"]').all_inner_texts()
    suggestion_and_completion = [c.strip() for c in code_blocks[1:] if c.strip()]
    assert suggestion_and_completion, code_blocks  # the model answered with characters
    assert not page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count()
    reveal_candidates(page)
    assert "the lab computes" in body_text(page)  # the verdict says how far off 0.5 was
    assert not page.locator('[data-testid="stException"]').count()
    save_screenshot(page, tmp_path, "autocomplete-request")
    assert outside_requests(requests_seen) == []


def prompt_reads(page, want: str) -> bool:
    return page.get_by_label(PROMPT_LABEL).input_value() == want


def test_accept_appends_the_suggestion_to_the_prompt(page, base_url, tmp_path, requests_seen):
    # The page opens on a prompt where the shipped model offers a suggestion; the test says so if it stops.
    open_page(page, base_url, "/autocomplete")
    typed, accepted = page.get_by_label(PROMPT_LABEL).input_value(), 0
    accept = page.get_by_role("button", name="Accept suggestion", exact=True)
    while accepted < 2:  # type with the model: the text grows by exactly the suggestion; press again
        offered = quoted_suggestion(page)
        if not offered:  # nothing offered now (no suggestion, or only the model's best guess)
            break
        accept.click()
        typed += offered
        accepted += 1
        want = typed
        wait_until(
            page,
            lambda: prompt_reads(page, want),  # noqa: B023 (called before the loop moves on)
            RUN_TIMEOUT_MS,
            lambda: f"the prompt reads {page.get_by_label(PROMPT_LABEL).input_value()!r}, not {want!r}",  # noqa: B023
        )
        wait_for_app_idle(page, RUN_TIMEOUT_MS)
    assert accepted >= 1, f"the shipped model offered nothing on the page's first prompt: {body_text(page)[:1500]}"
    assert f"This session: {accepted} suggestion(s) accepted" in body_text(page)
    save_screenshot(page, tmp_path, "autocomplete-accepted")
    assert outside_requests(requests_seen) == []
