"""core.release.evaluation.typing_sim: the simulated typist counted by hand on a hand-made trace, the trace of a stub
whose proposals are worked out by hand, and segments that share the typing out over every document."""

import dataclasses
import math

import numpy as np
import pytest
from stubs import TOK, Bigram

from core.model.batches import document_stream
from core.model.corpus import Document, corpus_from_text
from core.model.gpt import PRESETS
from core.model.kv_cache import KVCache
from core.model.tokenizer import EOS_ID
from core.model.train_config import TrainConfig
from core.model.training import train
from core.release.evaluation.eval_report import EvalConfig
from core.release.evaluation.tuning import tune_threshold
from core.release.evaluation.typing_sim import (
    Segment,
    TraceCut,
    simulate_typing,
    typing_segments,
    typing_shares,
    typing_trace,
)
from core.release.serving.policy import DEFAULT_POLICY, propose
from core.release.serving.predictor import MAX_CONTEXT
from core.release.serving.transformer_predictor import TransformerPredictor

# Stream positions 0..11; the typist types [1, 6) and [8, 12). Every cut: (characters, probability, matches).
TRACE = {
    1: (TraceCut(3, 0.6, True),),
    2: (TraceCut(2, 0.85, True),),
    3: (),
    4: (TraceCut(2, 0.4, True), TraceCut(4, 0.3, False)),
    5: (TraceCut(2, 0.9, False),),
    8: (TraceCut(3, 0.7, True),),
    9: (),
    10: (),
    11: (),
}
SEGMENTS = [Segment(0, 1, 6), Segment(0, 8, 12)]


def positions(flags):
    return [i for i, v in enumerate(flags.tolist()) if v]


def test_typing_at_threshold_one_half_counted_by_hand():
    # 1: 0.6 >= 0.5 and the text goes on with it: Tab, 2 keystrokes saved, 1..3 covered, on at 4.
    # 4: 0.4 and 0.3 are below 0.5: nothing shown, 4 typed. 5: 0.9 shown, the text differs: 5 typed.
    # 8: shown and accepted, 2 saved, 8..10 covered. 11: nothing.
    out = simulate_typing(TRACE, 12, SEGMENTS, 0.5)
    assert positions(out["offered"]) == [1, 5, 8]
    assert positions(out["accepted"]) == [1, 8]
    assert out["saved"].tolist() == [0, 2, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0]
    assert out["covered"].tolist() == [0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1]  # 6, 7 are not typed
    assert all(out[k].dtype == np.int64 for k in ("offered", "accepted", "saved", "covered"))
    # the default price, one keystroke: 5 was shown and not taken, so it costs one keystroke there
    assert out["net"].tolist() == [0, 2, 0, 0, 0, -1, 0, 0, 2, 0, 0, 0]


@pytest.mark.parametrize("cost", [0.0, 0.5, 2.5])
def test_the_typist_pays_the_attention_cost_for_each_suggestion_shown_and_not_taken(cost):
    """At 0.3 four suggestions are shown (1, 4, 5, 8) and two taken (1, 8: 2 keystrokes each): the wrong cuts at 4
    and 5 cost `cost` each, wherever they were shown; what the typist types and is shown does not change."""
    out = simulate_typing(TRACE, 12, SEGMENTS, 0.3, cost)
    assert out["net"][4] == out["net"][5] == -cost
    assert float(out["net"].sum()) == 4 - 2 * cost
    free = simulate_typing(TRACE, 12, SEGMENTS, 0.3, 0.0)
    assert all(np.array_equal(out[k], free[k]) for k in ("offered", "accepted", "saved", "covered"))


@pytest.mark.parametrize(
    "threshold, offered, accepted, saved",
    [
        # 0.3: at 4 both cuts clear; 0.3 * 3 = 0.9 beats 0.4 * 1: the wrong 4-character cut is shown, 5 shown too
        (0.3, [1, 4, 5, 8], [1, 8], 4),
        # 0.4: at 4 only the 2-character cut clears and is right: 1 saved, on at 6, so 5 is never reached
        (0.4, [1, 4, 8], [1, 4, 8], 5),
        # 0.8: 1 (0.6) not shown, 1 typed; at 2 (0.85) accepted, 1 saved; 5 (0.9) shown and wrong; 8 (0.7) not
        (0.8, [2, 5], [2], 1),
        (0.95, [], [], 0),
    ],
)
def test_typing_at_other_thresholds_counted_by_hand(threshold, offered, accepted, saved):
    out = simulate_typing(TRACE, 12, SEGMENTS, threshold)
    assert positions(out["offered"]) == offered and positions(out["accepted"]) == accepted
    assert int(out["saved"].sum()) == saved
    assert int(out["covered"].sum()) == 9  # every typed character, by Tab or by hand, is covered once


