"""python -m core: train and generate end to end in a subprocess; suggest, tune and evaluate --compare --json
against the library they print; one-line errors with exit 2."""

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import COMMANDS, _Progress, main
from core.model.bundle import load_bundle, manifest_version, write_manifest
from core.model.bundle_checks import MANIFEST, WEIGHTS
from core.model.training import TrainEvent
from core.release.evaluation.tuning import THRESHOLDS
from core.release.serving.autocomplete import prompt_for, suggest
from core.release.serving.policy import DEFAULT_POLICY, policy_from_manifest
from core.release.serving.transformer_predictor import load_predictor


def suggestion_after(predictor, text, policy, template="{prompt}"):
    """The suggestion a surface serves after `text`: the prompt encoded once (prompt_for), then the one serving call."""
    return suggest(predictor, prompt_for(predictor, text, policy, template=template), policy).suggestion_or_raise()


ROOT = Path(__file__).resolve().parents[2]
TEXT = "\n\n".join(f"def add_{i}(a, b):\n    return a + b + {i}\n" for i in range(80))  # ~3 kB
METRICS = {"train_loss", "val_loss", "iters", "seconds", "tokens_per_second"}


def run(*args, timeout=120):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def assert_one_line_error(proc, *words):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    corpus = tmp / "code.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    out = tmp / "bundle"
    args = [
        "train",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--preset",
        "tiny",
        "--max-iters",
        "6",
        "--eval-iters",
        "2",
        "--batch-size",
        "4",
        "--seed",
        "3",
        "--threads",
        "1",
    ]
    proc = run(*args)
    return proc, out, args


@pytest.mark.smoke
def test_train_writes_a_bundle_and_ends_with_a_json_metrics_line(trained):
    proc, out, args = trained
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout.strip().splitlines()[-1])
    assert METRICS <= set(metrics)
    assert metrics["iters"] == 6 and metrics["stop_reason"] == "max_iters"
    assert all(isinstance(metrics[k], (int, float)) for k in METRICS)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, WEIGHTS]
    bundle = load_bundle(out)
    assert bundle.manifest["training"]["command"] == ["python", "-m", "core", *args]
    assert bundle.manifest["training"]["metrics"]["val_loss"] == metrics["val_loss"]
    assert bundle.version == metrics["version"] and bundle.safe is True
    assert bundle.manifest["architecture"]["n_layer"] == 2  # the tiny preset


def test_train_reports_progress_on_stderr_when_not_a_terminal(trained):
    proc, _, _ = trained
    lines = proc.stderr.splitlines()
    assert "\r" not in proc.stderr
    assert any("step 0/6" in line and "val" in line for line in lines)  # the first evaluation
    assert any("step 6/6" in line and "tok/s" in line and "eta" in line for line in lines)


