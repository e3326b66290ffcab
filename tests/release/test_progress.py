"""Progress of the long commands: core reports through callbacks (core.progress) and each stage it begins runs to
its total; the command line draws tqdm bars on stderr only (a terminal, or LAB_PROGRESS=1), so stdout stays one
JSON object under --json."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main
from cli.progress import ENV_VAR, Bars, progress_bars, wanted
from core.model.bundle import load_bundle
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.evaluation import evaluate_bundle
from core.release.evaluation.held_out import held_out
from core.release.evaluation.tuning import THRESHOLDS, tune_bundle
from core.release.gate.gate import GATE_STEPS, check_release
from core.release.gate.rubric import ReleasePolicy
from core.release.serving.transformer_predictor import TransformerPredictor
from core.telemetry.cost import measure_serving

ROOT = Path(__file__).resolve().parents[2]
TEXT = "\n\n".join(f"def add_{i}(a, b):\n    return a + b + {i}\n" for i in range(80))
QUICK = EvalConfig(max_positions=128, typing_chars=300, latency_samples=1)


class Recorder:
    """A Progress callback keeping every call; `stages` cuts them where done == 0 begins a stage."""

    def __init__(self):
        self.calls: list[tuple[int, int, str]] = []

    def __call__(self, done, total, what):
        self.calls.append((done, total, what))

    def stages(self) -> list[list[tuple[int, int, str]]]:
        out: list[list[tuple[int, int, str]]] = []
        for call in self.calls:
            if call[0] == 0 or not out:
                out.append([])
            out[-1].append(call)
        return out

    def assert_every_stage_runs_to_its_total(self):
        assert self.calls, "no progress was reported"
        for stage in self.stages():
            dones = [d for d, _, _ in stage]
            assert dones[0] == 0 and dones == sorted(dones), stage  # begins at 0, never goes back
            assert {t for _, t, _ in stage} == {stage[0][1]}, stage  # one total per stage
            assert dones[-1] == stage[0][1], f"stage {stage[0][2]!r} stopped at {dones[-1]} of {stage[0][1]}"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """A tiny bundle trained on the command line, several documents held out (so evaluation has intervals)."""
    tmp = tmp_path_factory.mktemp("progress")
    (tmp / "code.txt").write_text(TEXT, encoding="utf-8")
    argv = ["train", "--corpus", str(tmp / "code.txt"), "--out", str(tmp / "b"), "--preset", "tiny"]
    argv += ["--max-iters", "6", "--eval-iters", "1", "--batch-size", "4", "--val-fraction", "0.3", "--threads", "1"]
    assert main(argv) == 0
    return tmp / "b"


def test_evaluation_with_baselines_reports_each_stage_to_its_total(bundle):
    rec = Recorder()
    evaluation = evaluate_bundle(bundle, config=QUICK, with_baselines=True, progress=rec)
    rec.assert_every_stage_runs_to_its_total()
    names = [stage[0][2] for stage in rec.stages()]
    assert names[:2] == ["evaluating the transformer: scoring held-out positions",
                         "evaluating the transformer: suggesting as the user types"]  # fmt: skip
    for kind in ("rule", "ngram"):
        assert f"tuning the {kind}: trying each threshold of the grid" in names
        assert f"evaluating the {kind}: scoring held-out positions" in names
    grid = next(s for s in rec.stages() if s[0][2].endswith("trying each threshold of the grid"))
    assert grid[-1][1] == len(THRESHOLDS) == len(evaluation.baselines[0].tuning)  # one step per grid threshold
    typed = next(s for s in rec.stages() if s[0][2] == "evaluating the transformer: suggesting as the user types")
    assert typed[-1][1] >= 1


def test_the_gate_reports_each_step_in_order_and_ends_at_its_total(bundle):
    rec = Recorder()
    check = check_release(bundle, policy=ReleasePolicy(require_beats_baseline=False, evaluation=QUICK), progress=rec)
    assert check.rubric.version is not None  # every step ran: the bundle loaded and its corpus was found
    rec.assert_every_stage_runs_to_its_total()
    assert [what for _, _, what in rec.calls] == [*GATE_STEPS, "release check done"]
    assert [done for done, _, _ in rec.calls] == list(range(len(GATE_STEPS) + 1))


def test_tuning_and_the_cost_timing_report_to_their_totals(bundle, tmp_path):
    import shutil

    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    rec = Recorder()
    tune_bundle(copy, config=QUICK, progress=rec)
    rec.assert_every_stage_runs_to_its_total()
    assert [s[-1][:2] for s in rec.stages()][-1] == (len(THRESHOLDS), len(THRESHOLDS))

    loaded = load_bundle(bundle)
    rec = Recorder()
    split = held_out(loaded.manifest, None)
    predictor = TransformerPredictor(loaded.model, loaded.tokenizer)
    serving = measure_serving(predictor, loaded.manifest, split.val, 7, 0, rec)
    rec.assert_every_stage_runs_to_its_total()
    assert rec.calls[-1] == (7, 7, "timing suggestions") and serving.samples == len(serving.service_ms) == 7


# ---- the command line -----------------------------------------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_bars_are_drawn_on_a_terminal_unless_json_and_lab_progress_overrides_both():
    assert wanted(False, FakeTerminal(), {}) and not wanted(True, FakeTerminal(), {})
    assert not wanted(False, io.StringIO(), {})  # a pipe or a file: no bars
    assert wanted(True, io.StringIO(), {ENV_VAR: "1"}) and not wanted(False, FakeTerminal(), {ENV_VAR: "0"})
    with pytest.raises(ValueError, match="LAB_PROGRESS must be 1"):
        wanted(False, FakeTerminal(), {ENV_VAR: "yes"})


def test_bars_draw_one_bar_per_stage_and_close_it_at_its_total():
    stream = FakeTerminal()
    bars = Bars(stream)
    for done in range(4):
        bars(done, 3, "scoring")
    assert bars.bar is None  # closed at its total
    bars(0, 2, "typing")
    bars(1, 2, "typing")
    bars.close()
    text = stream.getvalue()
    assert "scoring" in text and "3/3" in text and "typing" in text and "1/2" in text


def test_no_bars_when_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    with progress_bars(False, io.StringIO()) as progress:
        assert progress is None


def run(*args, env_extra=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_json_stdout_stays_one_object_with_progress_forced_on(bundle):
    argv = ["evaluate", "--bundle", str(bundle), "--json", "--max-positions", "128", "--typing-chars", "300"]
    proc = run(*argv, "--latency-samples", "1", env_extra={ENV_VAR: "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1 and json.loads(proc.stdout)["report"]["predictor"] == "transformer"
    assert "scoring held-out positions" in proc.stderr and "100%" in proc.stderr  # the bars went to stderr
    quiet = run(*argv, "--latency-samples", "1", env_extra={ENV_VAR: ""})  # not a terminal: no bars
    assert quiet.returncode == 0 and "scoring held-out positions" not in quiet.stderr
    assert json.loads(quiet.stdout)["transformer"] == json.loads(proc.stdout)["transformer"]


def test_a_bad_lab_progress_is_one_error_line(bundle):
    proc = run("tune", "--bundle", str(bundle), env_extra={ENV_VAR: "sometimes"})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: LAB_PROGRESS must be 1"), proc.stderr
