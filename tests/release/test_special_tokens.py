"""No surface ever offers a special token: for random prompts (the vocabulary's characters and characters outside
it) on a tiny random GPT that prefers <pad>, <bos> and <unk>, and on an n-gram that learned <unk>, no suggestion,
completion or candidate list holds <pad>, <bos> or <unk>, and no suggestion holds <eos>."""

import pytest
from bundles import TEXT, tiny_model
from hypothesis import given, settings
from hypothesis import strategies as st

from core.model.corpus import Document
from core.model.gpt import GPT, ModelOutput
from core.model.prompt import encode_for_model
from core.model.sampling import NEVER_SAMPLED, SampleConfig
from core.model.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from core.release.baselines.ngram import train_ngram
from core.release.serving.autocomplete import baseline_candidates, prompt_for, suggest
from core.release.serving.candidates import next_token_candidates
from core.release.serving.completion import complete
from core.release.serving.policy import DEFAULT_POLICY, SuggestionPolicy, propose
from core.release.serving.transformer_predictor import TransformerPredictor

NEVER = {PAD_ID, BOS_ID, UNK_ID}
SPECIAL = NEVER | {EOS_ID}
assert NEVER == set(NEVER_SAMPLED)


class SpecialLovingGPT(GPT):
    """A GPT whose logits of <pad>, <bos>, <unk> are pushed up by 10 (first in many rows, as
    test_the_stubs_really_prefer_special_tokens checks) and of <eos> by 1."""

    def forward(self, idx, cache=None, *, return_weights=False):
        out = super().forward(idx, cache, return_weights=return_weights)
        logits = out.logits.clone()
        logits[..., sorted(NEVER)] += 10.0
        logits[..., EOS_ID] += 1.0
        return ModelOutput(logits=logits, weights=out.weights)


def _build():
    base, tok = tiny_model(seed=0, spread=40.0)
    model = SpecialLovingGPT(base.config)
    model.load_state_dict(base.state_dict())
    return model.eval(), tok


MODEL, TOK = _build()
GPT_PREDICTOR = TransformerPredictor(MODEL, TOK)
# An n-gram that saw many unknown characters: <unk> is its most likely token after most contexts.
NGRAM = train_ngram([Document("d", "é€ def é€é add(€): return é€é\n" * 6)], TOK, order=3)
PREDICTORS = (GPT_PREDICTOR, NGRAM)
OUTSIDE = "é€\t😀\r"  # characters the vocabulary lacks: <unk> on the way in
prompts = st.text(alphabet=st.sampled_from(sorted(set(TEXT)) + list(OUTSIDE)), max_size=30)


def special_rows(predictor, text):
    """(completion length, rows of the proposal's steps whose most likely token is <pad>, <bos> or <unk>)."""
    ids = list(encode_for_model(TOK, text, MODEL.config.context_length).ids)
    proposal = propose(predictor, prompt_for(predictor, text, DEFAULT_POLICY).ids)  # the window a suggestion reads
    full = ids + list(proposal.completion)
    rows = predictor.log_probs(full + [EOS_ID], range(len(ids), len(full) + 1))  # (k + 1, V): each step, the stop
    return len(proposal.completion), sum(int(i) in NEVER for i in rows.argmax(dim=-1))


@pytest.mark.numerics
def test_the_stubs_really_prefer_special_tokens():
    """The premise: on these prompts both predictors' rows often rank a never-shown token first, while the
    policy still finds completions of visible characters."""
    texts = ["def add(", "    return a", "a, b", "", "add(a", "b):\n", "ret", "é€ d", "ab é"]
    for predictor in PREDICTORS:
        found = [special_rows(predictor, t) for t in texts]
        assert sum(n for _, n in found) >= 3, found
        assert any(k > 0 and n > 0 for k, n in found), found


@settings(max_examples=30, deadline=None)
@given(text=prompts, threshold=st.sampled_from([0.05, 0.5, 0.95]))
def test_suggestions_never_hold_a_special_token(text, threshold):
    policy = SuggestionPolicy(threshold=threshold)
    for predictor in PREDICTORS:
        s = suggest(predictor, prompt_for(predictor, text, policy), policy).suggestion_or_raise()
        assert set(s.text) <= set(TOK.chars) and set(s.completion) <= set(TOK.chars)
        assert s.completion.startswith(s.text)
        proposal = propose(
            predictor, TOK.encode(text)[-predictor.reads(policy.max_chars) :], policy, floor=policy.threshold
        )
        assert not set(proposal.completion) & SPECIAL
        assert all(not set(c.tokens) & SPECIAL for c in proposal.cuts)
        # every token decodes to one character: nothing was hidden by skipping special tokens in decode
        assert len(TOK.decode(proposal.completion)) == len(proposal.completion)
        assert TOK.decode(proposal.completion) == s.completion


@settings(max_examples=30, deadline=None)
@given(
    text=prompts,
    temperature=st.sampled_from([0.0, 0.7, 1.5, 3.0]),
    seed=st.integers(0, 2**63 - 1),
)
def test_completions_and_candidates_never_hold_pad_bos_or_unk(text, temperature, seed):
    ids = encode_for_model(TOK, text, MODEL.config.context_length).ids
    sample = SampleConfig(temperature=temperature, max_new_tokens=8)
    completion = complete(MODEL, TOK, ids, sample, seed=seed)
    assert not set(completion.tokens) & SPECIAL  # <eos> is the stop, never a token of the completion
    assert len(completion.text) == len(completion.tokens) and "\ufffd" not in completion.text
    listed = next_token_candidates(MODEL, ids, sample, k=None, tokenizer=TOK)
    assert listed and not {c.id for c in listed} & NEVER
    for predictor in PREDICTORS:
        for k in (1, 5, TOK.vocab_size):
            candidates = baseline_candidates(predictor, text, k=k)
            assert 1 <= len(candidates) <= min(k, TOK.vocab_size - len(NEVER))
            assert not {c.id for c in candidates} & NEVER
            assert all(c.piece not in ("<pad>", "<bos>", "<unk>") for c in candidates)


def test_the_default_policy_is_what_is_served():
    assert DEFAULT_POLICY.max_chars < MODEL.config.context_length  # the continuation needs room in the window
