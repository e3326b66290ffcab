"""The model checks of the release rubric: causality, the KV cache, the plausibility of the held-out loss, and the
baselines. Each returns its verdict with the figure it measured. Shapes: B batch, T positions, L context length,
V vocabulary.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from core.agreement import agreement, allowance, model_terms
from core.i18n import N_
from core.model.corpus import Document
from core.model.engine import cache_parity
from core.model.gpt import GPT
from core.model.leak import causality_probe
from core.model.sampling import SampleConfig
from core.release.evaluation.bootstrap import MIN_DOCUMENTS
from core.release.evaluation.eval_report import Interval, MetricSet
from core.release.gate.rubric import DEFAULT_POLICY, CheckResult, ReleasePolicy, not_run
from core.release.serving.transformer_predictor import TransformerPredictor


def causality_check(model: GPT, policy: ReleasePolicy = DEFAULT_POLICY) -> CheckResult:
    """Edit every position j of seeded random sequences; the logits at positions < j must not move
    (the causality probe, in float64, within the agreement rule's allowance)."""
    probe = causality_probe(model, sequences=policy.causality_sequences, seed=policy.seed)
    a = probe.agreement
    where = (
        ""
        if probe.first_leak is None
        else (f"; editing position {probe.first_leak[0]} moved the logits at position {probe.first_leak[1]}")
    )
    return CheckResult(
        "causality",
        probe.passed,
        f"max |change| before the edit {a.max_abs_diff:.2e} (float64)",
        a.max_abs_diff,
        a.rule,
        f"every position 1..{probe.length - 1} edited x {probe.sequences} sequences of {probe.length}; "
        f"largest change at or after the edit {probe.max_change_after:.2e}{where}",
    )


def cache_checks(model: GPT, policy: ReleasePolicy = DEFAULT_POLICY) -> list[CheckResult]:
    """Greedy generation through the KV cache against the same windows recomputed without it, step by step, over more
    than one context (so across window slides): `cache_parity`, the measurement the KV-cache lesson
    shows too. The logits are decided on its float64 copy of the model (the agreement rule); the float32 difference of
    the model as served is reported as a figure only; the tokens (and generate's windows) must be identical."""
    L, V = model.config.context_length, model.config.vocab_size
    g = torch.Generator().manual_seed(policy.seed + 1)
    prefill = max(1, L // 2)
    prompt = torch.randint(0, V, (prefill,), generator=g).tolist()  # seeded random ids
    steps = cache_parity(model, prompt, L + 8, SampleConfig(temperature=0.0))
    terms = model_terms(model.config)
    cached64 = torch.stack([s.cached for s in steps])  # (N, V) float64
    decided = agreement(cached64, torch.stack([s.uncached for s in steps]), terms=terms)
    uncached32 = torch.stack([s.uncached_as_given for s in steps])  # (N, V) float32: shown only
    diff32 = float((torch.stack([s.cached_as_given for s in steps]) - uncached32).abs().max())
    shown32 = allowance(torch.float32, terms, float(uncached32.abs().max()))
    same = sum(1 for s in steps if not s.token_differs)
    first = next((s.step for s in steps if s.token_differs), None)
    windows = all(s.window_agrees for s in steps)
    slides = sum(1 for s in steps if s.reencoded)
    return [
        CheckResult(
            "cache logits",
            decided.passed,
            f"max |cached - full| {decided.max_abs_diff:.2e} (float64)",
            decided.max_abs_diff,
            decided.rule,
            f"{len(steps)} greedy steps after a {prefill}-token prompt, {slides} window slide(s), each against its "
            f"window recomputed in full; in float32 (shown, not decided) {diff32:.2e} against a float32 allowance of "
            f"{shown32:.2e}",
        ),
        CheckResult(
            "cache greedy",
            same == len(steps) and windows,
            f"{same}/{len(steps)} tokens identical",
            float(same),
            N_("all identical"),
            ("" if first is None else f"first difference at generated token {first}")
            + ("" if windows else "; generate's window differs from the sliding-window policy"),
        ),
    ]


@torch.no_grad()
def peek_check(model: GPT, ids: list[int], policy: ReleasePolicy = DEFAULT_POLICY) -> CheckResult:
    """Windowed loss (target at row r of a full window, later tokens visible) vs no-peek loss (the window
    ends just before it). The rows cycle through every row of the window, in seeded order, so a leak that
    opens only at some positions (say every fourth) is probed too."""
    L, N = model.config.context_length, len(ids)
    if N < 3:
        return not_run("plausible: no-peek", N_("the held-out stream has fewer than three tokens"))
    W = min(L, N - 1)  # window length: a full context when the stream allows
    rng = random.Random(policy.seed + 2)
    rows = [i % (W - 1) for i in range(policy.peek_positions)]  # every row 0..W-2 has a later token in its window
    rng.shuffle(rows)
    windowed: list[tuple[list[int], int, int]] = []  # (window, row, target) per position
    blind: list[tuple[list[int], int, int]] = []
    for r in rows:
        s = rng.randint(0, N - W)  # window ids[s:s+W], row r predicts ids[s+r+1]
        t = s + r + 1
        windowed.append((ids[s : s + W], r, ids[t]))
        blind.append((ids[max(0, t - L) : t], min(t, L) - 1, ids[t]))  # the window ends just before it
    mine, cut = _nll(model, windowed), _nll(model, blind)
    floor = policy.peek_ratio * cut
    return CheckResult(
        "plausible: no-peek",
        mine >= floor,
        f"windowed {mine:.4f} vs no-peek {cut:.4f} nats/char",
        mine / cut if cut > 0 else None,
        f"windowed >= {policy.peek_ratio} x no-peek = {floor:.4f}",
        f"{len(rows)} seeded held-out positions over all {W - 1} rows of a {W}-token window",
    )


def _nll(model: GPT, cases: list[tuple[list[int], int, int]]) -> float:
    """Mean -ln P(target) at row `row` of each window, windows of equal length run as one batch."""
    by_length: dict[int, list[tuple[list[int], int, int]]] = {}
    for case in cases:
        by_length.setdefault(len(case[0]), []).append(case)
    total = 0.0
    for group in by_length.values():
        for i in range(0, len(group), 64):
            batch = group[i : i + 64]
            x = torch.tensor([w for w, _, _ in batch])  # (B, T)
            logits = model(x).logits  # (B, T, V)
            rows = logits[torch.arange(len(batch)), torch.tensor([r for _, r, _ in batch])]  # (B, V)
            total += float(
                torch.nn.functional.cross_entropy(
                    rows.double(), torch.tensor([y for _, _, y in batch]), reduction="sum"
                )
            )
    return total / len(cases)


def canary_text(documents: Sequence[Document], n_chars: int, seed: int) -> str:
    """Seeded shuffles of the documents' characters, joined until n_chars long."""
    chars = list("".join(d.text for d in documents))
    if not chars:
        raise ValueError("the canary needs held-out text")
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n_chars:
        block = chars[:]
        rng.shuffle(block)
        out.extend(block)
    return "".join(out[:n_chars])


def canary_check(
    predictor: TransformerPredictor, documents: Sequence[Document], policy: ReleasePolicy = DEFAULT_POLICY
) -> CheckResult:
    """Loss on seeded shuffles of the held-out text against the entropy of its characters (one-sided)."""
    text = canary_text(documents, policy.canary_chars, policy.seed)
    ids = predictor.tokenizer.encode(text)
    nll: list[torch.Tensor] = []
    for a in range(1, len(ids), 256):
        lp = predictor.log_probs(ids, range(a, min(a + 256, len(ids))))  # (P, V)
        nll.append(-lp.gather(1, torch.tensor(ids[a : a + lp.shape[0]])[:, None])[:, 0])
    loss = float(torch.cat(nll).mean())
    counts = Counter(text[1:])
    n = sum(counts.values())
    entropy = -sum(c / n * math.log(c / n) for c in counts.values())
    floor = (1 - policy.canary_tolerance) * entropy
    return CheckResult(
        "plausible: canary",
        loss >= floor,
        f"loss {loss:.4f} on shuffled text, entropy {entropy:.4f}",
        loss,
        f">= (1 - {policy.canary_tolerance}) x entropy = {floor:.4f}",
        f"{len(text)} characters: seeded shuffles of the held-out text",
    )


# ---- against the baselines -----------------------------------------------------------------------

VS_NGRAM, BEATS_LOSS, BEATS_KEYSTROKES = "plausible: vs n-gram", "beats baselines: loss", "beats baselines: keystrokes"
BASELINE_CHECKS = (VS_NGRAM, BEATS_LOSS, BEATS_KEYSTROKES)
SHOWN_AS = {"rule": "rule", "ngram": "n-gram"}  # a baseline's kind as a sentence names it
IMPROVE = "train longer or on more text, or tune the suggestion threshold (`python -m core tune --bundle DIR`)"


@dataclass(frozen=True)
class _Figures:
    """One predictor's figures the baseline checks compare (present: checked by versus_baselines)."""

    name: str
    loss: float
    loss_ci: Interval | None
    keys: float  # net keystrokes saved per 100 characters (core.release.evaluation.utility: gross, less attention)
    keys_ci: Interval | None
    documents: int


def _figures(name: str, m: MetricSet) -> _Figures | None:
    if m.loss is None or m.net_keystrokes_saved_per_100 is None:
        return None
    return _Figures(name, m.loss, m.loss_ci, m.net_keystrokes_saved_per_100, m.net_keystrokes_saved_ci, m.documents)


def _with_ci(value: float, ci: Interval | None, digits: int) -> str:
    return f"{value:.{digits}f} " + ("[no interval]" if ci is None else f"[{ci.low:.{digits}f}, {ci.high:.{digits}f}]")


def versus_baselines(
    mine: MetricSet, baselines: Mapping[str, MetricSet], policy: ReleasePolicy = DEFAULT_POLICY, *, note: str = ""
) -> list[CheckResult]:
    """The transformer's held-out figures against each baseline's (kind -> MetricSet; "ngram" is required), all
    measured by the same code on the same documents, each predictor at its own suggestion threshold:

      plausible: vs n-gram         loss >= ngram_floor_ratio x the n-gram's loss (a leak, not skill, beats that)
      beats baselines: loss        loss below every baseline's (the better baseline's)
      beats baselines: keystrokes  the lower end of the transformer's 95% interval of NET keystrokes saved per 100
                                   characters (the decision utility: less the attention cost of every
                                   suggestion shown and not taken) above the upper end of EVERY baseline's interval
                                   (intervals that do not overlap); a missing interval (fewer than MIN_DOCUMENTS
                                   documents) fails

    With policy.require_beats_baseline False the two "beats" checks pass whatever they measure (their rule says
    so). `note` (say, that the threshold was never tuned) ends the keystrokes check's detail."""
    if "ngram" not in baselines:
        raise ValueError(f"versus_baselines needs the n-gram's figures, got {sorted(baselines)}")
    me = _figures("transformer", mine)
    them = [_figures(SHOWN_AS.get(kind, kind), m) for kind, m in baselines.items()]
    if me is None or any(f is None for f in them):
        why = N_("the held-out text gave no scored position or no typed character")
        return [not_run(name, why) for name in BASELINE_CHECKS]
    others = [f for f in them if f is not None]  # all of them, for the type checker
    ngram = others[list(baselines).index("ngram")]
    return [_floor(me, ngram, policy), _loss(me, others, policy), _keystrokes(me, others, policy, note)]


def _floor(me: _Figures, ngram: _Figures, policy: ReleasePolicy) -> CheckResult:
    floor = policy.ngram_floor_ratio * ngram.loss
    return CheckResult(
        VS_NGRAM,
        me.loss >= floor,
        f"loss {me.loss:.4f} vs n-gram {ngram.loss:.4f}",
        me.loss / ngram.loss,
        f"loss >= {policy.ngram_floor_ratio} x n-gram = {floor:.4f}",
        f"ratio {me.loss / ngram.loss:.3f}",
    )


def _required(policy: ReleasePolicy) -> str:
    return "" if policy.require_beats_baseline else " (not required by this policy)"


def _loss(me: _Figures, others: list[_Figures], policy: ReleasePolicy) -> CheckResult:
    best = min(others, key=lambda f: f.loss)
    not_lower = [f.name for f in others if f.loss <= me.loss]
    detail = (
        f"the {' and the '.join(not_lower)} predict the held-out text as well or better: train longer or on more text"
        if not_lower
        else f"{me.loss - best.loss:+.4f} nats/char against the better baseline ({best.name})"
    )
    return CheckResult(
        BEATS_LOSS,
        not not_lower or not policy.require_beats_baseline,
        f"{_with_ci(me.loss, me.loss_ci, 4)} vs "
        + ", ".join(f"{f.name} {_with_ci(f.loss, f.loss_ci, 4)}" for f in others)
        + " nats/char",
        me.loss - best.loss,
        N_("lower held-out loss than the better baseline") + _required(policy),
        detail,
    )


def _keystrokes(me: _Figures, others: list[_Figures], policy: ReleasePolicy, note: str) -> CheckResult:
    figure = (
        f"{_with_ci(me.keys, me.keys_ci, 2)} vs "
        + ", ".join(f"{f.name} {_with_ci(f.keys, f.keys_ci, 2)}" for f in others)
        + " net per 100 chars"
    )
    rule = N_(
        "95% intervals of net keystrokes saved apart: the transformer's lower end above every baseline's upper end"
    )
    tail = f"; {note}" if note else ""
    missing = [f for f in (me, *others) if f.keys_ci is None]
    if me.keys_ci is None or missing:
        return CheckResult(
            BEATS_KEYSTROKES,
            not policy.require_beats_baseline,
            figure,
            None,
            rule + _required(policy),
            f"the held-out split has too few documents for an interval ({min(f.documents for f in missing)} with "
            f"typed text; a bootstrap over documents needs at least {MIN_DOCUMENTS}): hold out more documents (a "
            f"longer text, or a larger val_fraction when training){tail}",
        )
    low = me.keys_ci.low
    margin = low - max(f.keys_ci.high for f in others if f.keys_ci is not None)  # every one: none is missing
    overlapping = [f for f in others if f.keys_ci is not None and low <= f.keys_ci.high]
    if overlapping:
        detail = "; ".join(
            f"{'lies below' if me.keys_ci.high < f.keys_ci.low else 'overlaps'} the {f.name}'s interval (the "
            f"transformer's lower end {low:.2f} <= the {f.name}'s upper end {f.keys_ci.high:.2f})"
            for f in overlapping
            if f.keys_ci is not None
        )
        detail += f": {IMPROVE}"
    else:
        detail = f"the transformer's lower end is {margin:.2f} per 100 chars above the highest baseline's upper end"
    return CheckResult(
        BEATS_KEYSTROKES,
        not overlapping or not policy.require_beats_baseline,
        figure,
        margin,
        rule + _required(policy),
        detail + tail,
    )
