"""The rule baseline: word completion from a dictionary of training words.

With w the word being typed, the next character mixes the next letters of training words that extend w with the
add-k unigram, so the policy offers the rest of the most frequent extension:

    P(c|w) = lam n(w, c) / n(w) + (1 - lam) P_0(c),    lam = n(w) / (n(w) + e(w) + 1)

Shapes: P positions, V vocabulary size.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Generator, Sequence

import numpy as np
from torch import Tensor

from core.model.batches import document_stream
from core.model.corpus import Document
from core.model.tokenizer import CharTokenizer
from core.release.baselines.counts import DEFAULT_ADD_K, KeyedCounts, key_alphabet, stack_log
from core.release.serving.predictor import check_positions, continuations_by_log_probs, is_word_char

MAX_WORD_CHARS = 40  # the rule looks at most this far back for the word being typed


class RuleModel(KeyedCounts):
    kind = "rule"

    def __init__(
        self, tokenizer: CharTokenizer, words: dict[str, int], unigram: dict[str, int], *, add_k: float = DEFAULT_ADD_K
    ):
        super().__init__(tokenizer, unigram, add_k)
        self.words = words
        self.next_counts: dict[str, Counter] = {}  # prefix -> Counter(next id) over word occurrences
        self.ends: Counter = Counter()  # word -> occurrences as a whole word
        for word, c in words.items():
            self.ends[word] += c
            for i in range(len(word)):
                self.next_counts.setdefault(word[:i], Counter())[self.key_id[word[i]]] += c

    def current_word(self, ids: Sequence[int]) -> str:
        """The run of word characters just before the cursor (at most MAX_WORD_CHARS of them)."""
        tail = list(ids[-MAX_WORD_CHARS:])
        n = 0
        while n < len(tail) and tail[len(tail) - 1 - n] in self.word_id_set:
            n += 1
        return self.text(tail[len(tail) - n :])

    def distribution(self, word: str) -> np.ndarray:
        """P(next | the word being typed) over all V ids, (V,) float64."""
        nxt = self.next_counts.get(word) if word else None
        if not nxt:
            return self.p0.copy()
        n = sum(nxt.values())
        lam = n / (n + self.ends.get(word, 0) + 1)
        p = (1.0 - lam) * self.p0  # (V,)
        for i, c in nxt.items():
            p[i] += lam * c / n
        return p

    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor:
        check_positions(ids, positions)
        rows = [self.distribution(self.current_word(ids[max(0, t - MAX_WORD_CHARS) : t])) for t in positions]
        return stack_log(rows, self.V)

    def continuations(self, contexts: Sequence[Sequence[int]], max_new: int) -> Generator[Tensor, Tensor, None]:
        return continuations_by_log_probs(self, contexts, max_new, keep=MAX_WORD_CHARS)


def train_rule(documents: Sequence[Document], tokenizer: CharTokenizer, *, add_k: float = DEFAULT_ADD_K) -> RuleModel:
    """Count the training words (runs of word characters) and the token unigram."""
    keys = key_alphabet(tokenizer)
    stream = document_stream(documents, tokenizer).tolist()
    unigram = dict(Counter(keys[i] for i in stream))
    words: Counter = Counter()
    for doc in documents:
        for is_word, run in itertools.groupby(doc.text, key=is_word_char):
            if is_word:
                words["".join(run)] += 1
    known = set(tokenizer.chars)
    words = Counter({w: c for w, c in words.items() if set(w) <= known})  # a word with <unk> cannot be typed back
    return RuleModel(tokenizer, dict(words), unigram, add_k=add_k)
