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

from core import i18n
from core.attention import causal_mask, scaled_dot_product_attention
from core.i18n import N_, _
from core.lessons.masks import fully_masked_rows, zero_after_softmax
from core.lessons.one_row import read_row
from core.lessons.rope import offset_scores, seeded_qk
from core.lessons.scores import random_qkv, scaling_experiment, temperature_distribution
from core.model.kv_cache import KVCache

MAX_ANSWER_CHARS = 40


@dataclass(frozen=True)
class Question:
    """A question as the lab keeps it: in English (topic, prompt, options, why are the catalogs' msgids, marked with
    N_), so a question, its fingerprint and a chosen option are the same in every language; shown translated."""

    id: str  # stable across learners: results are counted by it
    topic: str
    page: str  # the view that teaches it, e.g. "views/masks.py"
    prompt: str
    answer: float | str  # a number, or the right option
    options: tuple[str, ...] = ()  # a choice question's options; empty for a number
    tolerance: float = 0.0  # a number is right within this distance
    why: str = ""  # shown after grading
    template: str = ""  # the prompt before its numbers were put in (its msgid), when it has numbers
    values: tuple[tuple[str, str], ...] = ()  # the numbers put into `template`, as the prompt writes them

    @property
    def is_choice(self) -> bool:
        return bool(self.options)

    @property
    def shown_prompt(self) -> str:
        """The prompt in the reader's language (the same numbers)."""
        if self.template:  # a value is a number, a label, or a word marked N_() ("off"): translated if it is one
            return i18n._(self.template).format(**{name: i18n._(value) for name, value in self.values})
        return i18n._(self.prompt)


def _question(
    id: str, topic: str, page: str, template: str, values: dict[str, object], answer: float | str, **rest
) -> Question:
    """A question whose prompt is `template` (an N_ message) with `values` put in, as text."""
    shown = {name: str(value) for name, value in values.items()}
    return Question(id, topic, page, template.format(**shown), answer, template=template,
                    values=tuple(shown.items()), **rest)  # fmt: skip


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
        raise ValueError(_("type a number"))
    text = text.strip()
    if len(text) > MAX_ANSWER_CHARS:
        raise ValueError(_("a number has at most {count} characters").format(count=MAX_ANSWER_CHARS))
    try:
        value = float(text.replace(",", ".") if text.count(",") == 1 and "." not in text else text)
    except ValueError:
        raise ValueError(
            _("{text} is not a number: type digits, for example 0.25").format(text=repr(text[:20]))
        ) from None
    if not math.isfinite(value):
        raise ValueError(_("type a finite number"))
    return value


def grade(question: Question, given: str | None) -> Graded:
    """`given` graded against the lab's answer; the message in the reader's language (the grading never reads it)."""
    if given is None or (isinstance(given, str) and not given.strip()):
        return Graded(question, "", False, _("not answered"))
    if question.is_choice:
        right = given == question.answer
        # "right" stays English: the one place it shows (views/checkpoint) says it in a sentence of its own
        message = "right" if right else _("the lab's answer: {answer}").format(answer=i18n._(str(question.answer)))
        return Graded(question, given, right, message)
    try:
        value = parse_number(given)
    except ValueError as e:
        return Graded(question, str(given)[:MAX_ANSWER_CHARS], False, str(e))
    answer = float(question.answer)
    off = abs(value - answer)
    right = off <= question.tolerance
    message = _("the lab computes {answer}; you were {off} off (tolerance {tolerance})").format(
        answer=f"{answer:.4g}", off=f"{off:.3g}", tolerance=f"{question.tolerance:g}"
    )
    return Graded(question, given.strip(), right, message)


def _round(x: float, digits: int = 2) -> float:
    return float(f"{x:.{digits}f}")


# ---- the questions -----------------------------------------------------------------------------------
# Each prompt is an N_ message with its numbers as {placeholders}; topics, options and explanations are N_ messages:
# a question is kept in English and shown in the reader's language (Question.shown_prompt, i18n._).


def score_shape(rng: random.Random) -> Question:
    B, H, T, D = rng.randint(2, 4), rng.randint(2, 8), rng.randint(3, 9), rng.choice([8, 16, 32, 64])
    q, k, _v = random_qkv(B, H, T, D, seed=rng.randrange(2**31))
    shape = tuple((q @ k.transpose(-2, -1)).shape)
    right = f"({B}, {H}, {T}, {T})"
    wrong = [f"({B}, {H}, {D}, {D})", f"({B}, {H}, {T}, {D})", f"({B}, {T}, {T})"]
    assert shape == (B, H, T, T)
    options = [right, *wrong]
    rng.shuffle(options)
    return _question(
        "scores.shape", N_("score shapes"), "views/score_geometry.py",
        N_("Q and K have shape (B, H, T, D) = ({B}, {H}, {T}, {D}). What is the shape of Q Kᵀ?"),
        dict(B=B, H=H, T=T, D=D),
        right, options=tuple(options), why=N_("one T x T relation matrix per batch element and head"),
    )  # fmt: skip


