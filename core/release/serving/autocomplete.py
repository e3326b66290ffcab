"""Domain autocomplete with the from-scratch transformer: what an editor offers, and where each part lives.

Everything here is built on `core.model.sampling`, so the numbers the app shows are the ones generation uses:

    prepare_prompt        text -> the ids the model sees (core.model.prompt.encode_for_model: the last
                          prompt_window(context_length, room) tokens, characters the vocabulary lacks become <unk>),
                          after the bundle's prompt template; an empty prompt starts from <eos>
                          (core.model.prompt.start_ids)
    prompt_for            the same for any predictor and a suggestion policy: the window the predictor reads before a
                          suggestion of the policy's longest (Predictor.reads), so what a page shows of the prompt, what
                          telemetry records of it and what the suggestion reads are one encoding
    suggest               the one serving call: the one suggestion policy (core.release.serving.policy) after an
                          encoded prompt, for any predictor, and what was measured about it (MeasuredSuggestion: the
                          latency, the next character's top-1 probability and entropy, the prompt, an error)
    baseline_candidates   the next characters of a baseline predictor (the registry's n-gram fallback)

and, re-exported here for the pages (one concept per module):

    core.release.serving.candidates    next_token_candidates, code_point, Candidate
    core.release.serving.completion    complete, Completion
    core.model.engine                  next_token_logits (generation's first step)

A text becomes a suggestion in two calls, each encoding nothing twice:

    prompt = prompt_for(predictor, text, policy, template=template)   # encoded once
    measured = suggest(predictor, prompt, policy)                      # served once, measured on the way

A character tokenizer maps one character to one token, so "the last N tokens" of a prompt are its
last N characters. Shapes use the legend of `core/__init__.py`: T positions, V vocabulary size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import Tensor

from core.model.bundle import DEFAULT_PROMPT_TEMPLATE, Bundle
from core.model.engine import next_token_logits
from core.model.gpt import ModelConfig
from core.model.kv_cache import prompt_window
from core.model.prompt import EncodedText, encode_for_model, start_ids
from core.model.sampling import NEVER_SAMPLED
from core.model.tokenizer import EOS_ID, CharTokenizer
from core.numbers import integer
from core.release.serving.candidates import Candidate, code_point, next_token_candidates
from core.release.serving.completion import Completion, complete
from core.release.serving.policy import Suggestion, SuggestionPolicy, propose, suggestion_of
from core.release.serving.predictor import MAX_CONTEXT, Predictor

__all__ = [
    "Candidate",
    "Completion",
    "MeasuredSuggestion",
    "Prompt",
    "Suggestion",
    "baseline_candidates",
    "code_point",
    "complete",
    "distribution_figures",
    "next_token_candidates",
    "next_token_logits",
    "prepare_prompt",
    "prompt_for",
    "suggest",
]


# ---- the prompt ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """The prompt as the model reads it: core.model.prompt.encode_for_model of the templated text."""

    text: str  # what the user typed
    model_text: str  # after the bundle's prompt template
    ids: tuple[int, ...]  # (T,) what the model sees: the last `window` tokens, or (<eos>,) if empty
    pieces: tuple[str, ...]  # (T,) each id made visible: '␣' for a space, '↵' for a newline, '<unk>', '<eos>'
    unknown_chars: tuple[str, ...]  # distinct characters of the kept text outside the vocabulary
    unseen: int  # positions of the kept text that read <unk> (each unseen character, counted where it occurs)
    n_tokens: int  # tokens of model_text before the cut
    context_length: int  # the model's context (a baseline: MAX_CONTEXT, what it is handed)
    window: int  # tokens read of it: the context less the room a suggestion needs (core.model.kv_cache.prompt_window)

    @property
    def empty(self) -> bool:
        """Nothing to encode: the model starts from <eos>, a document start (core.model.prompt.start_ids)."""
        return self.n_tokens == 0

    @property
    def truncated(self) -> bool:
        """More tokens than the window: the model does not read the start of the text."""
        return self.n_tokens > self.window

    @property
    def dropped(self) -> int:
        """Tokens (= characters) cut from the front of the prompt."""
        return max(0, self.n_tokens - self.window)


def prepare_prompt(
    source: Bundle | CharTokenizer,
    text: str,
    config: ModelConfig | None = None,
    *,
    template: str | None = None,
    room: int = 0,
) -> Prompt:
    """Encode `text` for a bundle, or for a tokenizer and the ModelConfig of its model.

    The bundle's prompt_template is applied (a tokenizer alone uses "{prompt}", or `template`), then
    core.model.prompt.encode_for_model cuts it to the window prompt_window(context_length, room): `room` 0 for one
    next-token read, a suggestion's longest for a suggestion (what TransformerPredictor.reads keeps); an empty result
    starts from <eos>.
    """
    if isinstance(source, Bundle):
        tokenizer, config = source.tokenizer, source.config
        template = source.manifest["prompt_template"] if template is None else template
    elif isinstance(source, CharTokenizer):
        tokenizer = source
        if not isinstance(config, ModelConfig):
            raise ValueError(f"with a tokenizer, pass the model's ModelConfig too, got {type(config).__name__}")
        template = DEFAULT_PROMPT_TEMPLATE if template is None else template
    else:
        raise ValueError(f"source must be a Bundle or a CharTokenizer, got {type(source).__name__}")
    window = prompt_window(config.context_length, room)  # raises ValueError for a bad room
    return _prompt(tokenizer, text, template, config.context_length, window)


def prompt_for(
    predictor: Predictor, text: str, policy: SuggestionPolicy | None, *, template: str = DEFAULT_PROMPT_TEMPLATE
) -> Prompt:
    """The prompt `predictor` reads before a suggestion under `policy` (None: before one next-token read): the
    template applied, cut to predictor.reads(policy.max_chars) tokens. For a transformer that is
    prepare_prompt(bundle, text, room=policy.max_chars); a baseline reads the last MAX_CONTEXT tokens."""
    window = predictor.reads(0 if policy is None else policy.max_chars)
    return _prompt(predictor.tokenizer, text, template, predictor.reads(0), window)


def _prompt(tokenizer: CharTokenizer, text: str, template: str, context_length: int, window: int) -> Prompt:
    """The one encoding of prepare_prompt and prompt_for: `text` templated, its last `window` tokens."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if not isinstance(template, str) or "{prompt}" not in template:
        raise ValueError(f"template must be a str containing '{{prompt}}', got {template!r}")
    model_text = template.replace("{prompt}", text)
    encoded: EncodedText = encode_for_model(tokenizer, model_text, window)  # (T,) the last `window` tokens
    ids = tuple(start_ids(encoded.ids))  # (T,) or (<eos>,) when nothing is left
    return Prompt(
        text=text,
        model_text=model_text,
        ids=ids,
        pieces=encoded.pieces if encoded.ids else tuple(tokenizer.display_piece(i) for i in ids),
        unknown_chars=encoded.unknown_chars,
        unseen=len(encoded.unknown_positions),
        n_tokens=encoded.original_length,
        context_length=context_length,
        window=window,
    )


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


def suggest(predictor: Predictor, prompt: Prompt, policy: SuggestionPolicy) -> MeasuredSuggestion:
    """The one serving call: the one suggestion policy (core.release.serving.policy) after `prompt` (prompt_for), as
    the page, `python -m core suggest` and the synthetic traffic serve it, and what was measured about it.

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
        proposal = propose(predictor, prompt.ids, policy)
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
    ids = start_ids(encode_for_model(tok, text, MAX_CONTEXT).ids)
    # log_probs row t is the distribution of ids[t] given ids[:t]: ask for the slot after the text.
    probs = predictor.log_probs(ids + [EOS_ID], range(len(ids), len(ids) + 1))[0].exp()  # (V,)
    probs[list(NEVER_SAMPLED)] = 0.0
    top = torch.topk(probs, min(k, probs.numel() - len(NEVER_SAMPLED)))
    return tuple(Candidate(int(i), tok.display_piece(int(i)), float(p)) for p, i in zip(top.values, top.indices))
