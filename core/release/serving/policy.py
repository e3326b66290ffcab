"""The suggestion policy (version 1): what an editor offers after the cursor, and when it offers it.

One policy serves every predictor (the transformer and the baselines alike) on every surface: the Autocomplete
page, `python -m core suggest`, the evaluation's simulated typist and the release gate. `propose` computes the
greedy completion after the ids and its *cuts*, each with its probability; `Proposal.choose(threshold)` offers the
cut worth most keystrokes in expectation, P(cut) * (len(cut) - 1), among those at least min_chars long whose
probability reaches the threshold.

Greedy completion: at each step the most likely *visible* token (never <pad>, <bos>, <unk>, <eos>; ties: the
lowest id); an <eos> more likely than every visible token ends the document and the completion. Extending stops
after max_chars characters or once the completion's probability falls below a *floor*: MIN_THRESHOLD where every cut
a threshold could choose is wanted (the tuning, the typist, the Autocomplete page's best guess not offered), the
policy's threshold where only what is offered is (serving: `suggestion`'s default). A cut's probability falls as it
lengthens, so every cut that reaches the threshold lies before that stop and the suggestion offered is the same
either way; the stop spares the steps whose cuts could only be a guess not offered.

A *cut* is allowed where a word, an identifier, a run of spaces or of punctuation ends, after a newline, or where
the document ends: after "    retu" the cuts are "rn", "rn " and "rn self", never "r". Accepting costs one
keystroke (Tab), so a cut of k characters saves k - 1 when the text goes on with it.

The threshold is tuned on the validation documents at the policy's `attention_cost` (every suggestion shown and not
taken costs that many keystrokes) and recorded with that price in the bundle's manifest (`policy_from_manifest`; a
record without a price reads DEFAULT_ATTENTION_COST). Probabilities are float64 products of float64 softmax rows.
Shapes: V vocabulary size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from core.model.prompt import start_ids
from core.model.tokenizer import EOS_ID, SPECIAL_TOKENS, CharTokenizer
from core.numbers import integer, is_int
from core.release.evaluation.utility import DEFAULT_ATTENTION_COST, check_attention_cost
from core.release.serving.predictor import Predictor, is_word_char

POLICY_VERSION = 1
MAX_CHARS = 24  # longest suggestion: a long identifier, or a short idiom such as "):\n        return "
MIN_CHARS = 2  # Tab costs one keystroke: a one-character suggestion saves nothing
MIN_THRESHOLD = 0.05  # completions the model gives less than 5% are never offered
DEFAULT_THRESHOLD = 0.5  # for a bundle whose threshold was never tuned (it says so wherever it is used)
N_SPECIAL = len(SPECIAL_TOKENS)  # ids 0..N_SPECIAL-1 are the special tokens, never text


@dataclass(frozen=True)
class SuggestionPolicy:
    threshold: float = DEFAULT_THRESHOLD
    max_chars: int = MAX_CHARS
    min_chars: int = MIN_CHARS
    tuned: bool = False  # the threshold was chosen on validation documents (core.release.evaluation.tuning)
    version: int = POLICY_VERSION
    attention_cost: float = (
        DEFAULT_ATTENTION_COST  # keystrokes per suggestion shown and not taken (core.release.evaluation.utility)
    )

    def __post_init__(self) -> None:
        if not isinstance(self.threshold, (int, float)) or isinstance(self.threshold, bool):
            raise ValueError(f"threshold must be a number, got {self.threshold!r}")
        if not MIN_THRESHOLD <= self.threshold <= 1.0:
            raise ValueError(f"threshold must lie in {MIN_THRESHOLD}..1, got {self.threshold!r}")
        for name, low, high in (("max_chars", 1, 256), ("min_chars", 1, 256)):
            value = getattr(self, name)
            integer(name, value, low, high)
        if self.min_chars > self.max_chars:
            raise ValueError(f"min_chars ({self.min_chars}) must not exceed max_chars ({self.max_chars})")
        if not is_int(self.version) or self.version != POLICY_VERSION:
            raise ValueError(
                f"suggestion policy version {self.version!r} is not {POLICY_VERSION}, the one this lab serves"
            )
        if not isinstance(self.tuned, bool):
            raise ValueError(f"tuned must be true or false, got {self.tuned!r}")
        object.__setattr__(self, "attention_cost", check_attention_cost(self.attention_cost))

    def floor(self, best_guess: bool) -> float:
        """How far a completion is extended: to MIN_THRESHOLD for the best guess even when it is not offered,
        else only while it reaches the threshold (see the module docstring)."""
        return MIN_THRESHOLD if best_guess else self.threshold

    def with_threshold(self, threshold: float) -> SuggestionPolicy:
        return replace(self, threshold=float(threshold), tuned=True)

    def with_attention_cost(self, cost: float) -> SuggestionPolicy:
        """The same policy judged at another price of attention (the threshold is kept: tune to move it)."""
        return replace(self, attention_cost=cost)

    def to_dict(self) -> dict:
        return {
            "version": self.version,
            "threshold": self.threshold,
            "max_chars": self.max_chars,
            "min_chars": self.min_chars,
            "tuned": self.tuned,
            "attention_cost": self.attention_cost,
        }


DEFAULT_POLICY = SuggestionPolicy()


def policy_from_manifest(manifest: dict) -> SuggestionPolicy:
    """The policy a manifest records under generation["suggestion"]; the untuned default when it records none.

    Raises ValueError (naming the field) for a record that is not a valid version-1 policy."""
    generation = manifest.get("generation") if isinstance(manifest, dict) else None
    if generation is not None and not isinstance(generation, dict):
        raise ValueError(f"generation must be an object holding the suggestion policy, got {generation!r}")
    record = (generation or {}).get("suggestion")
    if record is None:
        return DEFAULT_POLICY
    if not isinstance(record, dict) or set(record) - {
        "version", "threshold", "max_chars", "min_chars", "tuned", "attention_cost"
    }:  # fmt: skip
        raise ValueError(
            "generation.suggestion must be an object with version, threshold, max_chars, min_chars, tuned and "
            "optionally attention_cost; "
            f"got {record!r}"
        )
    try:
        return SuggestionPolicy(**record)
    except (TypeError, ValueError) as e:
        raise ValueError(f"generation.suggestion: {e}") from None


@dataclass(frozen=True)
class Cut:
    tokens: tuple[int, ...]  # the suggestion's token ids
    probability: float  # P(these tokens follow the context) under the predictor

    @property
    def chars(self) -> int:
        return len(self.tokens)  # a character tokenizer: one token per character

    @property
    def expected_saving(self) -> float:
        return self.probability * (self.chars - 1)


@dataclass(frozen=True)
class Choice:
    cut: Cut | None  # None: no cut of at least min_chars characters reaches the floor
    shown: bool  # the cut's probability reaches the threshold


@dataclass(frozen=True)
class Proposal:
    completion: tuple[int, ...]  # (k,) the greedy completion, as far as it was extended
    probabilities: tuple[float, ...]  # (k,) P(completion[:j + 1]) for each j
    cuts: tuple[Cut, ...]  # the allowed cuts of at least min_chars characters, shortest first
    stop_reason: str  # "end of document", "unlikely" (below the floor) or "limit" (max_chars)
    # (V,) float64 P(next | context): the first row the completion was chosen from, kept for what serving measures
    next_probs: Tensor | None = field(default=None, compare=False, repr=False)

    def choose(self, threshold: float) -> Choice:
        confident = [c for c in self.cuts if c.probability >= threshold]
        pool = confident or list(self.cuts)
        if not pool:
            return Choice(None, False)
        best = max(pool, key=lambda c: (c.expected_saving, -c.chars))  # ties: the shorter
        return Choice(best, bool(confident))


def propose(
    predictor: Predictor,
    ids: Sequence[int],
    policy: SuggestionPolicy = DEFAULT_POLICY,
    *,
    floor: float = MIN_THRESHOLD,
) -> Proposal:
    """The greedy completion after `ids` (an empty context starts from <eos>), extended while its probability
    reaches `floor`, and its allowed cuts."""
    return propose_all(predictor, [ids], policy, floor=floor)[0]


def propose_all(
    predictor: Predictor,
    contexts: Sequence[Sequence[int]],
    policy: SuggestionPolicy = DEFAULT_POLICY,
    *,
    floor: float = MIN_THRESHOLD,
) -> list[Proposal]:
    """propose() for many contexts in one batch (the evaluation's typist); the same steps for each."""
    if not isinstance(floor, (int, float)) or isinstance(floor, bool) or not MIN_THRESHOLD <= floor <= 1.0:
        raise ValueError(f"floor must be a number in {MIN_THRESHOLD}..1, got {floor!r}")
    B = len(contexts)
    if B == 0:
        return []
    steps = predictor.continuations([start_ids(list(c)) for c in contexts], policy.max_chars)
    completions: list[list[int]] = [[] for _ in range(B)]
    probabilities: list[list[float]] = [[] for _ in range(B)]
    stops = ["limit"] * B
    after: list[int | None] = [None] * B  # the visible token that was rejected as unlikely: what follows the text
    p = [1.0] * B
    rows = next(steps)  # (B, V) float64: P(next | context)
    first = rows  # (B, V) kept: the row each completion's first character is chosen from
    for j in range(policy.max_chars if rows.shape[1] > N_SPECIAL else 0):
        tokens = N_SPECIAL + rows[:, N_SPECIAL:].argmax(dim=1)  # (B,) most likely visible token, lowest id on ties
        for b, token in enumerate(tokens.tolist()):
            if stops[b] != "limit" or len(completions[b]) < j:
                continue  # finished: its row is still computed with the batch, and ignored
            if float(rows[b, EOS_ID]) > float(rows[b, token]):
                stops[b] = "end of document"
                continue
            p[b] *= float(rows[b, token])
            if p[b] < floor:
                stops[b], after[b] = "unlikely", token
                continue
            completions[b].append(token)
            probabilities[b].append(p[b])
        if j + 1 == policy.max_chars or all(s != "limit" for s in stops):
            break
        finished = torch.tensor([s != "limit" for s in stops])  # (B,)
        try:
            rows = steps.send(tokens.masked_fill(finished, -1))  # -1: a finished row, no more of its rows needed
        except StopIteration:  # the model's context has no more room: the completions end at "limit"
            break
    steps.close()
    proposals = []
    for b, (completion, probs, stop, nxt) in enumerate(zip(completions, probabilities, stops, after)):
        text = predictor.tokenizer.decode(completion)
        following = "" if nxt is None else predictor.tokenizer.decode([nxt])
        cuts = tuple(
            Cut(tuple(completion[:k]), probs[k - 1])
            for k in range(policy.min_chars, len(completion) + 1)
            if _is_boundary(text + following, k, ends=stop == "end of document")
        )
        proposals.append(Proposal(tuple(completion), tuple(probs), cuts, stop, first[b]))  # first[b]: (V,)
    return proposals


def _is_boundary(text: str, k: int, *, ends: bool) -> bool:
    """May a suggestion end after text[:k]? (see the module docstring)"""
    if k == len(text):
        return ends
    return text[k - 1] == "\n" or is_word_char(text[k - 1]) != is_word_char(text[k])


@dataclass(frozen=True)
class Suggestion:
    """What a surface shows: the chosen text, its probability, and whether it clears the threshold."""

    text: str  # "" when there is no cut at all
    probability: float  # 0.0 when there is no cut
    shown: bool
    threshold: float
    tuned: bool  # the threshold was tuned on validation documents
    completion: str  # the greedy completion the cut was taken from
    stop_reason: str

    @property
    def saves(self) -> int:
        """Keystrokes saved if the text goes on with the suggestion."""
        return max(0, len(self.text) - 1)

    def to_dict(self) -> dict:
        """What `python -m core suggest --json` prints (and the Autocomplete page shows) for it."""
        return {
            "suggestion": self.text,
            "probability": self.probability,
            "shown": self.shown,
            "threshold": self.threshold,
            "threshold_tuned": self.tuned,
            "saves_keystrokes": self.saves,
            "completion": self.completion,
        }


def suggestion(
    predictor: Predictor,
    ids: Sequence[int],
    policy: SuggestionPolicy = DEFAULT_POLICY,
    *,
    best_guess: bool = False,
) -> Suggestion:
    """propose() and choose() at the policy's threshold, as text. Serving extends only while a suggestion it could
    offer may still grow (the floor is the threshold), so when nothing is offered the text is ""; best_guess=True
    extends to MIN_THRESHOLD, so that a cut not offered is returned too (shown False): the model's best guess."""
    proposal = propose(predictor, ids, policy, floor=policy.floor(best_guess))
    return suggestion_of(proposal, policy, predictor.tokenizer)


def suggestion_of(proposal: Proposal, policy: SuggestionPolicy, tok: CharTokenizer) -> Suggestion:
    """The Suggestion a proposal gives at the policy's threshold: its chosen cut, as text."""
    choice = proposal.choose(policy.threshold)
    text = tok.decode(list(choice.cut.tokens)) if choice.cut else ""
    probability = choice.cut.probability if choice.cut else 0.0
    return Suggestion(
        text,
        probability,
        choice.shown,
        policy.threshold,
        policy.tuned,
        tok.decode(list(proposal.completion)),
        proposal.stop_reason,
    )
