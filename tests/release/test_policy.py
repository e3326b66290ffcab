"""core.release.serving.policy: the greedy completion, its cuts and the choice, against stubs whose rows are written
out by hand (every probability below is a product worked out here), the batch against one by one, and the
refusal of bad policy records."""

import math

import pytest
import torch
from bundles import tiny_model
from hypothesis import given
from hypothesis import strategies as st

from core.agreement import allowance, float64_copy, model_terms
from core.model.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, CharTokenizer
from core.release.evaluation.utility import DEFAULT_ATTENTION_COST
from core.release.serving.policy import (
    DEFAULT_POLICY,
    MIN_THRESHOLD,
    Cut,
    Proposal,
    SuggestionPolicy,
    policy_from_manifest,
    propose,
    propose_all,
    suggestion,
)
from core.release.serving.transformer_predictor import TransformerPredictor

TOK = CharTokenizer.from_text("x = return self\n(): abcdefy")
V = TOK.vocab_size
SPECIAL = {PAD_ID, BOS_ID, EOS_ID, UNK_ID}


def ids(text):
    return TOK.encode(text)


class TableStub:
    """A Predictor whose rows are written by hand: after a text ending with a key of `table` (the longest
    such key wins) the next token has the probabilities the key maps to (characters or special ids, summing
    to one; every other token 0); after any other text, `default`. Its own continuations, no shared helper."""

    kind = "stub"

    def __init__(self, table, default=None):
        self.tokenizer = TOK
        self.table = table
        self.default = {EOS_ID: 1.0} if default is None else default
        self.contexts = []

    def row(self, context):
        text = TOK.decode(context)  # special tokens skipped: an empty context is (<eos>,)
        keys = [k for k in self.table if text.endswith(k)]
        spec = self.table[max(keys, key=len)] if keys else self.default
        p = torch.zeros(V, dtype=torch.float64)
        for token, prob in spec.items():
            p[token if isinstance(token, int) else TOK.encode(token)[0]] = prob
        assert math.isclose(float(p.sum()), 1.0, abs_tol=1e-12), spec
        return p

    def log_probs(self, ids, positions):
        return torch.stack([self.row(ids[:t]).log() for t in positions])

    def continuations(self, contexts, max_new):
        lists = [list(c) for c in contexts]
        self.contexts.append([list(c) for c in contexts])
        for _ in range(max_new):
            tokens = yield torch.stack([self.row(c) for c in lists])  # (B, V)
            for c, t in zip(lists, tokens.tolist()):
                if t >= 0:  # -1: a finished row (its later rows are ignored)
                    c.append(int(t))


# "x = ret" goes on as "urn self\n", then the document ends (the default row puts everything on <eos>).
RETURN = {
    "ret": {"u": 0.9, "a": 0.1},
    "retu": {"r": 0.8, "x": 0.2},
    "retur": {"n": 0.9, "x": 0.1},
    "return": {" ": 0.7, "\n": 0.3},
    "return ": {"s": 0.6, "x": 0.4},
    "return s": {"e": 0.9, EOS_ID: 0.1},
    "return se": {"l": 0.9, "f": 0.1},
    "return sel": {"f": 0.9, "d": 0.1},
    "return self": {"\n": 0.6, " ": 0.4},
}
# P(prefix) by hand: u .9, ur .72, urn .648, "urn " .4536, s .27216, e .244944, l .2204496, f .19840464,
# "\n" .119042784
BY_HAND = (0.9, 0.72, 0.648, 0.4536, 0.27216, 0.244944, 0.2204496, 0.19840464, 0.119042784)


def test_greedy_completion_and_its_cut_probabilities_by_hand():
    proposal = propose(TableStub(RETURN), ids("x = ret"))
    assert TOK.decode(proposal.completion) == "urn self\n"
    assert proposal.stop_reason == "end of document"
    assert proposal.probabilities == pytest.approx(BY_HAND, rel=1e-12)
    # Allowed cuts: "urn" (a word ends), "urn " (the spaces end), "urn self" (the word ends before "\n"),
    # "urn self\n" (after a newline, and the document ends there). Never "u", "ur", "urn s", ...
    assert [(TOK.decode(c.tokens), c.probability) for c in proposal.cuts] == [
        ("urn", pytest.approx(0.648, rel=1e-12)),
        ("urn ", pytest.approx(0.4536, rel=1e-12)),
        ("urn self", pytest.approx(0.19840464, rel=1e-12)),
        ("urn self\n", pytest.approx(0.119042784, rel=1e-12)),
    ]


