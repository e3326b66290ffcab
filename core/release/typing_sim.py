"""How evaluation samples its work, and the simulated user who types the held-out text.

    sample_blocks(ranges, size, cap, seed)   whole seeded blocks of positions, at most about `cap` of them
    typing_segments(documents, config)       the seeded stretches of each document the user types
    simulate_typing(predictor, ids, segs)    per position: a suggestion offered, accepted, keystrokes saved,
                                             characters covered (see core.release.evaluation's docstring)

Shapes: N stream positions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np

from core.model.corpus import Document
from core.release.eval_report import DEFAULT_EVAL, EvalConfig
from core.release.predictor import Predictor

MAX_CONTEXT = 1024  # tokens handed to suggest(): more than any model here looks at


def simulate_typing(
    predictor: Predictor, ids: Sequence[int], segments: Sequence[tuple[int, int]], config: EvalConfig = DEFAULT_EVAL
) -> dict[str, np.ndarray]:
    """Per stream position: offered / accepted (0 or 1), saved keystrokes, covered characters."""
    N = len(ids)
    out = {k: np.zeros(N, dtype=np.int64) for k in ("offered", "accepted", "saved", "covered")}
    for a, b in segments:
        i = a
        while i < b:
            s = predictor.suggest(ids[max(0, i - MAX_CONTEXT) : i], config.max_suggestion_chars)
            if len(s) >= config.min_suggestion_chars:
                out["offered"][i] = 1
                if list(ids[i : i + len(s)]) == list(s):
                    out["accepted"][i] = 1
                    out["saved"][i] = len(s) - 1  # one Tab instead of len(s) characters
                    out["covered"][i : i + len(s)] += 1
                    i += len(s)
                    continue
            out["covered"][i] += 1
            i += 1
    return out


def sample_blocks(ranges: Sequence[tuple[int, int]], size: int, cap: int, seed: int) -> list[tuple[int, int]]:
    """Cut each [a, b) into blocks of `size`; keep all if they hold <= cap positions, else a seeded
    sample of ceil(cap / size) blocks. Returned in stream order."""
    blocks = [(s, min(s + size, b)) for a, b in ranges for s in range(a, b, size)]
    if sum(b - a for a, b in blocks) <= cap:
        return blocks
    return sorted(random.Random(seed).sample(blocks, min(len(blocks), math.ceil(cap / size))))


def typing_segments(documents: Sequence[Document], config: EvalConfig) -> list[tuple[int, int]]:
    """The character ranges of each document in the stream (position 0 has no context)."""
    ranges, start = [], 0
    for doc in documents:
        ranges.append((max(1, start), start + len(doc.text)))
        start += len(doc.text) + 1  # the document's <eos>
    ranges = [(a, b) for a, b in ranges if a < b]
    if config.typing_chars == 0:
        return []
    return sample_blocks(ranges, config.segment_chars, config.typing_chars, config.seed)
