"""The release gate: a leak detector and a production rubric, each check with its measured figure.

`check_release(bundle_dir)` runs, on a transformer bundle:

  integrity        verify_bundle finds no problem (hashes, fields, tensor names, shapes, finiteness)
  marked safe      the manifest's `safe` flag (a model trained without the mask is saved unsafe)
  causality        core.model.leak.causality_probe: token j of seeded random sequences is edited, for EVERY
                   position j, and no logit at a position < j may move by more than rounding allows
                   (core.agreement, float64 copy of the model); the figure is the largest such move
  cache logits     logits computed token by token through the KV cache equal the full forward pass, both
                   on a float64 copy of the model, within core.agreement's allowance (derived from
                   float64's epsilon and the length of the model's sums); the float32 difference is shown
                   beside it, never decides
  cache greedy     greedy generation with and without the cache gives identical tokens, over more
                   than one context length (so across a window slide), on the float64 copy
  held-out split   the evaluation runs on the split the manifest records, on the corpus whose
                   fingerprint it records (else the "held-out" text may have been trained on)
  plausible: no-peek  the validation loss measured the way training measures it (a target inside a full
                   window at a seeded random row, cycling through every row so every residue of the
                   position is probed, later tokens in the input) against the loss of the same
                   targets predicted from a window that ends just before each of them, so no model can
                   see its target. A causal model gets the same or worse with half the context; a model
                   that peeks loses its advantage. Rule: windowed >= 0.9 x no-peek, on 256 seeded
                   held-out positions (at least one per row of the window).
  plausible: canary  the held-out text with its characters shuffled (several seeded shuffles, joined)
                   has no structure a causal model can use: given the past, each next character is
                   (almost exactly) a draw from the text's character frequencies, so no causal model can
                   average less than their entropy H. Rule: loss on the canary >= (1 - 0.10) H; the 10%
                   covers sampling noise and what a window of earlier characters says about the rest of
                   a shuffle. One-sided: a causal model cannot fail it, but a leaking model need not pass
                   it either -- its copying may not carry over to shuffled text (a tiny model trained
                   1500 steps without the mask scored 9.2 nats there against an entropy of 2.7).
  plausible: vs n-gram  held-out loss >= 0.25 x the n-gram's: a character model of this size does
                   not get four times better than a 5-gram; a leaking one does.
  beats n-gram: loss, beats n-gram: keystrokes   lower held-out loss and more keystrokes saved per
                   100 characters than the n-gram baseline, same positions, same code
  named fallback   the n-gram baseline trained on the same split saves and loads back as a bundle

Any failure fails the rubric. Where the rubric goes: a bundle directory must hold exactly the files
its manifest lists (verify_bundle refuses any other), so nothing is written into it. `write_release_record`
writes a side directory beside it, `<bundle>.release/rubric.json` (and, on request, the fallback
`ngram/` bundle); the registry keeps its own copy of both with each promoted version.

The command line (`python -m core evaluate | baseline | release ...`) lives in cli/release.py;
nothing here prints.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import random
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from core.agreement import agreement, allowance, float64_copy, model_terms
from core.model.bundle import BundleError, load_bundle, verify_bundle
from core.model.corpus import Corpus, CorpusError
from core.model.gpt import GPT
from core.model.leak import causality_probe
from core.model.sampling import SampleConfig, generate
from core.model.training import document_stream
from core.release.baselines import DEFAULT_ORDER, NGramModel, load_baseline, save_baseline, train_ngram
from core.release.evaluation import EvalConfig, TransformerPredictor, evaluate_predictor, held_out

RUBRIC = "rubric.json"
FALLBACK = "ngram"
EXIT_FAILED = 1  # the rubric failed or a promotion was refused (2 stays a usage error)


@dataclass(frozen=True)
class ReleasePolicy:
    causality_sequences: int = 2  # each edits every position of one context-long sequence
    peek_positions: int = 256
    peek_ratio: float = 0.9
    canary_chars: int = 2048
    canary_tolerance: float = 0.10
    ngram_floor_ratio: float = 0.25
    require_beats_baseline: bool = True  # False only where a test needs a known-good model in seconds
    ngram_order: int = DEFAULT_ORDER
    evaluation: EvalConfig = field(default_factory=lambda: EvalConfig(latency_samples=0))
    seed: int = 0

    def __post_init__(self):
        if not isinstance(self.evaluation, EvalConfig) or self.evaluation.typing_chars < 1:
            raise ValueError("the release policy needs an EvalConfig with typing_chars >= 1 (keystrokes are compared)")
        for name in ("causality_sequences", "peek_positions", "canary_chars", "ngram_order"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    figure: str  # the measured figure, as shown
    value: float | None  # the same as a number, when there is one
    threshold: str  # the rule it was held to
    detail: str = ""


@dataclass(frozen=True)
class Rubric:
    bundle: str
    version: str | None
    created: str
    checks: tuple[CheckResult, ...]
    fallback: dict | None  # kind, version, order of the named fallback
    summary: dict  # the held-out split and the figures compared

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def failures(self) -> list[str]:
        return [f"{c.name}: {c.figure} ({c.threshold})" for c in self.checks if not c.passed]

    def table(self) -> list[dict]:
        return [
            {
                "check": c.name,
                "result": "pass" if c.passed else "FAIL",
                "figure": c.figure,
                "threshold": c.threshold,
                "detail": c.detail,
            }
            for c in self.checks
        ]

    def to_dict(self) -> dict:
        """JSON-ready; a non-finite number (a figure of a broken model) becomes None, never NaN or inf."""

        def finite(v):
            if isinstance(v, float):
                return v if math.isfinite(v) else None
            if isinstance(v, dict):
                return {k: finite(x) for k, x in v.items()}
            return type(v)(finite(x) for x in v) if isinstance(v, (list, tuple)) else v

        return finite({**dataclasses.asdict(self), "passed": self.passed})


@dataclass(frozen=True)
class ReleaseCheck:
    rubric: Rubric
    fallback: NGramModel | None  # trained on the bundle's split, to be saved beside it or in the registry
    corpus: Corpus | None
    split: dict | None  # {"val_fraction", "seed"}


def check_release(
    bundle_dir, *, corpus: Corpus | str | None = None, policy: ReleasePolicy = ReleasePolicy()
) -> ReleaseCheck:
    """Run every check of the module docstring on the bundle at `bundle_dir` (never writes anything)."""
    path = Path(bundle_dir)
    checks: list[CheckResult] = []
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    problems = verify_bundle(path)
    checks.append(
        CheckResult(
            "integrity",
            not problems,
            f"{len(problems)} problem(s)",
            len(problems),
            "verify_bundle finds none",
            "; ".join(problems),
        )
    )
    if problems:
        checks += [_not_run(name, "the bundle does not load") for name in _LATER_CHECKS]
        return ReleaseCheck(Rubric(str(path), None, created, tuple(checks), None, {}), None, None, None)
    bundle = load_bundle(path)
    model, manifest = bundle.model, bundle.manifest
    checks.append(
        CheckResult(
            "marked safe",
            bundle.safe,
            str(bundle.safe).lower(),
            None,
            "manifest safe is true",
            manifest["unsafe_reason"] or "",
        )
    )
    checks.append(causality_check(model, policy))
    checks.extend(cache_checks(model, policy))
    try:
        split = held_out(manifest, corpus)
    except (CorpusError, OSError) as e:
        checks += [_not_run(name, f"the held-out text is unavailable ({e})") for name in _DATA_CHECKS]
        return ReleaseCheck(Rubric(str(path), bundle.version, created, tuple(checks), None, {}), None, None, None)
    checks.append(
        CheckResult(
            "held-out split",
            not split.warnings,
            f"val_fraction {split.val_fraction}, seed {split.seed}, {len(split.val)} documents",
            None,
            "the training split, on the training corpus (fingerprint)",
            "; ".join(split.warnings),
        )
    )
    predictor = TransformerPredictor(model, bundle.tokenizer)
    ngram = train_ngram(split.train, bundle.tokenizer, order=policy.ngram_order)
    ev = policy.evaluation
    mine = evaluate_predictor(predictor, split.val, ev, measure_latency=False).overall
    theirs = evaluate_predictor(ngram, split.val, ev, measure_latency=False).overall
    checks.append(peek_check(model, document_stream(split.val, bundle.tokenizer).tolist(), policy))
    checks.append(canary_check(predictor, split.val, policy))
    floor = policy.ngram_floor_ratio * theirs.loss
    checks.append(
        CheckResult(
            "plausible: vs n-gram",
            mine.loss >= floor,
            f"loss {mine.loss:.4f} vs n-gram {theirs.loss:.4f}",
            mine.loss / theirs.loss,
            f"loss >= {policy.ngram_floor_ratio} x n-gram = {floor:.4f}",
            f"ratio {mine.loss / theirs.loss:.3f}",
        )
    )
    required = "" if policy.require_beats_baseline else " (not required by this policy)"
    checks.append(
        CheckResult(
            "beats n-gram: loss",
            mine.loss < theirs.loss or not policy.require_beats_baseline,
            f"{mine.loss:.4f} vs {theirs.loss:.4f} nats/char",
            mine.loss - theirs.loss,
            "lower held-out loss than the n-gram" + required,
        )
    )
    checks.append(
        CheckResult(
            "beats n-gram: keystrokes",
            mine.keystrokes_saved_per_100 > theirs.keystrokes_saved_per_100 or not policy.require_beats_baseline,
            f"{mine.keystrokes_saved_per_100:.2f} vs {theirs.keystrokes_saved_per_100:.2f} per 100 chars",
            mine.keystrokes_saved_per_100 - theirs.keystrokes_saved_per_100,
            "more keystrokes saved than the n-gram" + required,
        )
    )
    fallback_check, fallback = _fallback_check(ngram, split, policy)
    checks.append(fallback_check)
    summary = {
        "held_out": split.describe(),
        "warnings": list(split.warnings),
        "evaluation": dataclasses.asdict(ev),
        "model": {"loss": mine.loss, "top1": mine.top1, "keystrokes_saved_per_100": mine.keystrokes_saved_per_100},
        "ngram": {
            "loss": theirs.loss,
            "top1": theirs.top1,
            "keystrokes_saved_per_100": theirs.keystrokes_saved_per_100,
        },
    }
    rubric = Rubric(str(path), bundle.version, created, tuple(checks), fallback, summary)
    return ReleaseCheck(rubric, ngram, split.corpus, {"val_fraction": split.val_fraction, "seed": split.seed})


_DATA_CHECKS = (
    "held-out split",
    "plausible: no-peek",
    "plausible: canary",
    "plausible: vs n-gram",
    "beats n-gram: loss",
    "beats n-gram: keystrokes",
    "named fallback",
)
_LATER_CHECKS = ("marked safe", "causality", "cache logits", "cache greedy") + _DATA_CHECKS


def _not_run(name: str, why: str) -> CheckResult:
    return CheckResult(name, False, "not run", None, "must run", why)


def causality_check(model: GPT, policy: ReleasePolicy = ReleasePolicy()) -> CheckResult:
    """Edit every position j of seeded random sequences; the logits at positions < j must not move
    (core.model.leak.causality_probe, in float64, within core.agreement's allowance)."""
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


@torch.no_grad()
def cache_checks(model: GPT, policy: ReleasePolicy = ReleasePolicy()) -> list[CheckResult]:
    """Cached vs full logits over one context, and greedy tokens with vs without the cache: decided on a
    float64 copy of the model (core.agreement); the float32 difference is reported as a figure only."""
    L, V = model.config.context_length, model.config.vocab_size
    g = torch.Generator().manual_seed(policy.seed + 1)
    seq = torch.randint(0, V, (1, L), generator=g)  # (1, L)
    prefill = max(1, L // 2)
    cached64, full64 = _cached_and_full(float64_copy(model), seq, prefill)  # (L, V) each, float64
    decided = agreement(cached64, full64, terms=model_terms(model.config))
    cached32, full32 = _cached_and_full(model, seq, prefill)  # (L, V) each, float32: shown only
    diff32 = float((cached32 - full32).abs().max())
    shown32 = allowance(torch.float32, model_terms(model.config), float(full32.abs().max()))
    greedy = SampleConfig(temperature=0.0, max_new_tokens=L + 8)
    prompt = seq[0, :prefill].tolist()
    model64 = float64_copy(model)
    cached = [s.token for s in generate(model64, prompt, greedy, use_cache=True)]
    uncached = [s.token for s in generate(model64, prompt, greedy, use_cache=False)]
    same = sum(1 for a, b in zip(cached, uncached) if a == b)
    first = next((i for i, (a, b) in enumerate(zip(cached, uncached)) if a != b), None)
    return [
        CheckResult(
            "cache logits",
            decided.passed,
            f"max |cached - full| {decided.max_abs_diff:.2e} (float64)",
            decided.max_abs_diff,
            decided.rule,
            f"prefill {prefill} tokens, then {L - prefill} one at a time; in float32 (shown, not decided) "
            f"{diff32:.2e} against a float32 allowance of {shown32:.2e}",
        ),
        CheckResult(
            "cache greedy",
            cached == uncached,
            f"{same}/{len(cached)} tokens identical",
            float(same),
            "all identical",
            "" if first is None else f"first difference at generated token {first}",
        ),
    ]


def _cached_and_full(model: GPT, seq: torch.Tensor, prefill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (L, V) of seq (1, L) through the cache (a prefill, then one token at a time) and in one pass."""
    L = seq.shape[1]
    full = model(seq).logits[0]  # (L, V)
    cache = model.new_cache(batch_size=1)
    parts = [model(seq[:, :prefill], cache=cache).logits[0]]  # (prefill, V)
    parts += [model(seq[:, t : t + 1], cache=cache).logits[0] for t in range(prefill, L)]  # (1, V) each
    return torch.cat(parts), full  # (L, V), (L, V)


@torch.no_grad()
def peek_check(model: GPT, ids: list[int], policy: ReleasePolicy = ReleasePolicy()) -> CheckResult:
    """Windowed loss (target at row r of a full window, later tokens visible) vs no-peek loss (the window
    ends just before it). The rows cycle through every row of the window, in seeded order, so a leak that
    opens only at some positions (say every fourth) is probed too."""
    L, N = model.config.context_length, len(ids)
    if N < 3:
        return _not_run("plausible: no-peek", "the held-out stream has fewer than three tokens")
    W = min(L, N - 1)  # window length: a full context when the stream allows
    rng = random.Random(policy.seed + 2)
    rows = [i % (W - 1) for i in range(policy.peek_positions)]  # every row 0..W-2 has a later token in its window
    rng.shuffle(rows)
    windowed, blind = [], []  # (window, row, target) per position
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


def canary_text(documents, n_chars: int, seed: int) -> str:
    """Seeded shuffles of the documents' characters, joined until n_chars long."""
    chars = list("".join(d.text for d in documents))
    if not chars:
        raise ValueError("the canary needs held-out text")
    rng, out = random.Random(seed), []
    while len(out) < n_chars:
        block = chars[:]
        rng.shuffle(block)
        out.extend(block)
    return "".join(out[:n_chars])


def canary_check(predictor: TransformerPredictor, documents, policy: ReleasePolicy = ReleasePolicy()) -> CheckResult:
    text = canary_text(documents, policy.canary_chars, policy.seed)
    ids = predictor.tokenizer.encode(text)
    nll = []
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


def _fallback_check(ngram: NGramModel, split, policy: ReleasePolicy) -> tuple[CheckResult, dict | None]:
    with tempfile.TemporaryDirectory(prefix="fallback-") as tmp:
        try:
            path = save_baseline(
                Path(tmp) / FALLBACK, ngram, corpus=split.corpus, val_fraction=split.val_fraction, seed=split.seed
            )
            loaded = load_baseline(path)
        except (BundleError, OSError, ValueError) as e:
            return CheckResult("named fallback", False, "none", None, "an n-gram baseline bundle loads", str(e)), None
    info = {"kind": "ngram", "version": loaded.version, "order": ngram.order}
    return CheckResult(
        "named fallback",
        True,
        f"n-gram order {ngram.order}, version {loaded.version}",
        None,
        "an n-gram baseline bundle on the same split loads back",
        "served when no known-good model version loads",
    ), info


def side_dir(bundle_dir) -> Path:
    """Where `release check` writes beside a bundle: <parent>/<name>.release/."""
    path = Path(bundle_dir).resolve()
    return path.parent / f"{path.name}.release"


def write_release_record(check: ReleaseCheck, out_dir=None, *, save_fallback: bool = False) -> Path:
    """rubric.json (atomically) into `out_dir` (default: side_dir of the bundle), and with save_fallback
    the fallback n-gram bundle as `ngram/` (its counts are deterministic, so it gets the version the rubric
    names; the registry stores its own copy). Never writes into the bundle itself."""
    out = side_dir(check.rubric.bundle) if out_dir is None else Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if save_fallback and check.fallback is not None:
        save_baseline(
            out / FALLBACK,
            check.fallback,
            corpus=check.corpus,
            command=(),
            val_fraction=check.split["val_fraction"],
            seed=check.split["seed"],
        )
    write_json_atomic(out / RUBRIC, check.rubric.to_dict())
    return out


def write_json_atomic(path: Path, data) -> None:
    """Write to a temporary sibling, fsync, os.replace: readers see the old file or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            json.dump(data, f, indent=2, ensure_ascii=True, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
