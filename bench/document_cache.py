"""What a document cache would add to the shipped code model's suggestions: an estimate for issue 37, not a path of
the lab.

The shipped model reads 104 characters before a suggestion of 24, and code names what it defined far earlier in the
file. The cache is the classic fix (Kuhn and De Mori 1990; Grave et al. 2017, "neural cache"): counts of what
followed each context earlier in the same document, here a Witten-Bell recursion whose bottom is the model's own
distribution instead of a unigram, over the last CACHE_CHARS tokens of the document:

    P_lo(w)    = P_model(w | the window)
    P_m(w | h) = (beta c(h w) + T(h) P_{m-1}(w | h')) / (beta c(h) + T(h))    for m = lo .. hi where h was seen

h the last m tokens, c(h w) how often w followed h earlier in the document, c(h) their sum, T(h) how many distinct
tokens followed h. A context the document never showed leaves the model's row as it is; a long context always
followed by the same token pulls the row towards it, more with beta. The completion's own tokens are looked up, not
counted.

    PYTHONPATH=. .venv/bin/python bench/document_cache.py [--bundle models/default] [--orders 2,24] [--beta 0.05]
    PYTHONPATH=. .venv/bin/python bench/document_cache.py --sweep

Tunes the threshold (core.release.evaluation.tuning.tune_policy, the validation side's tuning stretches) and
evaluates (evaluate_predictor: the held-out figures with bootstrap intervals and a suggestion's latency on one
thread) the model alone and the model with its cache, one after the other in one run. The cache is built from the
context of each suggestion afresh, as the typist hands it over: an editor would keep it and add a character at a
time, so its latency here is an upper bound.

--sweep prints the loss (nats per character) of the model and of the cache at a few settings on 8,000 positions
chosen with the tuning's seed, not the evaluation's: the defaults are the best of them.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Generator, Sequence

import numpy as np
import torch
from torch import Tensor

from core.model.batches import document_stream
from core.model.tokenizer import EOS_ID
from core.release.evaluation.eval_report import DEFAULT_EVAL, EvalReport
from core.release.evaluation.evaluation import evaluate_predictor
from core.release.evaluation.held_out import held_out
from core.release.evaluation.tuning import tune_policy
from core.release.evaluation.typing_sim import sample_blocks
from core.release.serving.policy import policy_from_manifest
from core.release.serving.predictor import MAX_CONTEXT, check_positions
from core.release.serving.transformer_predictor import TransformerPredictor, load_predictor

CACHE_CHARS = MAX_CONTEXT  # tokens of the document the cache counts: all a predictor is handed


class DocumentCache:
    """Counts of what followed every context of lo..hi tokens in one stretch of a document."""

    def __init__(self, lo: int, hi: int):
        self.lo, self.hi = lo, hi
        self.counts: list[dict[tuple[int, ...], dict[int, int]]] = [{} for _ in range(hi + 1)]
        self.seen: list[int] = []

    def add(self, token: int) -> None:
        """Count `token` after each of its contexts, then take it into the text."""
        s = self.seen
        for m in range(self.lo, min(self.hi, len(s)) + 1):
            following = self.counts[m].setdefault(tuple(s[len(s) - m :]), {})
            following[token] = following.get(token, 0) + 1
        s.append(token)

    def mix(self, row: np.ndarray, text: Sequence[int], beta: float) -> np.ndarray:
        """The model's row (V,) through the recursion of the module docstring, for the context ending `text`."""
        p = row.copy()  # (V,)
        for m in range(self.lo, min(self.hi, len(text)) + 1):
            following = self.counts[m].get(tuple(text[len(text) - m :]))
            if following is None:
                break  # a context never seen has no longer seen context either
            ids, c = np.fromiter(following.keys(), int), np.fromiter(following.values(), float)
            p *= len(ids)
            p[ids] += beta * c
            p /= beta * c.sum() + len(ids)
        return p


def document_cache(ids: Sequence[int], lo: int, hi: int) -> DocumentCache:
    """The cache of the tokens after the last <eos> of `ids` (the current document), at most CACHE_CHARS of them."""
    tail = list(ids[-CACHE_CHARS:])
    cache = DocumentCache(lo, hi)
    for t in tail[max((i + 1 for i, t in enumerate(tail) if t == EOS_ID), default=0) :]:
        cache.add(t)
    return cache


def mixed_rows(rows: np.ndarray, ids: Sequence[int], positions: range, lo: int, hi: int, beta: float) -> np.ndarray:
    """The model's rows (P, V) for `positions` of the stream `ids`, each mixed with the cache of its document so far."""
    cache = document_cache(ids[: positions.start - 1], lo, hi)
    out = []
    for p, t in enumerate(positions):
        if ids[t - 1] == EOS_ID:
            cache = DocumentCache(lo, hi)  # a new document starts
        else:
            cache.add(ids[t - 1])
        out.append(cache.mix(rows[p], cache.seen, beta))
    return np.stack(out)  # (P, V)


