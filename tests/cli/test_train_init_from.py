"""`python -m core train --init-from`: a run continues from a bundle, its manifest records the base, and a flag that
contradicts the base's architecture or a base that cannot be used is one `error:` line (issue 37)."""

import pytest

from cli.main import main
from core.model.bundle import load_bundle

CODE = "\n\n".join(f"def add_{i}(a, b):\n    return a + b + {i}\n" for i in range(40))
PROSE = "\n\n".join(f"Prose number {i}, with an accent: é.\n" for i in range(40))  # "é", "P", "w"... are new
QUICK = ["--max-iters", "2", "--eval-iters", "1", "--batch-size", "4", "--threads", "1", "--no-tune"]


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("init")
    (tmp / "code.txt").write_text(CODE, encoding="utf-8")
    (tmp / "prose.txt").write_text(PROSE, encoding="utf-8")
    return tmp


@pytest.fixture(scope="module")
def base(texts):
    out = texts / "base"
    assert main(["train", "--corpus", str(texts / "code.txt"), "--out", str(out), "--preset", "tiny", *QUICK]) == 0
    return load_bundle(out)


def one_error_line(capsys, *words):
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in captured.err, captured.err
    for w in words:
        assert w in err[0], err[0]


def test_a_run_from_a_base_records_its_version_and_corpus_and_grows_its_vocabulary(texts, base, tmp_path):
    out = tmp_path / "grown"
    args = ["train", "--corpus", str(texts / "prose.txt"), "--out", str(out), "--init-from", str(base.path), *QUICK]
    assert main(args) == 0
    grown = load_bundle(out)
    assert grown.manifest["base"] == {"version": base.version, "corpus": base.manifest["corpus"]}
    assert grown.manifest["training"]["command"] == ["python", "-m", "core", *args]
    assert "é" in grown.tokenizer.chars and set(base.tokenizer.chars) <= set(grown.tokenizer.chars)
    arch, base_arch = dict(grown.manifest["architecture"]), dict(base.manifest["architecture"])
    assert arch.pop("vocab_size") > base_arch.pop("vocab_size") and arch == base_arch  # the base's architecture
    assert "base" not in base.manifest  # a fresh model records none


def test_a_run_from_a_base_can_read_a_longer_context(texts, base, tmp_path):
    out = tmp_path / "longer"
    args = ["train", "--corpus", str(texts / "code.txt"), "--out", str(out), "--init-from", str(base.path)]
    assert main([*args, "--context-length", "48", *QUICK]) == 0
    arch, base_arch = dict(load_bundle(out).manifest["architecture"]), dict(base.manifest["architecture"])
    assert base_arch.pop("context_length") == 32 and arch.pop("context_length") == 48 and arch == base_arch


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--preset", "tiny"], "--preset cannot be given with --init-from"),
        (["--context-length", "5000"], "context_length must be <= 4096"),
        (["--context-length", "0"], "context_length must be >= 1"),
    ],
)
def test_flags_that_contradict_the_base_are_a_usage_error(texts, base, capsys, flags, words):
    out = texts / "never"
    argv = ["train", "--corpus", str(texts / "prose.txt"), "--out", str(out), "--init-from", str(base.path)]
    assert main([*argv, *flags, *QUICK]) == 2
    one_error_line(capsys, words)
    assert not out.exists()


def test_a_longer_context_needs_a_base(texts, capsys):
    out = texts / "never"
    argv = ["train", "--corpus", str(texts / "code.txt"), "--out", str(out), "--context-length", "64"]
    assert main([*argv, *QUICK]) == 2
    one_error_line(capsys, "--context-length needs --init-from")
    assert not out.exists()


def test_a_base_that_cannot_be_used_is_one_error_line(texts, capsys):
    leaky = texts / "leaky"
    argv = ["train", "--corpus", str(texts / "code.txt"), "--out", str(leaky), "--preset", "tiny", *QUICK]
    assert main([*argv, "--no-causal-mask"]) == 0
    capsys.readouterr()
    out = texts / "never"
    for source, words in [(leaky, "without the causal mask"), (texts / "missing", "missing bundle")]:
        argv = ["train", "--corpus", str(texts / "prose.txt"), "--out", str(out), "--init-from", str(source)]
        assert main([*argv, *QUICK]) == 2
        one_error_line(capsys, words)
    assert not out.exists()
