"""The simulated user who types the held-out text, and how evaluation samples its work.

At each position the policy's choice is shown when its probability reaches the threshold; the user accepts exactly
when the text goes on with it (one Tab instead of k characters), else types one character. The trace is computed
once and replayed for every threshold, so tuning costs one pass of the predictor. Shapes: N stream positions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.model.corpus import Document
from core.progress import Progress, steps
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.utility import DEFAULT_ATTENTION_COST, net_saved
from core.release.serving.policy import SuggestionPolicy, propose_all
from core.release.serving.predictor import MAX_CONTEXT, Predictor

BATCH = 128  # positions proposed in one batch (core.release.serving.policy.propose_all); 64 took 1.25x as long to tune


@dataclass(frozen=True)
class Segment:
    document: int  # index into the documents
    start: int  # stream position of the first typed character
    stop: int  # one past the last


@dataclass(frozen=True)
class TraceCut:
    chars: int
    probability: float
    matches: bool  # the text goes on with this cut


def typing_segments(documents: Sequence[Document], config: EvalConfig) -> list[Segment]:
    """Every document's share of the typing (position 0 of the stream has no context, so it is skipped), in whole
    segments, or in one shorter stretch where the share is less than a segment: at most twice `typing_chars`
    however many documents there are."""
    if config.typing_chars == 0 or not documents:
        return []
    shares = typing_shares([len(d.text) for d in documents], config.typing_chars)
    rng = random.Random(config.seed)
    segments: list[Segment] = []
    start = 0
    for d, doc in enumerate(documents):
        a, b = max(1, start), start + len(doc.text)
        start = b + 1  # the document's <eos>
        if a >= b:
            continue
        blocks = [(s, min(s + config.segment_chars, b)) for s in range(a, b, config.segment_chars)]
        if b - a > shares[d]:
            blocks = sorted(rng.sample(blocks, min(len(blocks), math.ceil(shares[d] / config.segment_chars))))
            if blocks and shares[d] < config.segment_chars:  # one stretch of its share, not a whole segment:
                s, e = blocks[0]  # 420 validation documents typed 210,000 characters where 20,000 were asked
                blocks = [(s, min(e, s + shares[d]))]
        segments.extend(Segment(d, s, e) for s, e in blocks)
    return segments


def typing_shares(lengths: Sequence[int], total: int) -> list[int]:
    """Characters to type in each document: equal shares of `total`, a document shorter than its share typed
    whole and what it leaves shared out over the longer ones (shortest first), so the typist covers `total`
    characters whenever the documents hold that many."""
    shares = [0] * len(lengths)
    remaining, left = total, len(lengths)
    for d in sorted(range(len(lengths)), key=lambda d: (lengths[d], d)):
        shares[d] = min(lengths[d], math.ceil(remaining / left))
        remaining, left = max(0, remaining - shares[d]), left - 1
    return shares


def typing_trace(
    predictor: Predictor,
    ids: Sequence[int],
    segments: Sequence[Segment],
    policy: SuggestionPolicy,
    progress: Progress | None = None,
) -> dict[int, tuple[TraceCut, ...]]:
    """position -> the cuts the policy would choose from there (every position of every segment); `progress`
    hears of each batch."""
    positions = [i for seg in segments for i in range(seg.start, seg.stop)]
    kept = min(MAX_CONTEXT, predictor.reads(policy.max_chars))  # the stream cut once, to the window it reads
    trace: dict[int, tuple[TraceCut, ...]] = {}
    for c0 in steps(range(0, len(positions), BATCH), progress, "suggesting as the user types"):
        batch = positions[c0 : c0 + BATCH]
        proposals = propose_all(predictor, [ids[max(0, i - kept) : i] for i in batch], policy)
        for i, proposal in zip(batch, proposals):
            trace[i] = tuple(
                TraceCut(cut.chars, cut.probability, list(ids[i : i + cut.chars]) == list(cut.tokens))
                for cut in proposal.cuts
            )
    return trace


def choose_cut(cuts: Sequence[TraceCut], threshold: float) -> TraceCut | None:
    """The shown cut at `threshold`: the policy's `Proposal.choose` on a trace."""
    confident = [c for c in cuts if c.probability >= threshold]
    if not confident:
        return None
    return max(confident, key=lambda c: (c.probability * (c.chars - 1), -c.chars))


def simulate_typing(
    trace: dict[int, tuple[TraceCut, ...]],
    n_positions: int,
    segments: Sequence[Segment],
    threshold: float,
    attention_cost: float = DEFAULT_ATTENTION_COST,
) -> dict[str, np.ndarray]:
    """Per stream position (N = n_positions): offered / accepted (0 or 1), saved keystrokes (gross), covered
    characters, and "net" (float): saved less attention_cost where a suggestion was offered and not accepted."""
    out = {k: np.zeros(n_positions, dtype=np.int64) for k in ("offered", "accepted", "saved", "covered")}
    for seg in segments:
        i = seg.start
        while i < seg.stop:
            cut = choose_cut(trace[i], threshold)
            if cut is not None:
                out["offered"][i] = 1
                if cut.matches:
                    out["accepted"][i] = 1
                    out["saved"][i] = cut.chars - 1  # one Tab instead of its characters
                    out["covered"][i : i + cut.chars] += 1
                    i += cut.chars
                    continue
            out["covered"][i] += 1
            i += 1
    out["net"] = net_saved(out["saved"], out["offered"], out["accepted"], attention_cost).astype(np.float64)  # (N,)
    return out


def sample_blocks(ranges: Sequence[tuple[int, int]], size: int, cap: int, seed: int) -> list[tuple[int, int]]:
    """Cut each [a, b) into blocks of `size`; keep all if they hold <= cap positions, else a seeded
    sample of ceil(cap / size) blocks. Returned in stream order."""
    blocks = [(s, min(s + size, b)) for a, b in ranges for s in range(a, b, size)]
    if sum(b - a for a, b in blocks) <= cap:
        return blocks
    return sorted(random.Random(seed).sample(blocks, min(len(blocks), math.ceil(cap / size))))
