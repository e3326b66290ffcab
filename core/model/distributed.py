"""The run's place in a torchrun process group: which rank it is, how many there are, and what they agree on.

The training loop is the same on every rank; this is what it needs to be one of many. Rank 0 reports and writes
the bundle and keeps the run's own seed, so a run of one rank draws exactly what a single process draws. Every rank
stops on the same step, or a rank would wait forever in a collective the others left. Everything is the identity
for a single process.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from core.numbers import is_int

DEFAULT_TIMEOUT_S = 120.0  # how long a collective waits for a missing rank before failing
MAX_TIMEOUT_S = 3600.0
MAX_WORLD_SIZE = 4096  # far above any classroom; bounds the numbers read from the environment
# What torchrun tells each rank; a process launched without torchrun (a test's single-process reference, a bench's
# one-rank run) must not inherit them from a shell that has them.
TORCHRUN_ENV = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
)  # fmt: skip
TORCHRUN_HINT = "launch with torchrun (torchrun --standalone --nproc_per_node=N -m core train ...)"


class DistributedError(ValueError):
    """A wrong launch (half-set environment, a batch that does not split, no rendezvous): one line saying what to do."""


@dataclass(frozen=True)
class Ranks:
    rank: int = 0  # this process, 0 .. world_size - 1
    world_size: int = 1  # processes in the group (every node's)
    local_rank: int = 0  # this process on its machine
    # gloo: the loop trains on the CPU
    backend: str = "gloo"

    def __post_init__(self):
        for name in ("rank", "world_size", "local_rank"):
            value = getattr(self, name)
            if not is_int(value):
                raise DistributedError(f"{name} must be an integer, got {value!r}")
        if not 1 <= self.world_size <= MAX_WORLD_SIZE:
            raise DistributedError(f"world_size must lie in 1..{MAX_WORLD_SIZE}, got {self.world_size}")
        if not 0 <= self.rank < self.world_size or not 0 <= self.local_rank < self.world_size:
            raise DistributedError(
                f"rank {self.rank} and local_rank {self.local_rank} must lie in 0..{self.world_size - 1} "
                f"(world_size {self.world_size})"
            )
        if self.backend not in ("gloo", "nccl"):
            raise DistributedError(f"backend must be 'gloo' or 'nccl', got {self.backend!r}")

    @property
    def is_main(self) -> bool:
        """Rank 0: reports progress, writes the bundle."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def from_env(environ: Mapping[str, str] | None = None) -> Ranks:
    """The Ranks torchrun's environment describes (os.environ by default).

    WORLD_SIZE unset (and RANK unset) or 1: a single process. Otherwise RANK, LOCAL_RANK, MASTER_ADDR and
    MASTER_PORT must all be set and in range; a missing or bad one is a DistributedError that names it.
    The backend is gloo: the training loop keeps its tensors on the CPU (NCCL moves only CUDA tensors).
    """
    env = os.environ if environ is None else environ
    if "WORLD_SIZE" not in env:
        if "RANK" in env:
            raise DistributedError(f"RANK is set but WORLD_SIZE is not: {TORCHRUN_HINT}")
        return Ranks()
    world_size = _env_int(env, "WORLD_SIZE", 1, MAX_WORLD_SIZE)
    if world_size == 1:
        return Ranks()
    for name in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        if not env.get(name, "").strip():
            given = "RANK" if env.get("RANK", "").strip() else "WORLD_SIZE"
            raise DistributedError(f"{given} is set but {name} is not: {TORCHRUN_HINT}")
    _env_int(env, "MASTER_PORT", 1, 65535)
    rank = _env_int(env, "RANK", 0, world_size - 1)
    local_rank = _env_int(env, "LOCAL_RANK", 0, world_size - 1)
    return Ranks(rank, world_size, local_rank, "gloo")


def _env_int(env: Mapping[str, str], name: str, low: int, high: int) -> int:
    text = env[name].strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 10 and low <= int(text) <= high):
        raise DistributedError(f"{name} must be an integer in {low}..{high}, got {env[name][:40]!r}: {TORCHRUN_HINT}")
    return int(text)


def check_batch_size(batch_size: int, ranks: Ranks, *, name: str = "batch_size") -> int:
    """The shard of one rank, batch_size // world_size; a DistributedError unless the global batch splits
    into equal shards (equal shards make DDP's mean of the ranks' gradients the global batch's gradient)."""
    if batch_size % ranks.world_size:
        raise DistributedError(
            f"{name} {batch_size} does not divide across {ranks.world_size} ranks; use a batch size that is a "
            f"multiple of {ranks.world_size}"
        )
    return batch_size // ranks.world_size


