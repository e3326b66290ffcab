"""Issue 23's first "done when", in a real browser through the class server's proxy (HAProxy in front of two
workers): a learner uploads a training text, trains, watches the run's progress and loss curve, and downloads the
curve's data table (CSV) and the chart (HTML). Streamlit keeps an upload and a download in the memory of the worker
that holds the session, so every response the browser gets must come from that one worker: the LABWORKER cookie
never changes and every response's X-Lab-Worker header names it. Nothing leaves 127.0.0.1. Screenshots go to
/tmp/class-shots/.
"""

from __future__ import annotations

import csv
import io
import random
import warnings
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from cli.haproxy import COOKIE, WORKER_HEADER
from core.runs import job, run_record
from core.runs.events import progress_from_json, result_from_json
from core.runs.queue import JobQueue

from .conftest import VIEWPORT, open_page, outside_requests, save_screenshot, wait_for_app_idle, wait_until

SHOTS = Path("/tmp/class-shots")
FIRST_CLICK_MS = 30_000  # a table's CSV is made and sent in well under a second
RUN_TIMEOUT_MS = 240_000  # a shared 2-core machine: the run's process imports torch first; polled, never slept
ITERS = 60  # the tiny preset: a few seconds of training, about ten evaluations (every ITERS / 10 steps)
LOSS_TITLE = "Loss while training"  # ui.training_view.loss_figure's title


def training_text(documents: int = 40, seed: int = 23) -> str:
    """A few KB of varied UTF-8 text: short paragraphs of code, prose and numbers, accents included, separated by
    blank lines (corpus_from_text cuts documents there, so the validation split has whole documents to take)."""
    rng = random.Random(seed)
    words = "attention query key value softmax weight mask head layer token café naïve résumé größe".split()
    paragraphs = []
    for i in range(documents):
        kind = i % 3
        if kind == 0:
            paragraphs.append(f"def f{i}(x, y):\n    return x * {rng.randint(1, 9)} + y - {rng.randint(0, 99)}\n")
        elif kind == 1:
            paragraphs.append(" ".join(rng.choice(words) for _ in range(rng.randint(12, 24))).capitalize() + ".\n")
        else:
            paragraphs.append(", ".join(str(rng.randint(0, 10_000)) for _ in range(rng.randint(6, 12))) + "\n")
    return "\n".join(paragraphs)


def download_once_retried(page, button: str, console: list[str], requested: list[str], server):
    """Click a deferred download button and return the download. Seen twice in CI and never in ten runs here:
    the first click of a deferred download (the file made on the worker when pressed) made no request at all, with
    nothing in the worker's log. A learner would press again; so does this, once, and says so in a warning with the
    page's console, so the next sighting carries evidence. A second failure fails the test."""
    for attempt in (1, 2):
        try:
            with page.expect_download(timeout=FIRST_CLICK_MS if attempt == 1 else RUN_TIMEOUT_MS) as got:
                page.locator(button).click()
            return got.value
        except PlaywrightTimeoutError:
            if attempt == 2:
                save_screenshot(page, SHOTS, "class-training-no-download")
                pytest.fail(
                    f"no download from {button} after two clicks; the workers' log ends:\n{server.log_tail()}\n"
                    f"requests: {requested[-12:]}\nconsole: {console[-12:]}",
                    pytrace=False,
                )
            warnings.warn(
                f"{button}: the first click gave no download in {FIRST_CLICK_MS} ms; console: {console[-8:]}",
                stacklevel=2,
            )
    raise AssertionError("unreachable")


def body_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def worker_cookie(context) -> str | None:
    return {c["name"]: c["value"] for c in context.cookies()}.get(COOKIE)


