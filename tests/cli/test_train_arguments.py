"""`python -m core train`: a number on the command line is bounded by the parser, before a corpus is read or a model
built, with one `error:` line naming the flag and exit 2 (issue 35: `--threads 100000` crashed torch with exit 139,
`--eval-iters 1000000000 --max-seconds 5` ran past two minutes)."""

import pytest

from cli.main import main
from core.model.train_config import MAX_EVAL_ITERS
from core.settings import MAX_TORCH_THREADS


@pytest.mark.parametrize(
    "flag, value, words",
    [
        ("--threads", "100000", f"argument --threads: must be an integer from 1 to {MAX_TORCH_THREADS}, got '100000'"),
        ("--threads", "0", "argument --threads: must be an integer from 1"),
        ("--threads", "9" * 5000, "argument --threads: must be an integer from 1"),  # past int()'s 4,300 digits
        ("--eval-iters", "1000000000", f"argument --eval-iters: must be an integer from 1 to {MAX_EVAL_ITERS}"),
        ("--eval-iters", "0", "argument --eval-iters: must be an integer from 1"),
    ],
)
def test_an_unbounded_count_is_one_error_line_before_anything_runs(tmp_path, capsys, flag, value, words):
    out = tmp_path / "never"
    args = ["train", "--corpus", str(tmp_path / "no-such-corpus.txt"), "--out", str(out), "--max-seconds", "5"]
    assert main([*args, flag, value]) == 2
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert captured.out == "" and len(err) == 1 and err[0].startswith("error: ") and words in err[0], err
    assert "Traceback" not in captured.err and len(err[0]) < 200  # the value is quoted cut, not whole
    assert not out.exists()  # refused by the parser: the missing corpus is never reached
