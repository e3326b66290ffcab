"""The training loop on two ranks (torchrun, gloo, DistributedDataParallel) against one process.

One distributed step equals one single-process step on the combined batch; a stop wanted by one rank stops
both on the same step; `torchrun ... -m core train` writes a bundle only on rank 0 that loads and passes
`release check`'s integrity check; wrong launches end with one `error:` line and exit 2, never a hang.
Every launch is a subprocess with a timeout, one torch thread per rank (OMP_NUM_THREADS=1, --threads 1).

Run as a script under torchrun (`python -m torch.distributed.run ... tests/model/test_distributed.py OUT`),
this file is the worker of the first two tests: see `_worker`.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from core.model.batches import document_stream, next_token_loss, sample_batch
from core.model.bundle import load_bundle, manifest_version, verify_bundle, write_manifest
from core.model.bundle_checks import MANIFEST
from core.model.corpus import corpus_from_text, split_documents
from core.model.distributed import (
    TORCHRUN_ENV,
    DistributedError,
    Ranks,
    agree_stop,
    all_mean,
    check_batch_size,
    from_env,
    launch_command,
    process_group,
    rank_generator,
    timeout_seconds,
)
from core.model.gpt import GPT, PRESETS
from core.model.tokenizer import CharTokenizer
from core.model.train_config import TrainConfig, learning_rate_at
from core.model.training import make_optimizer, train

ROOT = Path(__file__).resolve().parents[2]
TEXT = "\n\n".join(f"def add_{i}(a, b):\n    return a + b + {i}\n" for i in range(80))  # ~3 kB
# One step of the real loop: global batch 4 (2 windows per rank), no warmup, so the step's rate is the peak.
ONE_STEP = TrainConfig(batch_size=4, max_iters=1, warmup_iters=0, eval_interval=1, eval_iters=3, seed=5, num_threads=1)
STOP_AFTER = 2  # rank 1's should_stop fires at its poll STOP_AFTER + 1: both ranks must stop after 2 steps
LAUNCH_TIMEOUT = 150  # seconds: a hang fails the test instead of stalling the suite


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ENV and not k.startswith("TORCHELASTIC")}
    return {**env, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "LAB_DIST_TIMEOUT_S": "60", **extra}


def launch(args: list[str], env: dict[str, str], timeout: float = LAUNCH_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def torchrun(*args: str, nproc: int = 2) -> subprocess.CompletedProcess:
    # --standalone: a rendezvous on localhost at a free port, so parallel runs never collide
    return launch(["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *args], clean_env())


# ---- the worker: runs inside each rank ---------------------------------------------------------


def _worker(out: Path) -> None:
    """One step of the real loop (weights saved per rank), then a run that only rank 1 wants to stop."""
    ranks = from_env()
    corpus = corpus_from_text("toy.py", TEXT)
    with process_group(ranks, timeout=60):
        result = train(PRESETS["tiny"], ONE_STEP, corpus, ranks=ranks)
        save_file(
            {n: p.detach().contiguous() for n, p in result.model.named_parameters()}, str(out / f"{ranks.rank}.st")
        )
        polls: list[int] = []

        def should_stop() -> bool:
            polls.append(1)
            return ranks.rank == 1 and len(polls) > STOP_AFTER

        cfg = dataclasses.replace(ONE_STEP, max_iters=50, eval_interval=50, eval_iters=2)
        stopped = train(PRESETS["tiny"], cfg, corpus, should_stop=should_stop, ranks=ranks)
        # eval_seconds=0: the ranks agree to evaluate after every step, cheaply until the last
        timed_cfg = dataclasses.replace(cfg, max_iters=4, eval_seconds=0.0, interim_eval_iters=1)
        timed = train(PRESETS["tiny"], timed_cfg, corpus, ranks=ranks)
        record = {
            "step_loss": result.step_losses[0],
            "val_loss": result.metrics["val_loss"],
            "stopped_iters": stopped.metrics["iters"],
            "stop_reason": stopped.metrics["stop_reason"],
            "evaluated_at": [e.step for e in stopped.history],
            "polls": len(polls),
            "timed": [[r.step, r.batches, r.val_loss] for r in timed.history],
        }
        (out / f"{ranks.rank}.json").write_text(json.dumps(record), encoding="ascii")


# ---- the single-process reference ---------------------------------------------------------------


def reference_step(cfg: TrainConfig, shards: list[int]):
    """One optimizer step written out by hand in one process, on the concatenation of the given ranks' shards:
    the same tokenizer, split, initial weights (the seed) and rate as train(); returns (model, batch loss)."""
    corpus = corpus_from_text("toy.py", TEXT)
    tok = CharTokenizer.from_text(corpus.text)
    config = dataclasses.replace(PRESETS["tiny"], vocab_size=tok.vocab_size)
    train_docs, _ = split_documents(corpus, cfg.val_fraction, cfg.seed)
    stream = document_stream(train_docs, tok)  # (N,)
    T, per_rank = config.context_length, cfg.batch_size // 2
    batches = [sample_batch(stream, per_rank, T, rank_generator(cfg.seed, r)) for r in shards]
    x = torch.cat([b[0] for b in batches])  # (B, T)
    y = torch.cat([b[1] for b in batches])  # (B, T)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = GPT(config)
    optimizer = make_optimizer(model, cfg)
    for group in optimizer.param_groups:
        group["lr"] = learning_rate_at(0, cfg)
    loss = next_token_loss(model, x, y, fast_attention=cfg.fast_attention)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    optimizer.step()
    return model, loss.item()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    proc = torchrun(str(Path(__file__).resolve()), str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def step_tolerance(model: GPT, lr: float) -> dict[str, torch.Tensor]:
    """Per weight, how far two float32 computations of the same first step may land apart when their gradients
    were summed in another order (2 ranks' halves averaged by DDP against one batch of B windows).

    The longest float32 sum of the step has n = 128 terms (a weight gradient adds B * T = 4 * 32 positions; a
    matmul C or 4C <= 128 products), so a gradient g moves by at most about n * eps * (|g| + G), G the RMS
    gradient of its tensor standing for the size of the terms a cancelling sum adds. The first AdamW step moves
    a weight w by lr * g / (|g| + e), e = 1e-8, whose derivative is e / (|g| + e)^2: that times the gradient's
    error, plus the rounding of each computation's step and weight (a few ulps: 4 eps (|w| + lr)).
    Near |g| = e the first term dominates, elsewhere the second."""
    eps, n, e = torch.finfo(torch.float32).eps, 128, 1e-8
    out = {}
    for name, p in model.named_parameters():
        g = p.grad.detach().double().abs()
        G = g.pow(2).mean().sqrt()
        out[name] = lr * e / (g + e) ** 2 * n * eps * (g + G) + 4 * eps * (p.detach().double().abs() + lr)
    return out


@pytest.mark.numerics
def test_one_distributed_step_equals_one_step_on_the_combined_batch(two_ranks):
    rank0, rank1 = (load_file(str(two_ranks / f"{r}.st")) for r in (0, 1))
    model, loss = reference_step(ONE_STEP, shards=[0, 1])
    broken, _ = reference_step(ONE_STEP, shards=[0, 0])  # rank 0's windows twice: what a missing all-reduce sees
    tolerance = step_tolerance(model, learning_rate_at(0, ONE_STEP))
    wrong = []
    for name, p in model.named_parameters():
        assert torch.equal(rank0[name], rank1[name]), name  # the all-reduce hands every rank the same bits
        want = p.detach().double()
        excess = (rank0[name].double() - want).abs() - tolerance[name]
        assert float(excess.max()) <= 0, f"{name}: {float(excess.max()):.3e} past the tolerance"
        off = (dict(broken.named_parameters())[name].detach().double() - want).abs() > tolerance[name]
        wrong.append(float(off.double().mean()))
    assert min(w for w in wrong if w > 0) > 0.05 and max(wrong) > 0.5  # the wrong batch lands far outside
    record = json.loads((two_ranks / "0.json").read_text(encoding="ascii"))
    # the reported loss is the global batch's (the mean of the two shards' means), a sum of B * T = 128 terms
    n, eps = 128, torch.finfo(torch.float32).eps
    assert abs(record["step_loss"] - loss) <= n * eps * abs(loss)


def test_the_ranks_draw_different_windows_and_rank_0_draws_the_single_processs():
    single = torch.Generator().manual_seed(5)
    assert torch.equal(
        torch.randint(1000, (8,), generator=rank_generator(5, 0)), torch.randint(1000, (8,), generator=single)
    )
    first, second = (torch.randint(1000, (8,), generator=rank_generator(5, r)) for r in (0, 1))
    assert not torch.equal(first, second)


def test_a_stop_wanted_by_rank_1_alone_stops_both_ranks_on_the_same_step(two_ranks):
    records = [json.loads((two_ranks / f"{r}.json").read_text(encoding="ascii")) for r in (0, 1)]
    for record in records:
        assert record["stopped_iters"] == STOP_AFTER and record["stop_reason"] == "stopped"
        assert record["evaluated_at"] == [0, STOP_AFTER]  # still evaluated at the end, as a single process is
        assert record["polls"] == STOP_AFTER + 1
    assert records[0]["val_loss"] == records[1]["val_loss"]  # the sharded evaluation, summed: one figure


def test_the_ranks_evaluate_by_wall_time_together_and_end_on_a_full_evaluation(two_ranks):
    timed = [json.loads((two_ranks / f"{r}.json").read_text(encoding="ascii"))["timed"] for r in (0, 1)]
    assert [[step, batches] for step, batches, _ in timed[0]] == [[0, 1], [1, 1], [2, 1], [3, 1], [4, 2]]
    assert timed[0] == timed[1]  # the same evaluations, and one figure each


def test_torchrun_train_writes_one_bundle_on_rank_0_that_passes_the_integrity_check(tmp_path):
    corpus = tmp_path / "code.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "bundle"
    args = ["train", "--corpus", str(corpus), "--out", str(out), "--preset", "tiny", "--max-iters", "4"]
    args += ["--batch-size", "4", "--eval-iters", "2", "--threads", "1", "--no-tune"]
    proc = torchrun("-m", "core", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout  # rank 1 printed nothing
    metrics = json.loads(lines[0])
    assert metrics["iters"] == 4 and metrics["bundle"] == str(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "code.txt"]  # rank 1 wrote nothing
    bundle = load_bundle(out)
    training = bundle.manifest["training"]
    assert training["world_size"] == 2
    assert training["launch_command"] == ["torchrun", "--standalone", "--nproc_per_node=2", "-m", "core", *args]
    assert training["command"] == ["python", "-m", "core", *args]
    assert training["config"]["batch_size"] == 4  # the global batch
    check = launch(
        ["-m", "core", "release", "check", str(out), "--json", "--out", str(tmp_path / "rubric")], clean_env()
    )
    rubric = json.loads(check.stdout.strip().splitlines()[-1])
    integrity = [c for c in rubric["checks"] if c["name"] == "integrity"]
    assert len(integrity) == 1 and integrity[0]["passed"], rubric


def test_a_single_process_bundle_records_world_size_1(tmp_path):
    corpus = corpus_from_text("toy.py", TEXT)
    from core.runs.job import train_and_save

    cfg = dataclasses.replace(ONE_STEP, max_iters=2, eval_interval=2, eval_iters=1)
    _, path = train_and_save(corpus, "tiny", cfg, tmp_path / "b", command=["python", "-m", "core", "train"])
    training = load_bundle(path).manifest["training"]
    assert training["world_size"] == 1 and training["launch_command"] == ["python", "-m", "core", "train"]


@pytest.mark.parametrize("field, value", [("world_size", "two"), ("world_size", 0), ("launch_command", "torchrun")])
def test_a_manifest_with_a_bad_world_size_or_launch_command_is_refused(trained_bundle_path, tmp_path, field, value):
    out = tmp_path / "b"
    shutil.copytree(trained_bundle_path, out)
    manifest = json.loads((out / MANIFEST).read_text(encoding="ascii"))
    manifest["training"][field] = value
    manifest["version"] = manifest_version(manifest)  # a consistent manifest: only the field is wrong
    write_manifest(out, manifest)
    assert any(f"training.{field}" in problem for problem in verify_bundle(out))


# ---- wrong launches: one line, exit 2, no hang ---------------------------------------------------


def assert_one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


def cli_as_rank(tmp_path: Path, rank: int, world_size: int, *extra: str, **env: str) -> subprocess.CompletedProcess:
    """`python -m core train` with the environment torchrun gives rank `rank` of `world_size`."""
    corpus = tmp_path / "code.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    variables = {"RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank)}
    variables.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555", **env})
    variables = {k: v for k, v in variables.items() if v != ""}  # "" = leave the variable out
    args = ["-m", "core", "train", "--corpus", str(corpus), "--out", str(tmp_path / "b"), "--preset", "tiny"]
    return launch([*args, "--max-iters", "2", "--threads", "1", *extra], clean_env(**variables), timeout=60)


@pytest.mark.parametrize("rank", [0, 4])
def test_a_batch_that_does_not_split_across_the_ranks_is_refused_on_every_rank(tmp_path, rank):
    proc = cli_as_rank(tmp_path, rank, 5, "--batch-size", "12")
    assert_one_line_error(proc)
    assert proc.stderr.strip() == (
        "error: --batch-size 12 does not divide across 5 ranks; use a batch size that is a multiple of 5"
    )
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    "env, words",
    [
        ({"MASTER_ADDR": ""}, ["RANK is set but MASTER_ADDR is not", "torchrun"]),
        ({"WORLD_SIZE": ""}, ["RANK is set but WORLD_SIZE is not", "torchrun"]),
        ({"RANK": "7"}, ["RANK must be an integer in 0..1", "'7'"]),
        ({"LAB_DIST_TIMEOUT_S": "soon"}, ["LAB_DIST_TIMEOUT_S", "1..3600", "'soon'"]),
    ],
)
def test_a_half_set_environment_is_refused_in_one_line(tmp_path, env, words):
    assert_one_line_error(cli_as_rank(tmp_path, 1, 2, "--batch-size", "4", **env), *words)


def test_a_missing_rendezvous_fails_within_the_timeout(tmp_path):
    """Rank 1 of 2 with no rank 0 anywhere: the store at MASTER_PORT never answers (port 1 is never served)."""
    proc = cli_as_rank(tmp_path, 1, 2, "--batch-size", "4", MASTER_PORT="1", LAB_DIST_TIMEOUT_S="2")
    assert_one_line_error(proc, "rank 1 of 2 could not join the process group at 127.0.0.1:1 within 2 s")


# ---- the pieces, in one process ------------------------------------------------------------------


def test_from_env_reads_torchrun_variables_and_a_lone_process_is_single():
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.2", "MASTER_PORT": "29500"}
    assert from_env(env) == Ranks(rank=3, world_size=4, local_rank=1, backend="gloo")
    assert not from_env(env).is_main and from_env({**env, "RANK": "0"}).is_main
    assert from_env({}) == Ranks() and not Ranks().distributed
    assert from_env({**env, "WORLD_SIZE": "1", "RANK": "0"}) == Ranks()  # torchrun --nproc_per_node=1: one process
    for bad in ({**env, "WORLD_SIZE": "0"}, {**env, "MASTER_PORT": "70000"}, {**env, "LOCAL_RANK": "-1"}):
        with pytest.raises(DistributedError):
            from_env(bad)


def test_batch_shards_and_timeout_bounds():
    assert check_batch_size(12, Ranks(0, 4)) == 3 and check_batch_size(12, Ranks()) == 12
    with pytest.raises(DistributedError, match="multiple of 5"):
        check_batch_size(12, Ranks(0, 5))
    assert timeout_seconds({}) == 120 and timeout_seconds({"LAB_DIST_TIMEOUT_S": "7.5"}) == 7.5
    for bad in ("0", "3601", "nan", "inf", "-1"):
        with pytest.raises(DistributedError, match="LAB_DIST_TIMEOUT_S"):
            timeout_seconds({"LAB_DIST_TIMEOUT_S": bad})


def test_a_single_process_agrees_with_itself_and_records_its_own_command():
    assert agree_stop([False, True, False], Ranks()) == (False, True, False)
    assert all_mean(2.5, Ranks()) == 2.5
    assert launch_command(["train", "--x"], {}) == ["python", "-m", "core", "train", "--x"]
    env = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    env.update(LOCAL_WORLD_SIZE="2", GROUP_WORLD_SIZE="2")
    assert launch_command(["train"], env) == ["torchrun", "--nnodes=2", "--nproc_per_node=2", "-m", "core", "train"]


def test_train_refuses_ranks_that_never_joined_a_group():
    with pytest.raises(DistributedError, match="has not joined a process group"):
        train(PRESETS["tiny"], ONE_STEP, corpus_from_text("toy.py", TEXT), ranks=Ranks(1, 2))
    with pytest.raises(DistributedError, match="batch_size 4 does not divide across 3 ranks"):
        train(PRESETS["tiny"], ONE_STEP, corpus_from_text("toy.py", TEXT), ranks=Ranks(1, 3))


if __name__ == "__main__":
    torch.set_num_threads(1)
    _worker(Path(sys.argv[1]))