@pytest.mark.parametrize(
    "threshold, want, shown",
    [
        # P * (k - 1): "urn" 1.296, "urn " 1.3608, "urn self" 1.38883248, "urn self\n" 0.952227
        (0.1, "urn self", True),  # every cut clears: the largest expected saving
        (0.119042784, "urn self", True),  # a probability equal to the threshold clears it
        (0.2, "urn ", True),  # "urn self" (0.198) no longer clears
        (0.5, "urn", True),  # only "urn" (0.648) clears
        (0.648, "urn", True),
        (0.7, "urn self", False),  # none clears: not shown, the best cut of all is reported
    ],
)
def test_choose_takes_the_largest_expected_saving_among_confident_cuts(threshold, want, shown):
    choice = propose(TableStub(RETURN), ids("x = ret")).choose(threshold)
    assert TOK.decode(choice.cut.tokens) == want and choice.shown is shown


def test_suggestion_reports_the_choice_at_the_policys_threshold():
    s = suggestion(TableStub(RETURN), ids("x = ret"), SuggestionPolicy(threshold=0.4), best_guess=True)
    assert (s.text, s.shown, s.saves, s.completion, s.stop_reason) == ("urn ", True, 3, "urn self\n", "end of document")
    assert s.probability == pytest.approx(0.4536, rel=1e-12) and (s.threshold, s.tuned) == (0.4, False)
    hidden = suggestion(
        TableStub(RETURN), ids("x = ret"), SuggestionPolicy(threshold=0.95, tuned=True), best_guess=True
    )
    assert (hidden.text, hidden.shown, hidden.tuned) == ("urn self", False, True)


def test_served_the_completion_stops_below_the_threshold_and_nothing_offered_is_empty():
    # threshold .4: "urn " (.4536) clears, then "s" takes it to .27216 < .4, so serving stops there
    s = suggestion(TableStub(RETURN), ids("x = ret"), SuggestionPolicy(threshold=0.4))
    assert (s.text, s.shown, s.completion, s.stop_reason) == ("urn ", True, "urn ", "unlikely")
    # threshold .95: the first character ("u", .9) is already below it: no step beyond the first row, no text
    hidden = suggestion(TableStub(RETURN), ids("x = ret"), SuggestionPolicy(threshold=0.95))
    assert (hidden.text, hidden.shown, hidden.probability, hidden.completion) == ("", False, 0.0, "")


@pytest.mark.parametrize("threshold", [MIN_THRESHOLD, 0.1, 0.2, 0.25, 0.4536, 0.5, 0.6, 0.648, 0.7, 0.9, 1.0])
def test_served_offers_what_the_full_completion_offers_at_every_threshold(threshold):
    """The reference is the completion extended to MIN_THRESHOLD: what it offers, serving offers; where it offers
    nothing, serving returns no text; serving's completion is a prefix of the full one (never more steps)."""
    stub = TableStub({**RETURN, **ALTERNATE, **WORDY})
    policy = SuggestionPolicy(threshold=threshold)
    for context in [ids("x = ret"), ids("= x"), ids("= a"), ids("return "), ids("x = retu"), []]:
        full = suggestion(stub, context, policy, best_guess=True)
        served = suggestion(stub, context, policy)
        assert full.completion.startswith(served.completion)
        if full.shown:
            assert (served.text, served.probability, served.shown) == (full.text, full.probability, True)
        else:
            assert (served.text, served.probability, served.shown) == ("", 0.0, False)


def test_a_floor_outside_min_threshold_to_one_is_refused():
    for floor in (0.0, 0.01, 1.5, True, "0.5"):
        with pytest.raises(ValueError, match="floor"):
            propose(TableStub(RETURN), ids("x = ret"), floor=floor)


# After "x" a space (.5), after a space "x" (.5); the rest of each row on "y" (.3) and <eos> (.2).
ALTERNATE = {"x": {" ": 0.5, "y": 0.3, EOS_ID: 0.2}, " ": {"x": 0.5, "y": 0.3, EOS_ID: 0.2}}


def test_extending_stops_below_min_threshold_and_the_rejected_character_decides_the_last_cut():
    proposal = propose(TableStub(ALTERNATE), ids("= x"))
    # .5, .25, .125, .0625, then .03125 < MIN_THRESHOLD = .05: the fifth character is not appended
    assert MIN_THRESHOLD == 0.05
    assert TOK.decode(proposal.completion) == " x x" and proposal.stop_reason == "unlikely"
    assert proposal.probabilities == (0.5, 0.25, 0.125, 0.0625)
    # " x": the word "x" starts after the space; " x x" ends a word, since the rejected fifth character is " "
    assert [(TOK.decode(c.tokens), c.probability) for c in proposal.cuts] == [
        (" x", 0.25),
        (" x ", 0.125),
        (" x x", 0.0625),
    ]