@pytest.mark.numerics
def test_generate_prints_the_prompt_and_its_completion(trained):
    _, out, _ = trained
    proc = run("generate", "--bundle", str(out), "--prompt", "def add", "--max-new-tokens", "12", "--temperature", "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("def add")
    completion = proc.stdout[len("def add") :].rstrip("\n")
    assert 0 < len(completion) <= 12
    again = run(
        "generate",
        "--bundle",
        str(out),
        "--prompt",
        "def add",
        "--max-new-tokens",
        "12",
        "--temperature",
        "0",
        "--no-cache",
        "--completion-only",
    )
    assert again.stdout.rstrip("\n") == completion  # greedy: cached and uncached agree


def test_bad_arguments_give_one_error_line_and_exit_2(tmp_path):
    assert_one_line_error(run("train", "--corpus", "stdlib"), "--out")
    assert_one_line_error(run("generate", "--bundle", str(tmp_path / "none"), "--prompt", "x"), "missing bundle")


def test_tampered_bundle_is_refused_on_the_command_line(trained, tmp_path, capsys):
    _, out, _ = trained
    import shutil

    copy = tmp_path / "b"
    shutil.copytree(out, copy)
    data = bytearray((copy / WEIGHTS).read_bytes())
    data[-1] ^= 0xFF
    (copy / WEIGHTS).write_bytes(bytes(data))
    assert main(["generate", "--bundle", str(copy), "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "sha256 mismatch" in err


@pytest.mark.smoke
@pytest.mark.parametrize(
    "argv, words",
    [
        (["train", "--corpus", "stdlib", "--out", "x", "--preset", "huge"], "invalid choice: 'huge'"),
        (["train", "--corpus", "stdlib", "--out", "x", "--max-iters", "ten"], "invalid int value"),
        (["train", "--corpus", "stdlib", "--out", "x", "--max-iters", "0"], "--max-iters must be >= 1"),
        (["train", "--corpus", "stdlib", "--out", "x", "--batch-size", "0"], "batch_size must be >= 1"),
        (["generate", "--prompt", "x"], "--bundle"),
        (["tune", "--bundle", "x", "--threads", "100000"], "--threads must be an integer from 1"),
        (["evaluate", "--bundle", "x", "--threads", "100000"], "--threads must be an integer from 1"),
        (["explode"], "invalid choice"),
        ([], "COMMAND"),
    ],
)
def test_usage_errors_in_process(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and words in err, err


def test_bad_corpus_files_are_one_line_errors(tmp_path, capsys):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"ol\xe1 " * 100)
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("x = 1\n")
    for path, words in (
        (latin1, "offset 2"),
        (tiny, "too small for context length 32"),
        (tmp_path / "missing.txt", "does not exist"),
    ):
        code = main(
            [
                "train",
                "--corpus",
                str(path),
                "--out",
                str(tmp_path / "o"),
                "--preset",
                "tiny",
                "--max-iters",
                "2",
                "--threads",
                "1",
            ]
        )
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "o").exists()


def test_generate_rejects_bad_sampling_options(trained, capsys):
    _, out, _ = trained
    assert main(["generate", "--bundle", str(out), "--prompt", "x", "--top-p", "1.5"]) == 2
    assert "top_p" in capsys.readouterr().err


def test_progress_rewrites_one_line_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    progress = _Progress(stream)
    for kind, step in (("eval", 0), ("step", 1), ("done", 1)):
        progress(TrainEvent(kind, step, 1, 2.0, 2.5, 1e-3, 1000.0, 1.0, 0.0))
    text = stream.getvalue()
    assert text.count("\r") >= 2 and text.endswith("\n") and text.count("\n") == 1
    assert "1000 tok/s" in text.replace(",", "")


def test_a_new_command_is_added_by_appending_a_register_function(monkeypatch, capsys):
    def register_hello(subparsers):
        p = subparsers.add_parser("hello")
        p.add_argument("--name", required=True)
        p.set_defaults(handler=lambda args: print(f"hello {args.name}") or 0)

    monkeypatch.setattr("cli.main.COMMANDS", [*COMMANDS, register_hello])
    assert main(["hello", "--name", "lab"]) == 0
    assert capsys.readouterr().out == "hello lab\n"
    assert main(["hello"]) == 2  # its own usage errors follow the same one-line rule
    assert capsys.readouterr().err.startswith("error: python -m core hello: ")


# ---- generate: hostile numbers (issue 8) ---------------------------------------------------------


def generate_in_process(out, capsys, *extra):
    code = main(
        ["generate", "--bundle", str(out), "--prompt", "def add", "--max-new-tokens", "10", "--completion-only", *extra]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_generate_with_a_tiny_temperature_is_greedy_with_a_note(trained, capsys):
    _, out, _ = trained
    code, greedy, _ = generate_in_process(out, capsys, "--temperature", "0")
    assert code == 0 and greedy.strip()
    code, tiny, err = generate_in_process(out, capsys, "--temperature", "1e-40")
    assert code == 0 and tiny == greedy  # the same characters as temperature 0, no traceback
    assert err.count("\n") == 1 and err.startswith("note: --temperature 1e-40 is below 0.001") and "greedily" in err


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--seed", str(2**63)], "--seed must be an integer from 0 to 2**63 - 1"),
        (["--seed", str(2**64)], "--seed must be an integer from 0 to 2**63 - 1"),
        (["--seed", "-1"], "got -1"),
        (["--max-new-tokens", "1000000000"], "max_new_tokens must be an integer from 0 to 4096"),
        (["--temperature", "nan"], "temperature must be a finite number >= 0"),
        (["--temperature", "inf"], "temperature must be a finite number >= 0"),
        (["--temperature=-1e-40"], "temperature must be a finite number >= 0"),
        (["--top-k", "0"], "top_k must be None or an integer from 1 to"),
        (["--top-k", str(10**12)], "top_k must be None or an integer from 1 to"),
        (["--top-p", "nan"], "top_p"),
    ],
)
def test_generate_refuses_hostile_numbers_before_printing_anything(trained, capsys, extra, words):
    _, out, _ = trained
    code = main(["generate", "--bundle", str(out), "--prompt", "def add", "--temperature", "1", *extra])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""  # not even the prompt: nothing printed before the error
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("error: ") and words in err, err
    assert "Traceback" not in err


def test_generate_accepts_the_largest_seed(trained, capsys):
    _, out, _ = trained
    code, text, err = generate_in_process(out, capsys, "--temperature", "1", "--seed", str(2**63 - 1))
    assert code == 0 and err == "" and 0 < len(text.rstrip("\n")) <= 10


# ---- train: the leak stop and the output directory (in process) ----------------------------------


def train_in_process(tmp_path, capsys, out, *extra, iters="20"):
    corpus = tmp_path / "notes.txt"
    if not corpus.exists():
        corpus.write_text(TEXT, encoding="utf-8")
    code = main(
        [
            "train",
            "--corpus",
            str(corpus),
            "--out",
            str(out),
            "--preset",
            "tiny",
            "--max-iters",
            iters,
            "--eval-interval",
            "5",
            "--eval-iters",
            "1",
            "--batch-size",
            "4",
            "--threads",
            "1",
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.numerics
def test_train_without_the_mask_stops_at_its_first_evaluation(tmp_path, capsys):
    code, out, err = train_in_process(tmp_path, capsys, tmp_path / "leak", "--no-causal-mask")
    assert code == 0, err
    metrics = json.loads(out.strip().splitlines()[-1])
    assert metrics["stop_reason"] == "leak" and metrics["iters"] == 0 and metrics["safe"] is False
    assert "leak: the causality probe stopped the run at step 0" in err and "position 1" in err
    assert "causality probe FAILED" in err  # on the progress line of that evaluation
    bundle = load_bundle(tmp_path / "leak")
    assert bundle.manifest["training"]["metrics"]["stop_reason"] == "leak"
    assert "causality probe failed" in bundle.manifest["unsafe_reason"]


def test_no_leak_stop_lets_the_leak_happen_to_max_iters(tmp_path, capsys):
    code, out, err = train_in_process(tmp_path, capsys, tmp_path / "watch", "--no-causal-mask", "--no-leak-stop")
    assert code == 0, err
    metrics = json.loads(out.strip().splitlines()[-1])
    assert metrics["stop_reason"] == "max_iters" and metrics["iters"] == 20 and metrics["safe"] is False
    assert "failed (--no-leak-stop: trained on) at step 0" in err
    assert err.count("causality probe FAILED") == 5  # steps 0, 5, 10, 15, 20


def test_train_refuses_an_existing_bundle_before_training_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "b"
    assert train_in_process(tmp_path, capsys, out, iters="2")[0] == 0
    before = (out / MANIFEST).read_bytes()
    code, stdout, err = train_in_process(tmp_path, capsys, out, "--seed", "9", iters="2")
    assert code == 2 and stdout == "" and err.count("\n") == 1 and err.startswith("error: ")
    assert "already holds a bundle" in err and "--overwrite" in err
    assert (out / MANIFEST).read_bytes() == before
    code, stdout, err = train_in_process(tmp_path, capsys, out, "--seed", "9", "--overwrite", iters="2")
    assert code == 0, err
    assert "--seed" in load_bundle(out).manifest["training"]["command"]  # replaced, as asked
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "notes.txt"]


def test_a_bad_out_is_refused_before_training_with_exit_2(tmp_path, capsys):
    (tmp_path / "file").write_text("mine")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "essay.txt").write_text("mine")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)  # root ignores modes: then /sys, which refuses even root
    if os.access(locked, os.W_OK):
        locked = Path("/sys")
    for out, words in (
        (tmp_path / "file", "is a file"),
        (tmp_path / "file" / "x", "is a file"),
        (tmp_path / "mine", "not a bundle directory"),
        (locked / "run", "cannot write"),
    ):
        for extra in ((), ("--overwrite",)):
            code, stdout, err = train_in_process(tmp_path, capsys, out, *extra)
            assert code == 2 and stdout == "" and err.count("\n") == 1 and words in err, err
            assert "step 0/" not in err  # nothing was trained
    assert (tmp_path / "file").read_text() == "mine" and (tmp_path / "mine" / "essay.txt").read_text() == "mine"


