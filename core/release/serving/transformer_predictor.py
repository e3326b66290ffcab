"""The transformer behind the predictor interface (predictor.py), and loading any bundle as one.

    TransformerPredictor(model, tokenizer)   log_probs in windows of at most context_length tokens; continuation
                                             row by row from one KV cache
    load_predictor(path)                     (predictor, manifest) for a bundle directory of any kind

Shapes: P positions, T window tokens, V vocabulary size.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from core.model.bundle import BundleError
from core.model.gpt import GPT
from core.model.prompt import prompt_window
from core.model.tokenizer import CharTokenizer
from core.release.baselines.baseline_bundle import BaselineBundle, load_any
from core.release.serving.policy import policy_from_manifest
from core.release.serving.predictor import Predictor, check_positions


class TransformerPredictor:
    """A GPT and its tokenizer as a `Predictor`."""

    kind = "transformer"

    def __init__(self, model: GPT, tokenizer: CharTokenizer):
        if model.config.vocab_size != tokenizer.vocab_size:
            raise ValueError(f"model vocab_size {model.config.vocab_size} != tokenizer {tokenizer.vocab_size}")
        self.model, self.tokenizer = model.eval(), tokenizer

    @torch.no_grad()
    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor:
        """Rows for t in positions, computed in windows of at most L tokens; every row sees at least
        L // 2 + 1 tokens of context (or all of them near the start)."""
        check_positions(ids, positions)
        L = self.model.config.context_length
        step = max(1, L // 2)
        rows: list[Tensor] = []
        for c0 in range(positions.start, positions.stop, step):
            c1 = min(c0 + step, positions.stop)
            b = max(0, c1 - 1 - L)  # the window ids[b : c1 - 1] holds at most L tokens
            x = torch.tensor([list(ids[b : c1 - 1])], dtype=torch.long)  # (1, T)
            logits = self.model(x).logits[
                0, c0 - b - 1 : c1 - b - 1
            ]  # (P_chunk, V): logits at j predict ids[b + j + 1]
            rows.append(F.log_softmax(logits.double(), dim=-1))
        return torch.cat(rows) if rows else torch.empty(0, self.tokenizer.vocab_size, dtype=torch.float64)  # (P, V)

    def reads(self, max_new: int) -> int:
        """The context window of a continuation of max_new tokens: the prompt's window rule (prompt_window)."""
        return prompt_window(self.model.config.context_length, max_new)

    @torch.inference_mode()
    def continuations(self, contexts: Sequence[Sequence[int]], max_new: int) -> Generator[Tensor, Tensor, None]:
        """Rows from one KV cache per group of contexts of equal length. Each context is read as it is: at most
        self.reads(max_new) tokens (prompt_window(L, max_new)), cut to that window by whoever built it (a Prompt is,
        the typist cuts its stream), so the window never slides while tokens are appended; a longer context is
        refused, never cut a second time. A model whose context leaves less room than max_new yields fewer rows. A row
        sent -1 is finished: once half of its group is, the finished rows leave the cache and are no longer computed."""
        L = self.model.config.context_length
        if max_new < 1:
            raise ValueError(f"max_new must be >= 1, got {max_new}")
        kept = self.reads(max_new)  # context tokens the model reads
        cut = [list(c) for c in contexts]  # (B, T_b) each already cut to its window
        if any(not c for c in cut):
            raise ValueError("every context needs at least one token (an empty text starts from <eos>)")
        longest = max((len(c) for c in cut), default=0)
        if longest > kept:
            raise ValueError(
                f"a context of {longest} tokens is longer than the {kept} this model reads before {max_new} more: "
                "cut it to its window first (a Prompt is)"
            )
        max_new = min(max_new, L - kept)  # rows it can still give without sliding
        groups: dict[int, list[int]] = {}  # context length -> indices of the contexts that long
        for b, c in enumerate(cut):
            groups.setdefault(len(c), []).append(b)
        caches = {n: self.model.new_cache(len(members)) for n, members in groups.items()}
        dtype = next(self.model.parameters()).dtype  # a float64 copy keeps float64 logits (core.agreement)
        logits = torch.empty(len(cut), self.tokenizer.vocab_size, dtype=dtype)  # (B, V)
        for n, members in groups.items():
            x = torch.tensor([cut[b] for b in members], dtype=torch.long)  # (B_n, n)
            logits[members] = self.model(x, caches[n]).logits[:, -1]  # (B_n, V)
        for step in range(max(max_new, 1)):
            tokens = yield F.softmax(logits.double(), dim=-1)  # (B, V) float64
            if step + 1 >= max_new:
                break
            sent = tokens.tolist()
            for n, members in list(groups.items()):
                live = [i for i, b in enumerate(members) if sent[b] >= 0]  # -1: a finished row drops out
                if not live:
                    del groups[n], caches[n]
                    continue
                if 2 * len(live) <= len(members):  # halved: copying the live rows' cache now costs less than it saves
                    members = groups[n] = [members[i] for i in live]
                    caches[n] = caches[n].select(torch.tensor(live))  # (B_n', ...) the live rows' keys and values
                x = tokens[members].long().clamp(min=0)[:, None]  # (B_n, 1): a finished row not yet dropped reads <pad>
                logits[members] = self.model(x, caches[n]).logits[:, -1]  # (B_n, V)


def load_predictor(path: str | os.PathLike) -> tuple[Predictor, dict]:
    """(predictor, manifest) for a bundle directory of any kind; a suggestion policy that the manifest records
    and that is not valid (core.release.serving.policy.policy_from_manifest) is refused with a BundleError."""
    loaded = load_any(path)
    try:
        policy_from_manifest(loaded.manifest)
    except ValueError as e:
        raise BundleError(f"{str(path)!r}: {e}; tune it again with `python -m core tune --bundle DIR`") from None
    if isinstance(loaded, BaselineBundle):
        return loaded.predictor, loaded.manifest
    return TransformerPredictor(loaded.model, loaded.tokenizer), loaded.manifest