# After "a" or "b": "b" .55, "a" .2, "y" .15, <eos> .1
WORDY = {"a": {"a": 0.2, "y": 0.15, "b": 0.55, EOS_ID: 0.1}, "b": {"a": 0.2, "y": 0.15, "b": 0.55, EOS_ID: 0.1}}


def test_where_the_rejected_character_goes_on_with_the_word_the_end_is_no_cut():
    proposal = propose(TableStub(WORDY), ids("= a"))
    # "b" .55, .3025, .166375, .09150625, .0503284375, then .027680640625 < .05: the sixth "b" is rejected
    assert TOK.decode(proposal.completion) == "bbbbb" and proposal.stop_reason == "unlikely"
    assert proposal.cuts == ()  # the rejected sixth character is "b": the word is not finished anywhere


@pytest.mark.parametrize(
    "min_chars, want",
    [(1, [" ", " x", " x ", " x x"]), (2, [" x", " x ", " x x"]), (3, [" x ", " x x"]), (4, [" x x"]), (5, [])],
)
def test_no_cut_is_shorter_than_min_chars(min_chars, want):
    policy = SuggestionPolicy(min_chars=min_chars)
    proposal = propose(TableStub(ALTERNATE), ids("= x"), policy)
    assert [TOK.decode(c.tokens) for c in proposal.cuts] == want
    assert all(c.chars >= min_chars for c in proposal.cuts)


def test_max_chars_limits_the_completion():
    table = {"a": {"b": 1.0}, "b": {"c": 1.0}, "c": {" ": 1.0}, " ": {"a": 1.0}}
    proposal = propose(TableStub(table), ids("a"), SuggestionPolicy(max_chars=6))
    assert TOK.decode(proposal.completion) == "bc abc" and proposal.stop_reason == "limit"
    assert [TOK.decode(c.tokens) for c in proposal.cuts] == ["bc", "bc "]  # "bc abc" ends unfinished
    assert proposal.probabilities == (1.0,) * 6


def test_special_tokens_are_never_in_a_completion_and_eos_ends_it():
    # <unk> is the most likely token of every row, <pad> and <bos> above most characters; <eos> ends the
    # document only when it beats every *visible* token ("a" at .3 beats it, "b" at .15 does not).
    table = {
        "=": {UNK_ID: 0.4, "a": 0.3, PAD_ID: 0.1, BOS_ID: 0.05, EOS_ID: 0.15},
        "a": {UNK_ID: 0.3, PAD_ID: 0.25, "b": 0.15, BOS_ID: 0.1, EOS_ID: 0.2},
    }
    proposal = propose(TableStub(table), ids("x ="))
    assert TOK.decode(proposal.completion) == "a" and proposal.stop_reason == "end of document"
    assert proposal.probabilities == (0.3,) and proposal.cuts == ()  # one character: shorter than min_chars
    # <pad> most likely everywhere, visible tokens tied: the lowest id wins, and the product falls away
    flat = {c: 0.08 for c in "xy"}
    stub = TableStub({}, default={PAD_ID: 0.64, BOS_ID: 0.2, **flat})
    proposal = propose(stub, ids("x"))
    assert proposal.completion == (min(ids("x")[0], ids("y")[0]),) and proposal.stop_reason == "unlikely"
    assert not set(proposal.completion) & SPECIAL


def test_eos_most_likely_at_once_gives_an_empty_completion_and_nothing_to_show():
    proposal = propose(TableStub({}), ids("x ="))
    assert (proposal.completion, proposal.cuts, proposal.stop_reason) == ((), (), "end of document")
    s = suggestion(TableStub({}), ids("x ="))
    assert (s.text, s.probability, s.shown, s.completion) == ("", 0.0, False, "")


def test_an_empty_context_starts_from_eos():
    stub = TableStub({}, default={"x": 0.9, "y": 0.1})
    propose(stub, [], SuggestionPolicy(max_chars=2))
    assert stub.contexts == [[[EOS_ID]]]


def test_choose_breaks_ties_towards_the_shorter_cut():
    a, b, c, d, e = ids("abcde")
    # expected savings: .5 * 2 = 1 and .25 * 4 = 1 (exact in binary): a tie, the shorter wins
    proposal = Proposal(
        (a, b, c, d, e), (0.9, 0.6, 0.5, 0.3, 0.25), (Cut((a, b, c), 0.5), Cut((a, b, c, d, e), 0.25)), ""
    )
    assert proposal.choose(0.2).cut.chars == 3 and proposal.choose(0.2).shown
    assert proposal.choose(0.5).cut.chars == 3
    assert proposal.choose(0.6) == proposal.choose(0.9) and not proposal.choose(0.6).shown
    assert Proposal((), (), (), "end of document").choose(0.05).cut is None


