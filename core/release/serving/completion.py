"""A streamed completion through the engine's generate, with each token's wall-clock time and position.

complete(model, tokenizer, ids, sample)   up to sample.max_new_tokens tokens after `ids`, ending before
                                          <eos>; the same seed gives the same completion
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.model.engine import generate
from core.model.gpt import GPT
from core.model.sampling import SampleConfig
from core.model.tokenizer import EOS_ID, CharTokenizer


@dataclass(frozen=True)
class Completion:
    text: str  # decoded tokens (generation never draws <pad>, <bos> or <unk>: core.model.sampling.NEVER_SAMPLED)
    tokens: tuple[int, ...]  # new ids, without a final <eos>
    per_token_seconds: tuple[float, ...]  # wall clock of each step (forward pass + sampling)
    positions: tuple[int, ...]  # index of each new token in prompt + generated tokens
    reencoded_steps: tuple[int, ...]  # steps at which the window slid (cache reset, last `keep` re-encoded)
    use_cache: bool
    stop_reason: str  # "eos" (the model ended the text) or "length" (max_new_tokens reached)


def complete(
    model: GPT,
    tokenizer: CharTokenizer,
    ids: Sequence[int],
    sample: SampleConfig,
    *,
    seed: int | None = 0,
    use_cache: bool = True,
    keep: int | None = None,
    stop_at_eos: bool = True,
) -> Completion:
    """Up to sample.max_new_tokens tokens after `ids` through the engine's generate.

    The same seed gives the same completion. With stop_at_eos the completion ends before <eos>.
    """
    tokens: list[int] = []
    seconds: list[float] = []
    positions: list[int] = []
    reencoded: list[int] = []
    stop_reason = "length"
    for step in generate(model, ids, sample, seed=seed, use_cache=use_cache, keep=keep):
        if stop_at_eos and step.token == EOS_ID:
            stop_reason = "eos"
            break
        if step.reencoded:
            reencoded.append(len(tokens))
        tokens.append(step.token)
        seconds.append(step.seconds)
        positions.append(step.position)
    return Completion(
        text=tokenizer.decode(tokens),
        tokens=tuple(tokens),
        per_token_seconds=tuple(seconds),
        positions=tuple(positions),
        reencoded_steps=tuple(reencoded),
        use_cache=use_cache,
        stop_reason=stop_reason,
    )