def test_trace_of_a_stub_worked_out_by_hand():
    text = "ab ab ac"  # stream: a b ' ' a b ' ' a c <eos>
    ids = TOK.encode(text) + [EOS_ID]
    trace = typing_trace(Bigram(), ids, [Segment(0, 1, 8)], DEFAULT_POLICY)
    # after 'a' the completion is "b ab" (.5 .25 .125 .0625), then ' ' (.03125) is rejected: cuts "b " (.25) and
    # "b ab" (.0625, the rejected ' ' ends its word); after 'b': " ab " then 'a' rejected: " ab" (.125) and
    # " ab " (.0625); after ' ': "ab a" then 'b' rejected: "ab" (.25), "ab " (.125), not "ab a" (its word goes on)
    want = {
        1: [(2, 0.25, True), (4, 0.0625, True)],  # "b ", "b ab" are what follows
        2: [(3, 0.125, True), (4, 0.0625, True)],  # " ab", " ab "
        3: [(2, 0.25, True), (3, 0.125, True)],  # "ab", "ab "
        4: [(2, 0.25, True), (4, 0.0625, False)],  # "b ", but "b ab" where the text has "b ac"
        5: [(3, 0.125, False), (4, 0.0625, False)],  # the text has " ac"
        6: [(2, 0.25, False), (3, 0.125, False)],
        7: [(2, 0.25, False), (4, 0.0625, False)],  # the text ends with "c" and <eos>
    }
    assert {i: [(c.chars, c.probability, c.matches) for c in cuts] for i, cuts in trace.items()} == want


def stream_ranges(documents):
    start, ranges = 0, []
    for doc in documents:
        ranges.append((start, start + len(doc.text)))
        start += len(doc.text) + 1  # its <eos>
    return ranges


@pytest.mark.parametrize("typing_chars, segment_chars", [(1000, 100), (600, 64), (50, 500), (20_000, 500)])
def test_segments_cover_every_document_and_about_typing_chars(typing_chars, segment_chars):
    lengths = [40, 1200, 3000, 1, 777, 2500]
    docs = [Document(f"d{i}", "x" * n) for i, n in enumerate(lengths)]
    config = EvalConfig(typing_chars=typing_chars, segment_chars=segment_chars, seed=5)
    segments = typing_segments(docs, config)
    assert typing_segments(docs, config) == segments  # seeded
    ranges = stream_ranges(docs)
    shares = typing_shares(lengths, typing_chars)
    total = 0
    for d, (a, b) in enumerate(ranges):
        mine = [s for s in segments if s.document == d]
        typable = b - max(a, 1)  # position 0 has no context
        assert mine, f"document {d} gets no typing"
        assert all(max(a, 1) <= s.start < s.stop <= b and s.stop - s.start <= segment_chars for s in mine)
        assert all(x.stop <= y.start for x, y in zip(mine, mine[1:]))  # in order, disjoint
        typed = sum(s.stop - s.start for s in mine)
        share = shares[d]
        if typable <= share:
            assert typed == typable  # a short document is typed whole
        elif share < segment_chars:
            assert typed == share  # one stretch of its share, not a whole segment
        else:
            blocks = math.ceil(share / segment_chars)
            assert len(mine) == min(blocks, math.ceil(typable / segment_chars))
            assert typed <= blocks * segment_chars
        total += typed
    assert [s.document for s in segments] == sorted(s.document for s in segments)
    all_chars = sum(b - max(a, 1) for a, b in ranges)
    # about typing_chars: at least that much (or everything), at most one segment more per document
    assert min(typing_chars, all_chars) - len(docs) * segment_chars <= total <= typing_chars + len(docs) * segment_chars