cuts_strategy = st.lists(
    st.tuples(st.integers(2, 24), st.floats(MIN_THRESHOLD, 1.0)), max_size=8, unique_by=lambda c: c[0]
).map(lambda cs: tuple(Cut(tuple([4] * k), p) for k, p in sorted(cs)))


@given(cuts=cuts_strategy, threshold=st.floats(MIN_THRESHOLD, 1.0))
def test_choose_equals_a_brute_force_search(cuts, threshold):
    """Reference: look at every cut, keep the best by hand-written comparison."""
    best, best_shown = None, False
    for cut in cuts:
        shown = cut.probability >= threshold
        value = cut.probability * (len(cut.tokens) - 1)
        if best is None or (shown and not best_shown):
            best, best_shown = cut, shown
            continue
        if shown != best_shown:
            continue
        best_value = best.probability * (len(best.tokens) - 1)
        if value > best_value or (value == best_value and len(cut.tokens) < len(best.tokens)):
            best = cut
    choice = Proposal((), (), cuts, "limit").choose(threshold)
    assert (choice.cut, choice.shown) == (best, best_shown)


# ---- a batch against one by one ------------------------------------------------------------------


def test_propose_all_equals_propose_one_by_one_on_stubs():
    stub = TableStub({**RETURN, **ALTERNATE})
    contexts = [ids("x = ret"), ids("= x"), [], ids("x = re"), ids("return s"), ids("x")]
    assert propose_all(stub, contexts) == [propose(stub, c) for c in contexts]
    assert propose_all(stub, []) == []


PROMPTS = ["def add(", "    return a", "def", "a, b", "", "add(a, b):\n", "(a", "b):"]  # lengths repeat: shared caches


def _contexts(tok):
    return [tok.encode(p) for p in PROMPTS]


@pytest.mark.numerics
def test_propose_all_on_a_float64_gpt_equals_propose_one_by_one():
    """In float64 the batch and the single context differ by summation order only (~1e-15 relative)."""
    model, tok = tiny_model(seed=0, spread=40.0)
    predictor = TransformerPredictor(float64_copy(model), tok)
    batch = propose_all(predictor, _contexts(tok))
    single = [propose(predictor, c) for c in _contexts(tok)]
    assert sum(len(p.completion) for p in batch) >= 20  # not empty completions everywhere
    assert sum(len(p.cuts) for p in batch) >= 5
    for b, s in zip(batch, single):
        assert (b.completion, b.stop_reason) == (s.completion, s.stop_reason)
        assert b.probabilities == pytest.approx(s.probabilities, rel=1e-9, abs=0)
        assert [c.tokens for c in b.cuts] == [c.tokens for c in s.cuts]