def timeout_seconds(environ: Mapping[str, str] | None = None) -> float:
    """LAB_DIST_TIMEOUT_S: seconds a rendezvous or a collective may wait (default 120, 1..3600)."""
    env = os.environ if environ is None else environ
    text = env.get("LAB_DIST_TIMEOUT_S", "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 1.0 <= value <= MAX_TIMEOUT_S:  # NaN fails too
        raise DistributedError(
            f"LAB_DIST_TIMEOUT_S must be a number of seconds in 1..{MAX_TIMEOUT_S:g}, got {text[:40]!r}"
        )
    return value


def init(ranks: Ranks, timeout: float | None = None) -> None:
    """Join the process group of `ranks` (nothing for a single process) with the env:// rendezvous torchrun
    prepares; every later collective fails after `timeout` seconds (timeout_seconds() by default)."""
    if not ranks.distributed:
        return
    seconds = timeout_seconds() if timeout is None else timeout
    where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    try:
        with _c10d_log_held():
            dist.init_process_group(
                ranks.backend,
                rank=ranks.rank,
                world_size=ranks.world_size,
                timeout=datetime.timedelta(seconds=seconds),
            )
    except (RuntimeError, ValueError) as e:  # DistStoreError, DistNetworkError and gloo's own are RuntimeErrors
        raise DistributedError(
            f"rank {ranks.rank} of {ranks.world_size} could not join the process group at {where} within "
            f"{seconds:g} s ({_first_line(e)}); start every rank (torchrun --nnodes/--rdzv_endpoint on each "
            "machine), check the address is reachable, or raise LAB_DIST_TIMEOUT_S"
        ) from None


@contextlib.contextmanager
def _c10d_log_held() -> Iterator[None]:
    """Hold what torch's C++ layer writes to file descriptor 2 while the rendezvous retries (a C++ stack trace
    per failed connection, not silenced from Python): the failure becomes one DistributedError line instead."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as held:
            os.dup2(held.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def destroy() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


@contextlib.contextmanager
def process_group(ranks: Ranks, timeout: float | None = None) -> Iterator[None]:
    """init, the block, destroy (also on an error); a collective that failed because another rank died or
    timed out becomes a DistributedError."""
    init(ranks, timeout)
    try:
        yield
    except RuntimeError as e:  # gloo reports a lost peer as a plain RuntimeError naming itself
        if not (isinstance(e, dist.DistError) or "gloo" in str(e)):
            raise
        raise DistributedError(
            f"rank {ranks.rank} of {ranks.world_size}: a collective failed ({_first_line(e)}); another rank "
            "stopped or did not answer within LAB_DIST_TIMEOUT_S, see its own message"
        ) from None
    finally:
        destroy()


def check_joined(ranks: Ranks) -> None:
    """A DistributedError unless this process is in the process group `ranks` describes."""
    if not ranks.distributed:
        return
    if not (dist.is_available() and dist.is_initialized()):
        raise DistributedError(
            f"rank {ranks.rank} of {ranks.world_size} has not joined a process group: call "
            "core.model.distributed.init(ranks) first (the CLI does under torchrun)"
        )
    if (dist.get_rank(), dist.get_world_size()) != (ranks.rank, ranks.world_size):
        raise DistributedError(
            f"the process group is rank {dist.get_rank()} of {dist.get_world_size()}, but the run was given "
            f"rank {ranks.rank} of {ranks.world_size}"
        )


def agree_stop(flags: Sequence[bool], ranks: Ranks) -> tuple[bool, ...]:
    """Each flag OR-ed over every rank (one all-reduce with MAX): True on every rank if it is on any."""
    if not ranks.distributed:
        return tuple(bool(f) for f in flags)
    t = torch.tensor([1.0 if f else 0.0 for f in flags])  # (F,)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return tuple(bool(v) for v in t.tolist())


def all_max(x: float, ranks: Ranks) -> float:
    return _reduce(x, ranks, dist.ReduceOp.MAX)


def all_sum(x: float, ranks: Ranks) -> float:
    return _reduce(x, ranks, dist.ReduceOp.SUM)


def all_mean(x: float, ranks: Ranks) -> float:
    """The mean of one float over the ranks; the global batch's loss when every rank holds an equal shard."""
    return x if not ranks.distributed else all_sum(x, ranks) / ranks.world_size


def _reduce(x: float, ranks: Ranks, op) -> float:
    if not ranks.distributed:
        return x
    t = torch.tensor([x], dtype=torch.float64)  # (1,): float64, so the reduction adds no rounding of its own
    dist.all_reduce(t, op=op)
    return float(t.item())


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank `rank`'s own stream: `seed` itself for rank 0 (a one-rank run draws what a single
    process draws), otherwise 63 bits of sha256("seed:rank"), which no small seed of rank 0 collides with."""
    if rank == 0:
        return seed
    return int.from_bytes(hashlib.sha256(f"{seed}:{rank}".encode("ascii")).digest()[:8], "big") >> 1


def rank_generator(seed: int, rank: int) -> torch.Generator:
    """A torch.Generator seeded with rank_seed(seed, rank): the batches rank `rank` draws."""
    return torch.Generator().manual_seed(rank_seed(seed, rank))


def launch_command(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The command that started this run, for the manifest: `python -m core <argv>` for a single process,
    otherwise the torchrun line rebuilt from torchrun's variables (GROUP_WORLD_SIZE nodes of LOCAL_WORLD_SIZE
    ranks; one node is written --standalone; the rendezvous endpoint of several is per site, not recorded)."""
    env = os.environ if environ is None else environ
    ranks = from_env(env)
    if not ranks.distributed:
        return ["python", "-m", "core", *argv]
    per_node = env.get("LOCAL_WORLD_SIZE", "").strip()
    nodes = env.get("GROUP_WORLD_SIZE", "").strip()
    per_node = per_node if per_node.isdigit() else str(ranks.world_size)
    nodes = nodes if nodes.isdigit() else str(max(1, ranks.world_size // max(1, int(per_node))))
    where = ["--standalone"] if nodes == "1" else [f"--nnodes={nodes}"]
    return ["torchrun", *where, f"--nproc_per_node={per_node}", "-m", "core", *argv]


def _first_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text[:300] if text else type(e).__name__