def score_variance(rng: random.Random) -> Question:
    D = rng.choice([4, 9, 16, 25, 36, 64])
    return _question(
        "scaling.variance", N_("why divide by √d"), "views/score_geometry.py",
        N_("q and k have {D} entries, each of mean 0 and variance 1. What is the variance of q·k? (Dividing by √d "
           "brings it back to 1.)"),
        dict(D=D),
        float(D), tolerance=0.0, why=N_("a sum of D products of unit variance has variance D"),
    )  # fmt: skip


SATURATION = (
    N_("it goes up: rows get closer to one-hot"),
    N_("it goes down: rows spread out"),
    N_("it stays the same"),
)


def saturation(rng: random.Random) -> Question:
    q, k, v = random_qkv(1, 1, 6, 3, seed=rng.randrange(2**31))
    exp = scaling_experiment(q, k, v, factor=10.0)
    went_up = exp.unscaled.mean_max_weight > exp.baseline.mean_max_weight
    right = SATURATION[0] if went_up else SATURATION[1]
    return _question(
        "scaling.saturation", N_("saturation"), "views/score_geometry.py",
        N_("Drop the division by √3 and multiply Q and K by 10. What happens to the largest weight of each row?"),
        {},
        right, options=SATURATION,
        why=N_("large gaps between logits make the exponentials concentrate on the maximum"),
    )  # fmt: skip


def missing_mass(rng: random.Random) -> Question:
    scores = [_round(rng.uniform(-1.5, 1.5), 1) for _i in range(3)]
    forbidden = rng.randrange(1, 3)
    allowed = torch.tensor([[j != forbidden for j in range(3)]])  # (1, 3)
    result = zero_after_softmax(torch.tensor([scores], dtype=torch.float64), allowed)
    kept = float(result.after_sum[0])
    return _question(
        "masks.missing_mass", N_("masks before softmax"), "views/masks.py",
        N_("A row has scores {scores}. Softmax runs over all three, then the weight of key {key} is set to 0. What "
           "do the remaining weights sum to? (2 decimals)"),
        dict(scores=scores, key=forbidden),
        kept, tolerance=0.01, why=N_("the forbidden key already took its share: mask the logits before softmax"),
    )  # fmt: skip


EMPTY_ROW = (
    N_("all zeros, and a zero output"),
    "NaN",
    N_("equal weights 1/S"),
    N_("an error"),
)


def empty_row(rng: random.Random) -> Question:
    q, k, v = random_qkv(1, 1, 3, 2, seed=rng.randrange(2**31))
    mask = torch.ones(1, 3, 3, dtype=torch.bool)
    mask[0, 0] = False  # row 0 sees nothing (all padding)
    rows = fully_masked_rows(q[0], k[0], v[0], mask)
    lab_zero = bool((rows.weights[0, 0] == 0).all())
    right = EMPTY_ROW[0] if lab_zero else EMPTY_ROW[1]
    return _question(
        "masks.empty_row", N_("a fully masked row"), "views/masks.py",
        N_("A query row whose every key is padding: what weights does the lab return for it?"),
        {},
        right, options=EMPTY_ROW,
        why=N_("the lab defines it: no allowed key, no weight, no NaN (and finite gradients)"),
    )  # fmt: skip


def row_zero(rng: random.Random) -> Question:
    q, k, v = random_qkv(1, 1, 4, 3, seed=rng.randrange(2**31), Dv=2)
    reading = read_row(q[0, 0], k[0, 0], v[0, 0], 0)
    return _question(
        "row.first", N_("reading one row"), "views/read_row.py",
        N_("Under the causal mask, what is row 0's weight on key 0?"),
        {},
        reading.weights[0], tolerance=1e-6,
        why=N_("row 0 may attend only to key 0, so its one weight is exactly 1"),
    )  # fmt: skip


