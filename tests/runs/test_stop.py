"""Stop acts within one step, on the Training page's real path: the run's own process (the page's job), the stop
file any worker writes (JobQueue.stop), the training loop that checks it before every step. Measured in steps, never
in time: the run is held at the evaluation of a known step k until the stop is written (tests/runs/stop_gate_fixture),
so it must end at step k or k + 1. A stop checked only at evaluations would end at the next one (2k), a stop file
polled on a timer after some later step."""

import threading

from core.model import train_config
from core.runs.events import progress_from_json, result_from_json
from core.runs.job import job_request, load_run_corpus
from core.runs.queue import STOPPED, JobQueue
from tests.runs import stop_gate_fixture

TEXT = "\n\n".join(f"def f{i}(x):\n    return x * {i % 7} + {i % 3}\n" for i in range(60))
ITERS = 200  # evaluations every 20 steps (train_config_for): the run is held at step 20


def wait_for(predicate, timeout=180.0):
    done = threading.Event()
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        done.wait(0.05)
    raise AssertionError("condition not reached in time")


def test_a_run_asked_to_stop_at_step_k_ends_at_step_k_or_the_next(tmp_path):
    queue = JobQueue(tmp_path, 1, entry=stop_gate_fixture, read_event=progress_from_json, read_result=result_from_json)
    corpus = load_run_corpus("toy.py", TEXT)
    config = train_config.train_config_for(ITERS, max_seconds=600, num_threads=1)
    payload, files = job_request(corpus, "tiny", config, corpus_label="toy.py")
    job = queue.submit("me", payload, name="held run", files=files)
    held = tmp_path / job / "held"
    wait_for(held.exists)
    k = int(held.read_text())
    assert 0 < k < ITERS and queue.view(job).state == "running"
    assert not queue.stop_requested(job)
    queue.stop(job)
    assert queue.stop_requested(job)
    view = queue.wait(job, 180)
    assert view.state == STOPPED and view.result.metrics["stop_reason"] == "stopped"
    assert k <= view.result.metrics["iters"] <= k + 1
    assert [e.step for e in view.events if e.kind == "done"] == [view.result.metrics["iters"]]