# ---- suggest, tune, evaluate --compare --json ------------------------------------------------------


def test_train_tunes_the_suggestion_threshold(trained):
    _, out, _ = trained
    manifest = load_bundle(out).manifest
    policy = policy_from_manifest(manifest)
    assert manifest["generation"]["suggestion"] == policy.to_dict()
    assert policy.tuned and policy.threshold in THRESHOLDS


@pytest.mark.smoke
@pytest.mark.parametrize("prompt", ["def add", "    return a", "", "x€"])
def test_suggest_json_is_the_served_suggestion(trained, capsys, prompt):
    _, out, _ = trained
    assert main(["suggest", "--bundle", str(out), "--prompt", prompt, "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("\n") == 1 and captured.err == ""
    printed = json.loads(captured.out)
    predictor, manifest = load_predictor(out)
    s = suggestion_after(predictor, prompt, policy_from_manifest(manifest), template=manifest["prompt_template"])
    assert (printed["suggestion"], printed["probability"], printed["shown"]) == (s.text, s.probability, s.shown)
    assert (printed["threshold"], printed["threshold_tuned"]) == (s.threshold, True)
    assert printed["version"] == manifest["version"] and printed["predictor"] == "transformer"
    assert printed["saves_keystrokes"] == max(0, len(s.text) - 1) and printed["completion"].startswith(s.text)


@pytest.mark.numerics
def test_suggest_in_a_subprocess_prints_the_same_suggestion(trained):
    _, out, _ = trained
    proc = run("suggest", "--bundle", str(out), "--prompt", "def add", "--json")
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    predictor, manifest = load_predictor(out)
    s = suggestion_after(predictor, "def add", policy_from_manifest(manifest))
    assert printed["suggestion"] == s.text and printed["probability"] == pytest.approx(s.probability, rel=1e-4)
    text = run("suggest", "--bundle", str(out), "--prompt", "def add")
    assert text.returncode == 0 and text.stdout.splitlines()[0] == f"suggestion: {json.dumps(s.text)}"
    assert f"(threshold {s.threshold:.2f})" in text.stdout.splitlines()[1]


def test_suggest_says_when_nothing_is_offered_and_best_guess_prints_the_guess(tmp_path, capsys):
    """The shipped model at threshold 1: nothing is offered, so `suggest` prints no text and says --best-guess would
    show the guess; with it, the guess core's suggest gives with best_guess (the completion extended to
    MIN_THRESHOLD)."""
    strict = tmp_path / "strict"
    shutil.copytree(ROOT / "models" / "default", strict)
    manifest = json.loads((strict / MANIFEST).read_text())
    manifest["generation"]["suggestion"]["threshold"] = 1.0
    manifest["version"] = manifest_version(manifest)
    write_manifest(strict, manifest)
    predictor, manifest = load_predictor(strict)
    policy = policy_from_manifest(manifest)
    guess = suggest(predictor, prompt_for(predictor, "with open(", policy), policy, best_guess=True).suggestion
    assert guess.text and not guess.shown  # the model has a guess, below 1
    assert main(["suggest", "--bundle", str(strict), "--prompt", "with open("]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == 'suggestion: ""' and "--best-guess" in captured.err
    assert main(["suggest", "--bundle", str(strict), "--prompt", "with open(", "--best-guess"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == f"suggestion: {json.dumps(guess.text)}" and captured.err == ""
    assert "not shown" in captured.out


def untuned_copy(src, dst):
    """A copy of a bundle with its suggestion record removed (a consistent version recomputed)."""
    shutil.copytree(src, dst)
    manifest = json.loads((dst / MANIFEST).read_text())
    manifest["generation"].pop("suggestion", None)
    manifest["version"] = manifest_version(manifest)
    write_manifest(dst, manifest)
    assert policy_from_manifest(load_predictor(dst)[1]) == DEFAULT_POLICY
    return manifest["version"]


def test_tune_records_a_grid_threshold_and_a_new_version(trained, tmp_path, capsys):
    _, out, _ = trained
    copy = tmp_path / "b"
    before = untuned_copy(out, copy)
    assert main(["tune", "--bundle", str(copy), "--typing-chars", "400"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    manifest = json.loads((copy / MANIFEST).read_text())
    policy = policy_from_manifest(manifest)
    assert policy.tuned and policy.threshold in THRESHOLDS
    assert manifest["version"] != before and manifest["version"] == load_bundle(copy).version
    assert printed[-1] == (
        f"threshold {policy.threshold} (the most net keystrokes saved at an attention cost of 1 keystrokes per "
        "suggestion shown and not taken, among the thresholds whose suggestions are taken at least 60% of the time "
        f"if any) recorded in {copy} (version {manifest['version']})"
    )
    assert sum(line.strip().startswith(f"{t}") for t in THRESHOLDS for line in printed[:-1]) >= len(THRESHOLDS)
    # the trade-off table: net, gross, acceptance, shown; exactly the chosen row marked
    assert printed[0].split()[:5] == [
        "threshold", "net_keystrokes_saved_per_100", "keystrokes_saved_per_100", "acceptance_rate", "shown_per_100"
    ]  # fmt: skip
    marked = [line for line in printed[2:-1] if line.rstrip().endswith("<-")]
    assert len(marked) == 1 and marked[0].split()[0] == f"{policy.threshold:.4f}"


def test_tune_records_the_attention_cost_given_and_refuses_a_bad_one(trained, tmp_path, capsys):
    _, out, _ = trained
    copy = tmp_path / "b"
    untuned_copy(out, copy)
    argv = ["tune", "--bundle", str(copy), "--typing-chars", "400"]
    assert main([*argv, "--attention-cost", "2.5"]) == 0
    assert "at an attention cost of 2.5 keystrokes" in capsys.readouterr().out
    assert json.loads((copy / MANIFEST).read_text())["generation"]["suggestion"]["attention_cost"] == 2.5
    before = (copy / MANIFEST).read_text()
    assert main([*argv, "--attention-cost", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: attention_cost must lie in 0..100")
    assert (copy / MANIFEST).read_text() == before  # nothing recorded


@pytest.fixture(scope="module")
def three_val_docs(tmp_path_factory):
    """A tiny bundle whose split holds out several documents (so intervals exist), trained and tuned in-process."""
    tmp = tmp_path_factory.mktemp("compare")
    (tmp / "code.txt").write_text(TEXT, encoding="utf-8")
    argv = ["train", "--corpus", str(tmp / "code.txt"), "--out", str(tmp / "b"), "--preset", "tiny"]
    argv += ["--max-iters", "6", "--eval-iters", "1", "--batch-size", "4", "--val-fraction", "0.3", "--threads", "1"]
    assert main(argv) == 0
    return tmp / "b"


def test_evaluate_compare_json_prints_one_object_with_a_summary_per_predictor(three_val_docs, capsys):
    capsys.readouterr()
    argv = ["evaluate", "--bundle", str(three_val_docs), "--compare", "--json", "--max-positions", "128"]
    assert main([*argv, "--typing-chars", "300", "--latency-samples", "1"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("\n") == 1  # one object on one line
    out = json.loads(printed)
    assert {"transformer", "ngram", "rule", "report"} <= set(out)
    reports = {r["predictor"]: r for r in (out["report"], *out["report"]["baselines"])}
    assert set(reports) == {"transformer", "ngram", "rule"}
    assert len(out["report"]["held_out"]["documents"]) >= 2
    for kind, report in reports.items():
        summary, overall = out[kind], report["overall"]
        for key in ("keystrokes_saved_per_100", "keystrokes_saved_ci", "acceptance_rate", "shown_per_100"):
            assert key in summary, (kind, key)
        assert summary["keystrokes_saved_per_100"] == overall["keystrokes_saved_per_100"]
        assert summary["shown_per_100"] == overall["shown_per_100"] and summary["shown_per_100"] >= 0
        low, high = summary["keystrokes_saved_ci"]  # [low, high]: several held-out documents
        assert [low, high] == [overall["keystrokes_saved_ci"]["low"], overall["keystrokes_saved_ci"]["high"]]
        assert 0 <= low <= high <= 100
        rate = summary["acceptance_rate"]
        assert rate == overall["acceptance_rate"] and (rate is None or 0 <= rate <= 1)
        assert summary["threshold"] == report["policy"]["threshold"] and summary["threshold"] in THRESHOLDS
        # the decision utility: the net figure with its interval, at the price used, the same for all three
        assert summary["attention_cost"] == report["policy"]["attention_cost"] == 1.0
        net, net_ci = summary["net_keystrokes_saved_per_100"], summary["net_keystrokes_saved_ci"]
        assert net == overall["net_keystrokes_saved_per_100"] and net <= summary["keystrokes_saved_per_100"]
        assert net_ci == [overall["net_keystrokes_saved_ci"]["low"], overall["net_keystrokes_saved_ci"]["high"]]
        wrong = overall["offered"] - overall["accepted"]
        assert net == pytest.approx(summary["keystrokes_saved_per_100"] - 100 * wrong / overall["typed_chars"])


def test_evaluate_at_another_attention_cost_says_so_and_tunes_the_baselines_at_it(three_val_docs, capsys):
    capsys.readouterr()
    argv = ["evaluate", "--bundle", str(three_val_docs), "--compare", "--json", "--max-positions", "64"]
    assert main([*argv, "--typing-chars", "300", "--latency-samples", "0", "--attention-cost", "4"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert {out[k]["attention_cost"] for k in ("transformer", "ngram", "rule")} == {4.0}
    assert "chosen at an attention cost of 1.0; measured here at 4.0" in captured.err
    assert main([*argv, "--attention-cost", "nan"]) == 2
    assert capsys.readouterr().err.startswith("error: attention_cost must be a number")


def test_bad_bundles_are_one_line_errors_for_suggest_tune_and_evaluate(trained, tmp_path, capsys):
    _, out, _ = trained
    missing = str(tmp_path / "none")
    assert_one_line_error(run("suggest", "--bundle", missing, "--prompt", "x", "--json"), "missing bundle")
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    manifest = json.loads((bad / MANIFEST).read_text())
    manifest["generation"]["suggestion"]["threshold"] = 1.5
    manifest["version"] = manifest_version(manifest)
    write_manifest(bad, manifest)
    for argv in (
        ["suggest", "--bundle", missing, "--prompt", "x"],
        ["tune", "--bundle", missing],
        ["evaluate", "--bundle", missing, "--json"],
        ["suggest", "--bundle", str(bad), "--prompt", "x", "--json"],
        ["tune", "--bundle", str(bad)],
        ["evaluate", "--bundle", str(bad), "--json", "--max-positions", "64", "--typing-chars", "0"],
    ):
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("error: "), argv
        assert "Traceback" not in captured.err
        if str(bad) in argv:
            assert "generation.suggestion: threshold must lie in 0.05..1, got 1.5" in captured.err
    assert_one_line_error(run("tune", "--bundle", str(bad)), "generation.suggestion")
