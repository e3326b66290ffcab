"""`python -m cli.run_job RUN_DIR SLOTS`: the process a Training page's run trains in (core.model.jobs starts it).

Why a process of its own, started with `python -m` rather than a multiprocessing "spawn" child: it shares nothing
with the Streamlit worker that queued it (no interpreter, no import of Streamlit's entry script, no pipe whose end
dies with the worker), it runs in a session of its own, so a worker that dies or restarts leaves it training to the
end, and everything it needs is in its run folder (job.json and the training text), so any worker can read back
what it writes. It trains on one torch thread: the machine's other cores serve the pages.

The work is the page's: train (core.model.runs), tune the suggestion threshold on the validation documents
(core.release.evaluation.tuning, with a smaller typing budget than the CLI's so the run ends soon after its last step),
then keep the run (core.model.run_record: run.json with the owner's hash, and an upload's text). It lives here, in the
wing that may import both the model and the release wing. A failed tuning leaves the bundle untuned (the Autocomplete
page says so); a record that cannot be written leaves the run listed for its session only. Before each step after
the save it logs what is saved and what is left (run_process.record_saved), so a run killed while tuning or keeping
is read back with its bundle and says so, not "nothing was saved".
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from core.model import run_record, runs
from core.model.bundle import BundleError
from core.model.corpus import STDLIB_SOURCE, CorpusError
from core.model.run_events import progress_to_json, result_to_json
from core.model.run_process import Work, read_job, record_saved, serve
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.tuning import tune_bundle

TUNE_TYPING_CHARS = 5_000  # typed characters for the threshold of a bundle trained on the page (the CLI types 20,000)
NOT_TUNED = (
    "the model was saved, but its suggestion threshold was not tuned (it suggests at the default) and the run was "
    "not kept on the server: it is listed for this session only"
)
NOT_KEPT = "the model was saved and tuned, but the run was not kept on the server: it is listed for this session only"


def page_work(run_dir: Path) -> Work:
    """The work of the job in `run_dir`: train, tune, keep; returns the RunResult as JSON."""
    owner, payload = read_job(run_dir)

    def work(report, should_stop) -> dict:
        spec, corpus_label = runs.spec_from_job(run_dir, payload)  # inside the work: a bad job is its failure
        result = runs.run_training(spec, report, should_stop)
        record_saved(run_dir, result_to_json(result, run_dir), NOT_TUNED)
        try:
            tune_bundle(result.bundle_path, corpus=spec.corpus, config=EvalConfig(typing_chars=TUNE_TYPING_CHARS))
        except (BundleError, CorpusError, ValueError):
            pass
        else:
            record_saved(run_dir, result_to_json(result, run_dir), NOT_KEPT)
        try:
            run_record.keep_run(
                result.bundle_path,
                preset=spec.preset_name,
                corpus_label=corpus_label,
                owner_token=run_record.HashedOwner(owner),
                corpus_text=None if spec.corpus.source == STDLIB_SOURCE else spec.corpus.text,
            )
        except (BundleError, OSError, ValueError):
            pass
        return result_to_json(result, run_dir)

    return work


def main(argv: list[str] | None = None) -> int:
    run_dir, slots = (sys.argv[1:] if argv is None else argv)[:2]
    torch.set_num_threads(1)
    serve(Path(run_dir), int(slots), page_work(Path(run_dir)), write_event=progress_to_json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
