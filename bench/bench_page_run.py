"""The Training page's default run, queued as the page queues it (a process of its own, one torch thread):

    .venv/bin/python bench/bench_page_run.py [--stop-after 30] [--runs-dir DIR]

Run 1, the default run to its time budget: seconds from Start to a finished, tuned, kept model; the wall time
between the evaluations the page draws; the line the model writes at each; whether the saved model offers a
suggestion on the Autocomplete page's first prompt.
Run 2, the same run stopped after --stop-after seconds: seconds from Stop to a saved, tuned, kept model (the page
lists it as soon as the run's result is in).

Figures only: no test passes or fails on them. Run it on a quiet machine (one run at a time).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from core.model.bundle import load_bundle
from core.model.corpus import load_corpus
from core.release.serving.autocomplete import prompt_for, suggest
from core.release.serving.policy import policy_from_manifest
from core.release.serving.transformer_predictor import TransformerPredictor
from core.runs import job
from core.runs.events import progress_from_json, result_from_json
from core.runs.queue import FINISHED, JobQueue

FIRST_PROMPT = "class Stack:\n    def __init__(self"  # views/autocomplete.py's DEFAULT_PROMPT


def queued_run(queue: JobQueue, owner: str) -> str:
    corpus = load_corpus("stdlib")
    config = job.page_train_config(job.PAGE_ITERS, job.PAGE_SECONDS)
    payload, files = job.job_request(corpus, job.PAGE_PRESET, config, corpus_label="the Python standard library")
    return queue.submit(owner, payload, name="bench", files=files)


def finish(queue: JobQueue, job_id: str, stop_after: float | None) -> tuple[float, float | None, object]:
    """(seconds from submit to finished, seconds from Stop to finished or None, the finished view)."""
    began, stopped = time.perf_counter(), None
    while True:
        view = queue.view(job_id)
        if view.state in FINISHED:
            done = time.perf_counter()
            return done - began, None if stopped is None else done - stopped, view
        if stop_after is not None and stopped is None and view.started and time.perf_counter() - began >= stop_after:
            queue.stop(job_id)
            stopped = time.perf_counter()
        time.sleep(0.05)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-after", type=float, default=30.0, help="seconds after Start that run 2 is stopped")
    parser.add_argument("--runs-dir", default=None, help="runs folder (default: a temporary one)")
    args = parser.parse_args(argv)
    runs_dir = Path(args.runs_dir or tempfile.mkdtemp(prefix="bench_page_run_"))
    queue = JobQueue(runs_dir, 1, entry=job, read_event=progress_from_json, read_result=result_from_json)
    print(
        f"The page's default run: preset {job.PAGE_PRESET}, up to {job.PAGE_ITERS} steps or {job.PAGE_SECONDS} s, "
        f"an evaluation every {job.PAGE_EVAL_SECONDS} s, one thread; runs folder {runs_dir}"
    )

    total, _, view = finish(queue, queued_run(queue, "bench-owner-1"), None)
    evals = [e for e in view.events if e.kind == "eval"]
    gaps = [b.elapsed - a.elapsed for a, b in zip(evals, evals[1:])]
    print(
        f"\nRun 1: Start to a finished, tuned, kept model: {total:.1f} s ({view.result.metrics['iters']} steps, "
        f"validation loss {view.result.metrics['val_loss']:.3f})"
    )
    print(
        f"  {len(evals)} evaluations; wall time between them: largest {max(gaps):.1f} s, median "
        f"{sorted(gaps)[len(gaps) // 2]:.1f} s"
    )
    for e in evals:
        print(f"  step {e.step:5d}  {e.elapsed:5.1f} s  val {e.val_loss:.3f}  writes {e.sample!r}")
    bundle = load_bundle(view.result.bundle_path)
    predictor = TransformerPredictor(bundle.model, bundle.tokenizer)
    policy = policy_from_manifest(bundle.manifest)
    prompt = prompt_for(predictor, FIRST_PROMPT, policy)
    offer = suggest(predictor, prompt, policy, best_guess=True).suggestion_or_raise()  # as the page shows it
    print(
        f"  on the Autocomplete page's first prompt it suggests {offer.text!r} with probability "
        f"{offer.probability:.3f} against its tuned threshold {offer.threshold:.2f}: "
        + ("offered" if offer.shown else "not offered (the page shows it as the model's best guess)")
    )

    _, after_stop, view = finish(queue, queued_run(queue, "bench-owner-2"), args.stop_after)
    print(
        f"\nRun 2, stopped {args.stop_after:g} s after Start (step {view.result.metrics['iters']}): Stop to a saved, "
        f"tuned, kept model: {after_stop:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