def test_a_learner_trains_through_the_proxy_and_downloads_a_chart_from_their_own_worker(
    browser, class_server, tmp_path
):
    text = training_text()
    assert 2_000 < len(text.encode("utf-8")) < 20_000
    upload = tmp_path / "class-notes.txt"
    upload.write_text(text, encoding="utf-8")
    runs_dir = Path(class_server.log_path).parent / "runs"  # serve_class's LAB_RUNS_DIR

    context = browser.new_context(
        viewport=VIEWPORT, reduced_motion="reduce", service_workers="block", accept_downloads=True
    )
    requested: list[str] = []
    answered_by: list[tuple[str, str | None]] = []  # (url, X-Lab-Worker) of every response the browser got
    context.on("request", lambda r: requested.append(r.url))
    context.on("response", lambda r: answered_by.append((r.url, r.headers.get(WORKER_HEADER.lower()))))
    console: list[str] = []  # the page's console, for a download that never comes
    try:
        page = context.new_page()
        page.on("websocket", lambda ws: requested.append(ws.url))
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        open_page(page, class_server.url, f"/training?train_iters={ITERS}&train_seconds=120")
        worker = worker_cookie(context)
        assert worker in ("w1", "w2"), context.cookies()  # HAProxy pinned this browser to one worker

        page.get_by_text("Upload a text file", exact=True).click()
        wait_for_app_idle(page)
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(upload))
        wait_until(
            page,
            lambda: "documents," in body_text(page),
            RUN_TIMEOUT_MS,
            lambda: f"the upload was never read; the page says:\n{body_text(page)[-1500:]}",
        )
        wait_for_app_idle(page)
        assert any("/_stcore/upload_file/" in u for u in requested), requested  # the upload went over HTTP
        assert page.locator('[data-testid="stException"]').count() == 0
        save_screenshot(page, SHOTS, "class-training-uploaded")

        page.get_by_role("button", name="Start training", exact=True).click()
        progress_seen = False

        def progressed_and_finished() -> bool:
            nonlocal progress_seen
            progress_seen = progress_seen or page.locator('[data-testid="stProgress"]').count() > 0
            return progress_seen and f"Finished all {ITERS} steps" in body_text(page)

        wait_until(
            page,
            progressed_and_finished,
            RUN_TIMEOUT_MS,
            lambda: (
                f"progress seen: {progress_seen}; the run did not finish; the page says:\n{body_text(page)[-1500:]}"
            ),
        )
        wait_for_app_idle(page)
        assert LOSS_TITLE in page.locator(".js-plotly-plot .gtitle").all_text_contents()
        assert page.locator(".js-plotly-plot .scatterlayer .trace").count() > 0  # the curve has lines
        assert page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count() == 0
        save_screenshot(page, SHOTS, "class-training-finished")

        # The run, read back from the runs folder as any worker reads it: the chart's data must be the run's.
        [record] = run_record.read_records(runs_dir)
        queue = JobQueue(runs_dir, entry=job, read_event=progress_from_json, read_result=result_from_json)
        result = queue.view(Path(record.bundle_path).parent.name).result
        assert result.metrics["iters"] == ITERS and len(result.history) > 2

        # The loss chart's companion (ui.companion.chart, key train_losses): its table in an expander, two buttons.
        losses = page.locator('[data-testid="stExpander"]').filter(has=page.locator(".st-key-train_losses_csv"))
        losses.get_by_text("Data table for this chart").click()
        download = download_once_retried(page, ".st-key-train_losses_csv button", console, requested, class_server)
        assert download.suggested_filename == "train_losses.csv"
        rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
        assert [int(r["step"]) for r in rows] == [e.step for e in result.history]
        assert [float(r["validation loss"]) for r in rows] == [round(e.val_loss, 4) for e in result.history]
        assert [float(r["train loss"]) for r in rows] == [round(e.train_loss, 4) for e in result.history]
        assert {r["causality probe"] for r in rows} == {"passed"}

        got = download_once_retried(page, ".st-key-train_losses_html button", console, requested, class_server)
        html = Path(got.path()).read_text(encoding="utf-8")
        assert got.suggested_filename == "train_losses.html"
        assert LOSS_TITLE in html and "Plotly.newPlot" in html  # the figure, with plotly.js inlined
        assert f"<td>{result.history[-1].step}</td>" in html  # and its data table
        save_screenshot(page, SHOTS, "class-training-downloaded")

        assert worker_cookie(context) == worker  # uploads and downloads never moved the session
        served = dict(answered_by)
        uploads = [u for u in served if "/_stcore/upload_file/" in u]
        assert uploads and {served[u] for u in uploads} == {worker}  # the file reached the session's worker
        assert download.url.startswith(f"{class_server.url}/media/") and served.get(download.url) == worker
        through_proxy = [(u, w) for u, w in answered_by if u.startswith(class_server.url)]
        assert through_proxy and {w for _, w in through_proxy} == {worker}, sorted({w for _, w in through_proxy})
        assert outside_requests(requested) == []
    finally:
        context.close()
