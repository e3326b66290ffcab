"""Predictors written by hand for the typist and tuning tests: every row is a small table, so each test's
expected figures can be worked out on paper."""

import torch

from core.model.tokenizer import EOS_ID, CharTokenizer

TOK = CharTokenizer.from_text("ab c")


class Bigram:
    """Rows by the last character, by hand: a -> b .5, b -> ' ' .5, ' ' -> a .5 (each with c .3, <eos> .2);
    c -> <eos>. So every greedy step halves the probability, and the 5th step falls below 0.05."""

    kind = "bigram"
    tokenizer = TOK
    ROWS = {"a": {"b": 0.5, "c": 0.3}, "b": {" ": 0.5, "c": 0.3}, " ": {"a": 0.5, "c": 0.3}}

    def row(self, context):
        p = torch.zeros(TOK.vocab_size, dtype=torch.float64)
        spec = self.ROWS.get(TOK.decode(context[-1:]))
        if spec is None:
            p[EOS_ID] = 1.0
            return p
        for c, prob in spec.items():
            p[TOK.encode(c)[0]] = prob
        p[EOS_ID] = 0.2
        return p

    def log_probs(self, ids, positions):
        return torch.stack([self.row(ids[:t]).log() for t in positions])

    def continuations(self, contexts, max_new):
        lists = [list(c) for c in contexts]
        for _ in range(max_new):
            tokens = yield torch.stack([self.row(c) for c in lists])
            for c, t in zip(lists, tokens.tolist()):
                c.append(int(t))