def row_output(rng: random.Random) -> Question:
    T = 3
    q = torch.tensor([[_round(rng.uniform(-1, 1), 1) for _i in range(2)] for _j in range(T)], dtype=torch.float64)
    k = torch.tensor([[_round(rng.uniform(-1, 1), 1) for _i in range(2)] for _j in range(T)], dtype=torch.float64)
    v = torch.tensor([[float(rng.randint(-3, 3))] for _i in range(T)], dtype=torch.float64)  # (T, 1)
    reading = read_row(q, k, v, 1)

    def vec(x: torch.Tensor) -> str:
        return "[" + ", ".join(f"{value:g}" for value in x.tolist()) + "]"

    return _question(
        "row.output", N_("reading one row"), "views/read_row.py",
        N_("q1 = {q1}, keys k0 = {k0}, k1 = {k1}, values v0 = {v0}, v1 = {v1}, d = 2, causal. What is the output "
           "of row 1? (2 decimals)"),
        dict(q1=vec(q[1]), k0=vec(k[0]), k1=vec(k[1]), v0=f"{v[0].item():g}", v1=f"{v[1].item():g}"),
        reading.out[0], tolerance=0.01,
        why=N_("softmax(q·k / √2) over keys 0 and 1, then the weighted sum of v0, v1"),
    )  # fmt: skip


def temperature(rng: random.Random) -> Question:
    scores = (1.2, 0.3, -0.4, 1.8)
    tau = rng.choice([0.5, 2.0, 4.0])
    token = rng.randrange(4)
    p = temperature_distribution(scores, tau).probs[token]
    return _question(
        "temperature.prob", N_("temperature"), "views/temperature.py",
        N_("Scores {scores}, temperature {temperature}. What probability does token {token} get? (3 decimals)"),
        dict(scores=list(scores), temperature=f"{tau:g}", token=token + 1),
        p, tolerance=0.002,
        why=N_("softmax(scores / temperature): a high temperature flattens, a low one sharpens"),
    )  # fmt: skip


def rope_offset(rng: random.Random) -> Question:
    D = 8
    q, k = seeded_qk(D, rng.randrange(2**31))
    m, n, shift = rng.randint(3, 12), rng.randint(0, 2), rng.randint(2, 9)
    result = offset_scores(q, k, [m - n], [n, n + shift])
    before, after = result.scores[0][0], result.scores[1][0]
    return _question(
        "rope.offset", N_("RoPE: only m - n counts"), "views/rope.py",
        N_("With RoPE, a query at position {m} scores {score} against a key at position {n}. What is the score "
           "when both move {shift} positions later (query at {m_later}, key at {n_later})? (3 decimals)"),
        dict(m=m, score=f"{before:.3f}", n=n, shift=shift, m_later=m + shift, n_later=n + shift),
        after, tolerance=0.002, why=N_("rotations by m and n leave q·k depending on m - n only"),
    )  # fmt: skip


def kv_cache(rng: random.Random) -> Question:
    held = rng.randint(5, 40)
    cache = KVCache(n_layer=1, batch_size=1, n_head=1, head_dim=2, capacity=held + 1)
    cache.append(0, torch.zeros(1, 1, held, 2), torch.zeros(1, 1, held, 2))
    k, _v = cache.append(0, torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    return _question(
        "cache.keys", N_("the KV cache"), "views/autocomplete.py",
        N_("The cache holds the keys of {held} tokens. One generation step feeds the newest token only. Over how "
           "many keys does that token's query attend?"),
        dict(held=held),
        float(k.shape[2]), tolerance=0.0,
        why=N_("the cached keys plus its own: the mask with a cache is bottom-right"),
    )  # fmt: skip


LEAK = (
    N_("below: the model sees the token it must predict"),
    N_("above: the task gets harder"),
    N_("the same"),
)


def leak(rng: random.Random) -> Question:
    T = rng.randint(4, 8)
    t = rng.randrange(T - 1)
    sees_next = bool(causal_mask(T)[t, t + 1])  # does row t see key t + 1, the token it must predict?
    assert not sees_next  # with the mask it never does; the question is what removing the mask changes
    return _question(
        "leak.loss", N_("the leak"), "views/training.py",
        N_("With the causal mask, row {t} of a {T}-token window never sees key {next}, the token it must predict. A "
           "model is trained without the mask. Will its training loss go above or below the honest run's?"),
        dict(t=t, T=T, next=t + 1),
        LEAK[0], options=LEAK, why=N_("without the mask position t attends to token t + 1, the answer itself"),
    )  # fmt: skip


def scale_factor(rng: random.Random) -> Question:
    D = rng.choice([4, 16, 25, 64, 100])
    q, k, v = random_qkv(1, 1, 2, D, seed=rng.randrange(2**31))
    result = scaled_dot_product_attention(q, k, v)
    scale = float(result.scores[0, 0, 0, 1] / (q[0, 0, 0] @ k[0, 0, 1]))  # the lab's own factor, read back
    return _question(
        "scaling.factor", N_("why divide by √d"), "views/score_geometry.py",
        N_("The head width is d_k = {D}. By what number are the scores Q Kᵀ multiplied? (3 decimals)"),
        dict(D=D),
        scale, tolerance=0.001, why=N_("1 / √d_k keeps the scores' variance at 1"),
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