@pytest.mark.parametrize(
    "lengths, total, want",
    [
        # 20000 / 8 = 2500 each; the five shorter than that are typed whole (4742 characters), the other three
        # share 15258: ceil(15258 / 3) = 5086, then ceil(10172 / 2) = 5086, then 5086
        ([401, 600, 733, 812, 2196, 6821, 7965, 11204], 20000, [401, 600, 733, 812, 2196, 5086, 5086, 5086]),
        ([100000, 2438, 5882], 20000, [11680, 2438, 5882]),  # 6667 each; 2438 whole, then 8781, then 11680
        ([10, 10], 100, [10, 10]),  # fewer characters than asked: everything
        ([50, 50, 50], 90, [30, 30, 30]),  # all long enough: equal shares
    ],
)
def test_typing_shares_by_hand(lengths, total, want):
    assert typing_shares(lengths, total) == want


def test_segments_of_documents_whose_lengths_are_whole_segments_add_up_exactly():
    docs = [Document(f"d{i}", "y" * 1000) for i in range(1, 5)]  # the first starts at stream position 0
    segments = typing_segments(docs, EvalConfig(typing_chars=1000, segment_chars=100, seed=0))
    # share 250 -> 3 segments of 100 per document; document 0's first segment is [1, 100) if drawn
    per_doc = [sum(s.stop - s.start for s in segments if s.document == d) for d in range(4)]
    assert per_doc[1:] == [300, 300, 300] and per_doc[0] in (299, 300)


def test_many_documents_type_at_most_twice_what_was_asked():
    # 420 validation documents of 4,000 characters (a 17 MB text cut by corpus_from_text): shares of 48 characters
    docs = [Document(f"d{i}", "z" * 4000) for i in range(420)]
    typed = sum(s.stop - s.start for s in typing_segments(docs, EvalConfig(typing_chars=20_000, segment_chars=500)))
    assert 20_000 <= typed <= 40_000  # it was 420 segments of 500: 210,000
    # fewer characters asked than there are documents: the first get one each, the rest none
    segments = typing_segments(docs[:5], EvalConfig(typing_chars=2, segment_chars=500))
    assert [s.stop - s.start for s in segments] == [1, 1]


def test_no_typing_and_no_documents_give_no_segments():
    docs = [Document("d", "abc")]
    assert typing_segments(docs, EvalConfig(typing_chars=0)) == []
    assert typing_segments([], EvalConfig()) == []
    assert typing_segments(docs, EvalConfig()) == [Segment(0, 1, 3)]


@pytest.mark.numerics
def test_the_batched_typist_gives_the_trace_and_threshold_of_one_proposal_at_a_time(monkeypatch):
    # The typist proposes BATCH positions at once and drops finished rows from the KV cache; the reference proposes
    # each position alone. A briefly trained tiny model (completions of 1 to 16 characters) in float64, so batching
    # changes no probability beyond rounding.
    text = "\n\n".join(f"def add{i % 7}(a, b):\n    return a + b * {i % 5}\n" for i in range(40))
    corpus = corpus_from_text("t.py", text)
    cfg = TrainConfig(batch_size=8, max_iters=60, warmup_iters=5, eval_interval=60, eval_iters=1, learning_rate=1e-2)
    result = train(PRESETS["tiny"], dataclasses.replace(cfg, num_threads=1), corpus)
    predictor = TransformerPredictor(result.model.double(), result.tokenizer)
    docs = list(corpus.documents[:12])
    tok = result.tokenizer
    ids = document_stream(docs, tok).tolist()
    segments = typing_segments(docs, EvalConfig(typing_chars=300, segment_chars=60, seed=1))
    selected = []
    select = KVCache.select
    monkeypatch.setattr(KVCache, "select", lambda cache, rows: selected.append(len(rows)) or select(cache, rows))
    trace = typing_trace(predictor, ids, segments, DEFAULT_POLICY)
    assert selected, "no row finished early: the test would not exercise the cache's selection"
    kept = min(MAX_CONTEXT, predictor.reads(DEFAULT_POLICY.max_chars))
    reference = {}
    for seg in segments:
        for i in range(seg.start, seg.stop):
            cuts = propose(predictor, ids[max(0, i - kept) : i], DEFAULT_POLICY).cuts
            reference[i] = tuple(
                TraceCut(c.chars, c.probability, list(ids[i : i + c.chars]) == list(c.tokens)) for c in cuts
            )
    assert trace.keys() == reference.keys() and sum(len(c) for c in trace.values()) > 0
    for i, cuts in trace.items():
        assert [(c.chars, c.matches) for c in cuts] == [(c.chars, c.matches) for c in reference[i]]
        assert [c.probability for c in cuts] == pytest.approx([c.probability for c in reference[i]], rel=1e-12)
    assert tune_threshold(trace, len(ids), segments) == tune_threshold(reference, len(ids), segments)
