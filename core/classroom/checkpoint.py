"""The knowledge checkpoint: questions across the lesson, their numbers drawn with a per-learner seed and graded by
the lab's own code.

The seed comes from the learner's name and class code, so neighbours get different numbers and a reload gives the
same ones; the function that draws the page is the function that grades. A number's tolerance is a reading
tolerance for answers worked out by hand, shown with the question. Typed answers are parsed as numbers, never
evaluated.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import torch

from core.attention import causal_mask, scaled_dot_product_attention
from core.lessons.masks import fully_masked_rows, zero_after_softmax
from core.lessons.one_row import read_row
from core.lessons.rope import offset_scores, seeded_qk
from core.lessons.scores import random_qkv, scaling_experiment, temperature_distribution
from core.model.kv_cache import KVCache

MAX_ANSWER_CHARS = 40


@dataclass(frozen=True)
class Question:
    id: str  # stable across learners: results are counted by it
    topic: str
    page: str  # the view that teaches it, e.g. "views/masks.py"
    prompt: str
    answer: float | str  # a number, or the right option
    options: tuple[str, ...] = ()  # a choice question's options; empty for a number
    tolerance: float = 0.0  # a number is right within this distance
    why: str = ""  # shown after grading

    @property
    def is_choice(self) -> bool:
        return bool(self.options)


@dataclass(frozen=True)
class Graded:
    question: Question
    given: str
    correct: bool
    message: str  # what was wrong with the input, or how far off it was


def learner_seed(learner: str, class_code: str) -> int:
    """A seed from the learner's name and class code: the same person gets the same numbers, others other ones."""
    digest = hashlib.sha256(f"{class_code}\x1f{learner}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 2**63


def parse_number(text: str) -> float:
    """A typed number such as '0.25', ' -1,5 ' or '1e-3'; ValueError with a message for anything else."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("type a number")
    text = text.strip()
    if len(text) > MAX_ANSWER_CHARS:
        raise ValueError(f"a number has at most {MAX_ANSWER_CHARS} characters")
    try:
        value = float(text.replace(",", ".") if text.count(",") == 1 and "." not in text else text)
    except ValueError:
        raise ValueError(f"{text[:20]!r} is not a number: type digits, for example 0.25") from None
    if not math.isfinite(value):
        raise ValueError("type a finite number")
    return value


def grade(question: Question, given: str | None) -> Graded:
    if given is None or (isinstance(given, str) and not given.strip()):
        return Graded(question, "", False, "not answered")
    if question.is_choice:
        right = given == question.answer
        return Graded(question, given, right, "right" if right else f"the lab's answer: {question.answer}")
    try:
        value = parse_number(given)
    except ValueError as e:
        return Graded(question, str(given)[:MAX_ANSWER_CHARS], False, str(e))
    answer = float(question.answer)
    off = abs(value - answer)
    right = off <= question.tolerance
    message = f"the lab computes {answer:.4g}; you were {off:.3g} off (tolerance {question.tolerance:g})"
    return Graded(question, given.strip(), right, message)


def _round(x: float, digits: int = 2) -> float:
    return float(f"{x:.{digits}f}")


# ---- the questions -----------------------------------------------------------------------------------


def score_shape(rng: random.Random) -> Question:
    B, H, T, D = rng.randint(2, 4), rng.randint(2, 8), rng.randint(3, 9), rng.choice([8, 16, 32, 64])
    q, k, _ = random_qkv(B, H, T, D, seed=rng.randrange(2**31))
    shape = tuple((q @ k.transpose(-2, -1)).shape)
    right = f"({B}, {H}, {T}, {T})"
    wrong = [f"({B}, {H}, {D}, {D})", f"({B}, {H}, {T}, {D})", f"({B}, {T}, {T})"]
    assert shape == (B, H, T, T)
    options = [right, *wrong]
    rng.shuffle(options)
    return Question(
        "scores.shape", "score shapes", "views/score_geometry.py",
        f"Q and K have shape (B, H, T, D) = ({B}, {H}, {T}, {D}). What is the shape of Q Kᵀ?",
        right, tuple(options), why="one T x T relation matrix per batch element and head",
    )  # fmt: skip


def score_variance(rng: random.Random) -> Question:
    D = rng.choice([4, 9, 16, 25, 36, 64])
    return Question(
        "scaling.variance", "why divide by √d", "views/score_geometry.py",
        f"q and k have {D} entries, each of mean 0 and variance 1. What is the variance of q·k? (Dividing by √d "
        "brings it back to 1.)",
        float(D), tolerance=0.0, why="a sum of D products of unit variance has variance D",
    )  # fmt: skip


def saturation(rng: random.Random) -> Question:
    q, k, v = random_qkv(1, 1, 6, 3, seed=rng.randrange(2**31))
    exp = scaling_experiment(q, k, v, factor=10.0)
    went_up = exp.unscaled.mean_max_weight > exp.baseline.mean_max_weight
    right = "it goes up: rows get closer to one-hot" if went_up else "it goes down: rows spread out"
    options = ("it goes up: rows get closer to one-hot", "it goes down: rows spread out", "it stays the same")
    return Question(
        "scaling.saturation", "saturation", "views/score_geometry.py",
        "Drop the division by √3 and multiply Q and K by 10. What happens to the largest weight of each row?",
        right, options, why="large gaps between logits make the exponentials concentrate on the maximum",
    )  # fmt: skip


def missing_mass(rng: random.Random) -> Question:
    scores = [_round(rng.uniform(-1.5, 1.5), 1) for _ in range(3)]
    forbidden = rng.randrange(1, 3)
    allowed = torch.tensor([[j != forbidden for j in range(3)]])  # (1, 3)
    result = zero_after_softmax(torch.tensor([scores], dtype=torch.float64), allowed)
    kept = float(result.after_sum[0])
    return Question(
        "masks.missing_mass", "masks before softmax", "views/masks.py",
        f"A row has scores {scores}. Softmax runs over all three, then the weight of key {forbidden} is set to 0. "
        "What do the remaining weights sum to? (2 decimals)",
        kept, tolerance=0.01, why="the forbidden key already took its share: mask the logits before softmax",
    )  # fmt: skip


def empty_row(rng: random.Random) -> Question:
    q, k, v = random_qkv(1, 1, 3, 2, seed=rng.randrange(2**31))
    mask = torch.ones(1, 3, 3, dtype=torch.bool)
    mask[0, 0] = False  # row 0 sees nothing (all padding)
    rows = fully_masked_rows(q[0], k[0], v[0], mask)
    lab_zero = bool((rows.weights[0, 0] == 0).all())
    right = "all zeros, and a zero output" if lab_zero else "NaN"
    options = ("all zeros, and a zero output", "NaN", "equal weights 1/S", "an error")
    return Question(
        "masks.empty_row", "a fully masked row", "views/masks.py",
        "A query row whose every key is padding: what weights does the lab return for it?",
        right, options, why="the lab defines it: no allowed key, no weight, no NaN (and finite gradients)",
    )  # fmt: skip


def row_zero(rng: random.Random) -> Question:
    q, k, v = random_qkv(1, 1, 4, 3, seed=rng.randrange(2**31), Dv=2)
    reading = read_row(q[0, 0], k[0, 0], v[0, 0], 0)
    return Question(
        "row.first", "reading one row", "views/read_row.py",
        "Under the causal mask, what is row 0's weight on key 0?",
        reading.weights[0], tolerance=1e-6, why="row 0 may attend only to key 0, so its one weight is exactly 1",
    )  # fmt: skip


def row_output(rng: random.Random) -> Question:
    T = 3
    q = torch.tensor([[_round(rng.uniform(-1, 1), 1) for _ in range(2)] for _ in range(T)], dtype=torch.float64)
    k = torch.tensor([[_round(rng.uniform(-1, 1), 1) for _ in range(2)] for _ in range(T)], dtype=torch.float64)
    v = torch.tensor([[float(rng.randint(-3, 3))] for _ in range(T)], dtype=torch.float64)  # (T, 1)
    reading = read_row(q, k, v, 1)

    def vec(x: torch.Tensor) -> str:
        return "[" + ", ".join(f"{value:g}" for value in x.tolist()) + "]"

    return Question(
        "row.output", "reading one row", "views/read_row.py",
        f"q1 = {vec(q[1])}, keys k0 = {vec(k[0])}, k1 = {vec(k[1])}, values v0 = {v[0].item():g}, "
        f"v1 = {v[1].item():g}, d = 2, causal. What is the output of row 1? (2 decimals)",
        reading.out[0], tolerance=0.01, why="softmax(q·k / √2) over keys 0 and 1, then the weighted sum of v0, v1",
    )  # fmt: skip


def temperature(rng: random.Random) -> Question:
    scores = (1.2, 0.3, -0.4, 1.8)
    tau = rng.choice([0.5, 2.0, 4.0])
    token = rng.randrange(4)
    p = temperature_distribution(scores, tau).probs[token]
    return Question(
        "temperature.prob", "temperature", "views/temperature.py",
        f"Scores {list(scores)}, temperature {tau:g}. What probability does token {token + 1} get? (3 decimals)",
        p, tolerance=0.002, why="softmax(scores / temperature): a high temperature flattens, a low one sharpens",
    )  # fmt: skip


def rope_offset(rng: random.Random) -> Question:
    D = 8
    q, k = seeded_qk(D, rng.randrange(2**31))
    m, n, shift = rng.randint(3, 12), rng.randint(0, 2), rng.randint(2, 9)
    result = offset_scores(q, k, [m - n], [n, n + shift])
    before, after = result.scores[0][0], result.scores[1][0]
    return Question(
        "rope.offset", "RoPE: only m - n counts", "views/rope.py",
        f"With RoPE, a query at position {m} scores {before:.3f} against a key at position {n}. What is the score "
        f"when both move {shift} positions later (query at {m + shift}, key at {n + shift})? (3 decimals)",
        after, tolerance=0.002, why="rotations by m and n leave q·k depending on m - n only",
    )  # fmt: skip


def kv_cache(rng: random.Random) -> Question:
    held = rng.randint(5, 40)
    cache = KVCache(n_layer=1, batch_size=1, n_head=1, head_dim=2, capacity=held + 1)
    cache.append(0, torch.zeros(1, 1, held, 2), torch.zeros(1, 1, held, 2))
    k, _ = cache.append(0, torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    return Question(
        "cache.keys", "the KV cache", "views/autocomplete.py",
        f"The cache holds the keys of {held} tokens. One generation step feeds the newest token only. Over how "
        "many keys does that token's query attend?",
        float(k.shape[2]), tolerance=0.0, why="the cached keys plus its own: the mask with a cache is bottom-right",
    )  # fmt: skip


def leak(rng: random.Random) -> Question:
    T = rng.randint(4, 8)
    t = rng.randrange(T - 1)
    sees_next = bool(causal_mask(T)[t, t + 1])  # does row t see key t + 1, the token it must predict?
    options = ("below: the model sees the token it must predict", "above: the task gets harder", "the same")
    assert not sees_next  # with the mask it never does; the question is what removing the mask changes
    return Question(
        "leak.loss", "the leak", "views/training.py",
        f"With the causal mask, row {t} of a {T}-token window never sees key {t + 1}, the token it must predict. A "
        "model is trained without the mask. Will its training loss go above or below the honest run's?",
        options[0], options, why="without the mask position t attends to token t + 1, the answer itself",
    )  # fmt: skip


def scale_factor(rng: random.Random) -> Question:
    D = rng.choice([4, 16, 25, 64, 100])
    q, k, v = random_qkv(1, 1, 2, D, seed=rng.randrange(2**31))
    result = scaled_dot_product_attention(q, k, v)
    scale = float(result.scores[0, 0, 0, 1] / (q[0, 0, 0] @ k[0, 0, 1]))  # the lab's own factor, read back
    return Question(
        "scaling.factor", "why divide by √d", "views/score_geometry.py",
        f"The head width is d_k = {D}. By what number are the scores Q Kᵀ multiplied? (3 decimals)",
        scale, tolerance=0.001, why="1 / √d_k keeps the scores' variance at 1",
    )  # fmt: skip


QUESTIONS: tuple[Callable[[random.Random], Question], ...] = (
    score_shape,
    score_variance,
    scale_factor,
    saturation,
    missing_mass,
    empty_row,
    row_zero,
    row_output,
    temperature,
    rope_offset,
    kv_cache,
    leak,
)


def checkpoint(seed: int) -> list[Question]:
    """The checkpoint for one learner: every question once, its numbers from `seed`."""
    rng = random.Random(seed)
    return [make(random.Random(rng.randrange(2**63))) for make in QUESTIONS]
