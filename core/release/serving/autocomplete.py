"""Domain autocomplete with the from-scratch transformer: a text becomes a suggestion in two calls, each encoding
nothing twice:

    prompt = prompt_for(predictor, text, policy, template=template)   # encoded and cut once
    measured = suggest(predictor, prompt, policy)                      # served once, measured on the way

`prompt_for` builds the prompt (the model wing's one constructor) with the window the predictor reads before a
suggestion of the policy's longest, so what a page shows of the prompt, what telemetry records of it and what the
suggestion reads are one encoding; the predictor reads those ids as they are. `suggest` is the one serving call:
the one suggestion policy after that prompt, for any predictor, and what was measured about it (the latency, the
next character's top-1 probability and entropy, the prompt, an error). `baseline_candidates` lists the next
characters of a baseline predictor (the registry's n-gram fallback).

Shapes use the legend of `core/__init__.py`: T positions, V vocabulary size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import Tensor

from core.model.bundle import DEFAULT_PROMPT_TEMPLATE
from core.model.prompt import Prompt, encode_for_model
from core.model.sampling import NEVER_SAMPLED
from core.model.tokenizer import EOS_ID
from core.numbers import integer
from core.release.serving.candidates import Candidate
from core.release.serving.policy import Suggestion, SuggestionPolicy, propose, suggestion_of
from core.release.serving.predictor import MAX_CONTEXT, Predictor

# ---- the prompt ----------------------------------------------------------------------------------


def prompt_for(
    predictor: Predictor, text: str, policy: SuggestionPolicy | None, *, template: str = DEFAULT_PROMPT_TEMPLATE
) -> Prompt:
    """The prompt `predictor` reads before a suggestion under `policy` (None: before one next-token read): the
    template applied, cut to predictor.reads(policy.max_chars) tokens. A transformer reads its context less room
    for the suggestion; a baseline, which has no window to slide, reads the last MAX_CONTEXT tokens (no room)."""
    context_length = predictor.reads(0)
    window = predictor.reads(0 if policy is None else policy.max_chars)
    # prompt_window(L, L - w) == w for every window w the rule gives, so the prompt's window is the predictor's
    return encode_for_model(predictor.tokenizer, text, context_length, room=context_length - window, template=template)


# ---- the suggestion, as served and measured ------------------------------------------------------


@dataclass(frozen=True)
class MeasuredSuggestion:
    """One suggestion served, and what was measured about it on the way (what telemetry records of a request)."""

    predictor: str | None  # the predictor's kind: "transformer", "ngram", "rule"
    policy: SuggestionPolicy
    prompt: Prompt  # what the suggestion read: its input quality (characters typed, unseen, truncated)
    suggestion: Suggestion | None  # None when serving raised (`error`)
    latency_ms: float  # wall clock of serving alone (time.perf_counter): the proposal and the choice
    top1_prob: float | None  # max of P(next | prompt), float64: the row the suggestion's first character comes from
    entropy_nats: float | None  # -sum p ln p of the same row
    error: Exception | None = None  # what serving raised, if it did

    def suggestion_or_raise(self) -> Suggestion:
        """The suggestion; the error serving raised, raised again, when there is none."""
        if self.error is not None:
            raise self.error
        assert self.suggestion is not None
        return self.suggestion


def distribution_figures(probs: Tensor) -> tuple[float, float]:
    """(top-1 probability, entropy in nats) of one next-token distribution (V,), in float64."""
    p = probs.detach().to(torch.float64).reshape(-1)  # (V,)
    nonzero = p[p > 0]
    return float(p.max()), float(-(nonzero * nonzero.log()).sum())


def suggest(
    predictor: Predictor, prompt: Prompt, policy: SuggestionPolicy, *, best_guess: bool = False
) -> MeasuredSuggestion:
    """The one serving call: the one suggestion policy after `prompt` (prompt_for), as the page, `python -m core
    suggest` and the synthetic traffic serve it, and what was measured about it. The predictor reads prompt.ids as
    they are: the prompt was cut to its window when it was built, and is not cut again. The completion is extended
    only while what is offered may still grow; best_guess=True extends it further, so a suggestion not offered is
    returned too (the Autocomplete page shows it as the model's best guess): see policy.suggestion.

    The next character's distribution is the first (V,) float64 row the policy's greedy completion is chosen from
    (Proposal.next_probs), so measuring it costs no second forward pass. An error in serving is returned in
    `error` (suggestion None), never lost: `suggestion_or_raise()` raises it again. A prompt or policy of the wrong
    type raises ValueError at once."""
    if not isinstance(prompt, Prompt):
        raise ValueError(f"prompt must be a Prompt (prompt_for), got {type(prompt).__name__}")
    if not isinstance(policy, SuggestionPolicy):
        raise ValueError(f"policy must be a SuggestionPolicy, got {type(policy).__name__}")
    kind = getattr(predictor, "kind", None)
    began = time.perf_counter()
    try:
        proposal = propose(predictor, prompt.ids, policy, floor=policy.floor(best_guess))
        offered = suggestion_of(proposal, policy, predictor.tokenizer)
    except Exception as e:  # noqa: BLE001 - measured and returned; suggestion_or_raise raises it
        latency_ms = 1000 * (time.perf_counter() - began)
        return MeasuredSuggestion(kind, policy, prompt, None, latency_ms, None, None, e)
    latency_ms = 1000 * (time.perf_counter() - began)
    top1, entropy = (None, None) if proposal.next_probs is None else distribution_figures(proposal.next_probs)
    return MeasuredSuggestion(kind, policy, prompt, offered, latency_ms, top1, entropy)


# ---- the next characters of a baseline ---------------------------------------------------------


def baseline_candidates(predictor: Predictor, text: str, k: int = 10) -> tuple[Candidate, ...]:
    """The k most likely next characters of any Predictor (the n-gram the registry falls back to), most likely
    first; special tokens other than <eos> are never listed."""
    integer("k", k, 1)
    tok = predictor.tokenizer
    ids = list(encode_for_model(tok, text, MAX_CONTEXT).ids)  # (T,) or [<eos>] for an empty text
    # log_probs row t is the distribution of ids[t] given ids[:t]: ask for the slot after the text.
    probs = predictor.log_probs(ids + [EOS_ID], range(len(ids), len(ids) + 1))[0].exp()  # (V,)
    probs[list(NEVER_SAMPLED)] = 0.0
    top = torch.topk(probs, min(k, probs.numel() - len(NEVER_SAMPLED)))
    return tuple(Candidate(int(i), tok.display_piece(int(i)), float(p)) for p, i in zip(top.values, top.indices))