class CachedPredictor:
    """The transformer with a document cache, behind the predictor interface (core.release.serving.predictor)."""

    kind = "transformer+cache"

    def __init__(self, base: TransformerPredictor, lo: int, hi: int, beta: float):
        self.base, self.tokenizer = base, base.tokenizer
        self.lo, self.hi, self.beta = lo, hi, beta

    def reads(self, max_new: int) -> int:
        return CACHE_CHARS  # the model reads its window of these; the cache all of them

    def log_probs(self, ids: Sequence[int], positions: range) -> Tensor:
        check_positions(ids, positions)
        rows = self.base.log_probs(ids, positions).exp().numpy()  # (P, V)
        return torch.from_numpy(np.log(mixed_rows(rows, ids, positions, self.lo, self.hi, self.beta)))  # (P, V)

    def continuations(self, contexts: Sequence[Sequence[int]], max_new: int) -> Generator[Tensor, Tensor, None]:
        kept = self.base.reads(max_new)
        steps = self.base.continuations([list(c)[-kept:] for c in contexts], max_new)
        caches = [document_cache(c, self.lo, self.hi) for c in contexts]
        texts = [list(cache.seen) for cache in caches]  # the document so far, then the completion's tokens
        rows = next(steps)  # (B, V)
        while True:
            mixed = [cache.mix(rows[b].numpy(), texts[b], self.beta) for b, cache in enumerate(caches)]
            tokens = yield torch.from_numpy(np.stack(mixed))  # (B, V)
            for b, t in enumerate(tokens.tolist()):
                if t >= 0:
                    texts[b].append(int(t))
            try:
                rows = steps.send(tokens)
            except StopIteration:
                return


SWEEP = ((3, 12, 1.0), (8, 24, 1.0), (5, 16, 0.3), (8, 24, 0.1), (3, 16, 0.1), (3, 16, 0.05), (2, 24, 0.05))


def sweep(base: TransformerPredictor, documents, positions: int = 8_000) -> None:
    """The model's loss, then the cache's at each SWEEP setting, on the tuning seed's positions of `documents`."""
    ids = document_stream(documents, base.tokenizer).tolist()
    blocks = sample_blocks([(1, len(ids))], DEFAULT_EVAL.chunk, positions, DEFAULT_EVAL.seed + 1)
    rows = {a: base.log_probs(ids, range(a, b)).exp().numpy() for a, b in blocks}  # a -> (P, V)

    def loss(lo: int, hi: int, beta: float) -> float:
        nll = [
            -np.log(mixed_rows(rows[a], ids, range(a, b), lo, hi, beta)[np.arange(b - a), ids[a:b]])  # (P,)
            for a, b in blocks
        ]
        return float(np.concatenate(nll).mean())

    print(f"loss on {sum(b - a for a, b in blocks):,} positions (nats per character): model {loss(1, 0, 1.0):.4f}")
    for lo, hi, beta in SWEEP:
        print(f"  cache orders {lo}..{hi}, beta {beta:g}: {loss(lo, hi, beta):.4f}", flush=True)


def line(name: str, report: EvalReport, seconds: float) -> str:
    o, lat = report.overall, report.latency

    def ci(interval) -> str:
        return f"[{interval.low:.2f}, {interval.high:.2f}]" if interval else ""

    latency = f"p50 {lat.p50_ms:.1f} ms, p95 {lat.p95_ms:.1f} ms" if lat else "no latency"
    return (
        f"{name:<34} threshold {report.policy['threshold']:.2f}  net {o.net_keystrokes_saved_per_100:.2f} "
        f"{ci(o.net_keystrokes_saved_ci)}  acceptance {o.acceptance_rate:.3f} {ci(o.acceptance_ci)}  "
        f"loss {o.loss:.3f}  {latency}  ({seconds:.0f} s)"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default="models/default")
    parser.add_argument("--orders", default="2,24", help="lo,hi: the context lengths the cache counts")
    parser.add_argument("--beta", type=float, default=0.05, help="how far a seen context pulls the model's row")
    parser.add_argument("--skip-model", action="store_true", help="only the model with its cache")
    parser.add_argument("--sweep", action="store_true", help="only the loss at a few settings (the module docstring)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as a suggestion is served and timed
    lo, hi = (int(x) for x in args.orders.split(","))
    base, manifest = load_predictor(args.bundle)
    assert isinstance(base, TransformerPredictor), "the cache wraps a transformer bundle"
    split = held_out(manifest)
    policy = policy_from_manifest(manifest)
    if args.sweep:
        sweep(base, split.val)
        return 0
    print(f"{args.bundle}: {len(split.val)} held-out documents; the cache counts orders {lo}..{hi}, beta {args.beta}")
    predictors = {} if args.skip_model else {"model": base}
    predictors[f"model + cache ({lo}..{hi}, beta {args.beta:g})"] = CachedPredictor(base, lo, hi, args.beta)
    for name, predictor in predictors.items():
        began = time.perf_counter()
        tuned, _ = tune_policy(predictor, split.val, DEFAULT_EVAL, policy)
        report = evaluate_predictor(predictor, split.val, DEFAULT_EVAL, policy=tuned)
        print(line(name, report, time.perf_counter() - began), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