@pytest.mark.numerics
def test_propose_all_on_a_float32_gpt_agrees_within_float32_rounding():
    """float32: the same completions where no step is a near-tie (checked), probabilities within the float32
    allowance of core.agreement: each logit within allowance(float32, terms, max |logit|), so each softmax
    probability within a relative 2 x that and a product of k of them within 2 k x that."""
    model, tok = tiny_model(seed=0, spread=40.0)
    predictor = TransformerPredictor(model, tok)
    batch = propose_all(predictor, _contexts(tok))
    L, n = model.config.context_length, DEFAULT_POLICY.max_chars
    for context, b in zip(_contexts(tok), batch):
        s = propose(predictor, context)
        kept = max(L - n, L // 2, 1)  # the continuation reads the last max(L - n, L // 2) tokens
        full = (list(context) or [EOS_ID])[-kept:] + list(s.completion)
        with torch.no_grad():
            logits = model(torch.tensor([full])).logits[0].double()  # (T, V) one uncached pass
        steps = logits[len(full) - len(s.completion) - 1 :][: len(s.completion)]  # (k, V) the rows that chose
        step_allowance = allowance(
            torch.float32, model_terms(model.config), float(steps.abs().max()) if len(steps) else 1.0
        )
        visible = steps[:, len(SPECIAL) :].sort(dim=-1, descending=True).values  # (k, V - 4)
        assert bool((visible[:, 0] - visible[:, 1] > 4 * step_allowance).all()), "a near-tie: pick other prompts"
        assert bool((visible[:, 0] - steps[:, EOS_ID] > 4 * step_allowance).all())
        assert (b.completion, b.stop_reason) == (s.completion, s.stop_reason)
        # the probabilities are products of the uncached pass's softmax rows (an independent computation)
        probs = torch.softmax(steps, dim=-1)  # (k, V)
        by_hand = 1.0
        for k, (token, pb, ps) in enumerate(zip(s.completion, b.probabilities, s.probabilities), start=1):
            by_hand *= float(probs[k - 1, token])
            tolerance = 2 * k * step_allowance * by_hand
            assert abs(pb - by_hand) <= tolerance and abs(ps - by_hand) <= tolerance


# ---- records -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(threshold=0.01), "threshold must lie in 0.05..1"),
        (dict(threshold=1.5), "threshold must lie in 0.05..1"),
        (dict(threshold=float("nan")), "threshold must lie"),
        (dict(threshold=True), "threshold must be a number"),
        (dict(threshold="0.5"), "threshold must be a number"),
        (dict(max_chars=0), "max_chars must be an integer in 1..256"),
        (dict(max_chars=True), "max_chars must be an integer"),
        (dict(min_chars=2.0), "min_chars must be an integer"),
        (dict(min_chars=5, max_chars=4), "min_chars (5) must not exceed max_chars (4)"),
        (dict(version=2), "version 2 is not 1"),
        (dict(version=True), "version True is not 1"),
        (dict(version="1"), "version '1' is not 1"),
        (dict(tuned=1), "tuned must be true or false"),
        (dict(attention_cost=-0.5), "attention_cost must lie in 0..100"),
        (dict(attention_cost=float("nan")), "attention_cost must be a number"),
        (dict(attention_cost="1"), "attention_cost must be a number"),
        (dict(attention_cost=True), "attention_cost must be a number"),
    ],
)
def test_bad_policies_are_refused_naming_the_field(kwargs, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        SuggestionPolicy(**kwargs)


def test_policy_from_manifest_reads_the_record_and_defaults_when_there_is_none():
    record = {"version": 1, "threshold": 0.35, "max_chars": 20, "min_chars": 3, "tuned": True}
    policy = policy_from_manifest({"generation": {"temperature": 1.0, "suggestion": record}})
    assert (policy.threshold, policy.max_chars, policy.min_chars, policy.tuned) == (0.35, 20, 3, True)
    # a record from before the price of attention reads the default price, and writes it from then on
    assert policy.to_dict() == {**record, "attention_cost": DEFAULT_ATTENTION_COST}
    priced = policy_from_manifest({"generation": {"suggestion": {**record, "attention_cost": 2}}})
    assert priced.attention_cost == 2.0 and priced.to_dict()["attention_cost"] == 2.0
    for manifest in ({}, {"generation": {}}, {"generation": None}, {"generation": {"suggestion": None}}):
        assert policy_from_manifest(manifest) == DEFAULT_POLICY
    assert (DEFAULT_POLICY.threshold, DEFAULT_POLICY.tuned) == (0.5, False)
    assert policy_from_manifest({"generation": {"suggestion": {"threshold": 0.2}}}).threshold == 0.2


@pytest.mark.parametrize(
    "record, words",
    [
        ({"threshold": 2.0}, "generation.suggestion: threshold must lie in 0.05..1, got 2.0"),
        ({"threshold": 0.0}, "generation.suggestion: threshold must lie"),
        ({"threshold": True}, "generation.suggestion: threshold must be a number"),
        ({"threshold": None}, "generation.suggestion: threshold must be a number"),
        ({"threshold": 0.5, "version": 2}, "generation.suggestion: suggestion policy version 2 is not 1"),
        ({"threshold": 0.5, "tuned": "yes"}, "generation.suggestion: tuned must be true or false"),
        ({"threshold": 0.5, "max_chars": False}, "generation.suggestion: max_chars must be an integer"),
        ({"threshold": 0.5, "attention_cost": 1e9}, "generation.suggestion: attention_cost must lie in 0..100"),
        ({"threshold": 0.5, "cutoff": 0.2}, "generation.suggestion must be an object with version, threshold"),
        (0.5, "generation.suggestion must be an object"),
        (["threshold", 0.5], "generation.suggestion must be an object"),
    ],
)
def test_policy_from_manifest_refuses_bad_records_naming_the_field(record, words):
    with pytest.raises(ValueError) as err:
        policy_from_manifest({"generation": {"suggestion": record}})
    assert words in str(err.value)


def test_a_generation_that_is_not_an_object_is_refused():
    with pytest.raises(ValueError, match="generation must be an object"):
        policy_from_manifest({"generation": ["suggestion"]})
