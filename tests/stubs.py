"""Predictors and a typing trace written by hand for the typist and tuning tests: every row is a small table, so
each test's expected figures can be worked out on paper."""

import torch

from core.model.tokenizer import EOS_ID, CharTokenizer
from core.release.evaluation.typing_sim import Segment, TraceCut
from core.release.serving.predictor import MAX_CONTEXT

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

    def reads(self, max_new):
        return MAX_CONTEXT  # like a baseline: no window to slide, it reads what it is handed

    def log_probs(self, ids, positions):
        return torch.stack([self.row(ids[:t]).log() for t in positions])

    def continuations(self, contexts, max_new):
        lists = [list(c) for c in contexts]
        for _ in range(max_new):
            tokens = yield torch.stack([self.row(c) for c in lists])
            for c, t in zip(lists, tokens.tolist()):
                if t >= 0:  # -1: a finished row (its later rows are ignored)
                    c.append(int(t))


# A trace for the price of attention (core.release.evaluation.tuning, the Release page). Typing [1, 10): low-probability
# cuts at 1 and 2 are wrong, the one at 3 is right (3 saved, on at 7); 7 is likely and right (2 saved).
PRICED_TRACE = {
    1: (TraceCut(2, 0.1, False),),
    2: (TraceCut(2, 0.1, False),),
    3: (TraceCut(4, 0.1, True),),
    4: (),
    5: (),
    6: (),
    7: (TraceCut(3, 0.5, True),),
    8: (),
    9: (),
}
PRICED_SEGMENTS = [Segment(0, 1, 10)]
