"""Domain autocomplete with the from-scratch transformer: what an editor offers, and where each part lives.

Everything here is built on `core.model.sampling`, so the numbers the app shows are the ones generation uses:

    prepare_prompt        text -> the ids the model sees (core.model.prompt.encode_for_model: the last
                          context_length tokens, characters the vocabulary lacks become <unk>), after the
                          bundle's prompt template; an empty prompt starts from <eos> (core.model.sampling.start_ids)
    serve_suggestion      the one suggestion policy (core.release.serving.policy) after a text, for any predictor:
                          the offer, its probability, whether it clears the threshold
    baseline_candidates   the next characters of a baseline predictor (the registry's n-gram fallback)

and, re-exported here for the pages (one concept per module):

    core.release.serving.candidates    next_token_candidates, code_point, Candidate
    core.release.serving.completion    complete, Completion
    core.model.forward                 next_token_logits (generation's first step)

A character tokenizer maps one character to one token, so "the last N tokens" of a prompt are its
last N characters. Shapes use the legend of `core/__init__.py`: T positions, V vocabulary size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core.model.bundle import DEFAULT_PROMPT_TEMPLATE, Bundle
from core.model.forward import next_token_logits
from core.model.gpt import ModelConfig
from core.model.prompt import encode_for_model
from core.model.sampling import NEVER_SAMPLED, start_ids
from core.model.tokenizer import EOS_ID, CharTokenizer
from core.release.evaluation.typing_sim import MAX_CONTEXT
from core.release.serving.candidates import Candidate, code_point, next_token_candidates
from core.release.serving.completion import Completion, complete
from core.release.serving.policy import Suggestion, SuggestionPolicy, suggestion
from core.release.serving.predictor import Predictor

__all__ = [
    "Candidate",
    "Completion",
    "Prompt",
    "Suggestion",
    "baseline_candidates",
    "code_point",
    "complete",
    "next_token_candidates",
    "next_token_logits",
    "prepare_prompt",
    "serve_suggestion",
]


# ---- the prompt ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """The prompt as the model reads it: core.model.prompt.encode_for_model of the templated text."""

    text: str  # what the user typed
    model_text: str  # after the bundle's prompt template
    ids: tuple[int, ...]  # (T,) what the model sees: the last context_length tokens, or (<eos>,) if empty
    pieces: tuple[str, ...]  # (T,) each id made visible: '␣' for a space, '↵' for a newline, '<unk>', '<eos>'
    unknown_chars: tuple[str, ...]  # distinct characters of the kept text outside the vocabulary
    n_tokens: int  # tokens of model_text before the cut
    context_length: int

    @property
    def empty(self) -> bool:
        """Nothing to encode: the model starts from <eos>, a document start (core.model.sampling.start_ids)."""
        return self.n_tokens == 0

    @property
    def truncated(self) -> bool:
        return self.n_tokens > self.context_length

    @property
    def dropped(self) -> int:
        """Tokens (= characters) cut from the front of the prompt."""
        return max(0, self.n_tokens - self.context_length)


def prepare_prompt(
    source: Bundle | CharTokenizer, text: str, config: ModelConfig | None = None, *, template: str | None = None
) -> Prompt:
    """Encode `text` for a bundle, or for a tokenizer and the ModelConfig of its model.

    The bundle's prompt_template is applied (a tokenizer alone uses "{prompt}", or `template`), then
    core.model.prompt.encode_for_model cuts it to the context; an empty result starts from <eos>.
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
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if not isinstance(template, str) or "{prompt}" not in template:
        raise ValueError(f"template must be a str containing '{{prompt}}', got {template!r}")
    model_text = template.replace("{prompt}", text)
    encoded = encode_for_model(tokenizer, model_text, config.context_length)  # (T,) the last L tokens
    ids = tuple(start_ids(encoded.ids))  # (T,) or (<eos>,) when nothing is left
    return Prompt(
        text=text,
        model_text=model_text,
        ids=ids,
        pieces=encoded.pieces if encoded.ids else tuple(tokenizer.display_piece(i) for i in ids),
        unknown_chars=encoded.unknown_chars,
        n_tokens=encoded.original_length,
        context_length=encoded.context_length,
    )


# ---- the suggestion, as served ------------------------------------------------------------------


def serve_suggestion(
    predictor: Predictor, text: str, policy: SuggestionPolicy, *, template: str = DEFAULT_PROMPT_TEMPLATE
) -> Suggestion:
    """The one suggestion policy (core.release.serving.policy) after `text`, as the page and `python -m core suggest`
    show it: the prompt template applied, characters the vocabulary lacks read as <unk>, the last MAX_CONTEXT
    tokens kept (each predictor reads what it can of them, exactly as in the evaluation's typist)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if not isinstance(template, str) or "{prompt}" not in template:
        raise ValueError(f"template must be a str containing '{{prompt}}', got {template!r}")
    encoded = encode_for_model(predictor.tokenizer, template.replace("{prompt}", text), MAX_CONTEXT)  # (T,)
    return suggestion(predictor, encoded.ids, policy)


# ---- the next characters of a baseline ---------------------------------------------------------


def baseline_candidates(predictor: Predictor, text: str, k: int = 10) -> tuple[Candidate, ...]:
    """The k most likely next characters of any Predictor (the n-gram the registry falls back to), most likely
    first; special tokens other than <eos> are never listed."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    tok = predictor.tokenizer
    ids = start_ids(encode_for_model(tok, text, MAX_CONTEXT).ids)
    # log_probs row t is the distribution of ids[t] given ids[:t]: ask for the slot after the text.
    probs = predictor.log_probs(ids + [EOS_ID], range(len(ids), len(ids) + 1))[0].exp()  # (V,)
    probs[list(NEVER_SAMPLED)] = 0.0
    top = torch.topk(probs, min(k, probs.numel() - len(NEVER_SAMPLED)))
    return tuple(Candidate(int(i), tok.display_piece(int(i)), float(p)) for p, i in zip(top.values, top.indices))
