"""The n-gram baseline: interpolated Witten-Bell smoothing over contexts of 0..order-1 tokens, add-k at the bottom,
so every probability is positive and each row sums to one:

    P_0(w)   = (c(w) + k) / (N + k V)
    P_m(w|h) = (c(h w) + T(h) P_{m-1}(w|h')) / (c(h) + T(h))     h the last m tokens, h' the last m-1

c(h) counts h with a following token, T(h) the distinct tokens that followed it. Shapes: P positions, V vocabulary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Sequence

import numpy as np
from torch import Tensor

from core.model.batches import document_stream
from core.model.corpus import Document
from core.model.tokenizer import CharTokenizer
from core.numbers import integer
from core.release.baselines.counts import DEFAULT_ADD_K, KeyedCounts, key_alphabet, stack_log
from core.release.serving.predictor import check_positions, continuations_by_log_probs

DEFAULT_ORDER = 5
MAX_ORDER = 12  # counting cost grows with the order; no character model here needs more


class NGramModel(KeyedCounts):
    kind = "ngram"

    def __init__(self, tokenizer: CharTokenizer, ngrams: list[dict[str, int]], *, add_k: float = DEFAULT_ADD_K):
        """`ngrams[m]` maps each (m+1)-token key string to its count in the training stream."""
        if not ngrams:
            raise ValueError("an n-gram model needs at least the unigram counts (order >= 1)")
        super().__init__(tokenizer, ngrams[0], add_k)
        self.order = len(ngrams)
        self.ngrams = ngrams
        # contexts[m]: key of an m-token context -> (next ids, their counts, c(h), T(h))
        self.contexts: list[dict[str, tuple[np.ndarray, np.ndarray, float, int]]] = [{}]
        for m in range(1, self.order):
            grouped: dict[str, list[tuple[int, int]]] = {}
            for gram, c in ngrams[m].items():
                grouped.setdefault(gram[:-1], []).append((self.key_id[gram[-1]], c))
            self.contexts.append(
                {
                    h: (
                        np.array([i for i, _ in nxt]),
                        np.array([c for _, c in nxt], dtype=float),
                        float(sum(c for _, c in nxt)),
                        len(nxt),
                    )
                    for h, nxt in grouped.items()
                }
            )

    def distribution(self, context: str) -> np.ndarray:
        """P(next | context) over all V ids, (V,) float64; `context` is a key string."""
        p = self.p0.copy()  # (V,)
        for m in range(1, self.order):
            if len(context) < m:
                break
            entry = self.contexts[m].get(context[-m:])
            if entry is None:  # a context never seen has no longer seen context either
                break
            ids, counts, total, types = entry
            p *= types
            p[ids] += counts
            p /= total + types
        return p

    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor:
        check_positions(ids, positions)
        n = self.order - 1  # context tokens used
        start = max(0, positions.start - n)
        key = self.text(ids[start : positions.stop - 1])  # every context the rows need, as one key string
        rows = [self.distribution(key[max(0, t - n) - start : t - start]) for t in positions]  # P x (V,)
        return stack_log(rows, self.V)

    def continuations(self, contexts: Sequence[Sequence[int]], max_new: int) -> Generator[Tensor, Tensor, None]:
        return continuations_by_log_probs(self, contexts, max_new, keep=max(1, self.order - 1))


def train_ngram(
    documents: Sequence[Document], tokenizer: CharTokenizer, *, order: int = DEFAULT_ORDER, add_k: float = DEFAULT_ADD_K
) -> NGramModel:
    """Count every 1..order-gram of the documents' token stream (documents joined by <eos>)."""
    integer("order", order, 1, MAX_ORDER)
    keys = key_alphabet(tokenizer)
    s = "".join(keys[i] for i in document_stream(documents, tokenizer).tolist())
    ngrams = [dict(Counter(s[i : i + m + 1] for i in range(len(s) - m))) for m in range(order)]
    return NGramModel(tokenizer, ngrams, add_k=add_k)
