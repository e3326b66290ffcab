"""The release gate: a leak detector and a production rubric, each check with its measured figure.

`check_release(bundle_dir)` runs, on a transformer bundle:

  integrity        verify_bundle finds no problem (hashes, fields, tensor names, shapes, finiteness)
  marked safe      the manifest's `safe` flag (a model trained without the mask is saved unsafe)
  causality        core.model.leak.causality_probe: token j of seeded random sequences is edited, for EVERY
                   position j, and no logit at a position < j may move by more than rounding allows
                   (core.agreement, float64 copy of the model); the figure is the largest such move
  cache logits     at every step of a greedy generation of L + 8 tokens, the logits computed through the KV
                   cache equal the same window recomputed in full (core.model.sampling.cache_parity, what the
                   KV-cache lesson shows too), both on a float64 copy of the model, within core.agreement's
                   allowance (derived from
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
  beats baselines: loss   lower held-out loss than the better of the rule and the n-gram
  beats baselines: keystrokes   net keystrokes saved per 100 characters as served (core.release.serving.policy, the
                   one suggestion policy; core.release.evaluation.utility: gross less the attention cost the bundle
                   records for every suggestion shown and not taken): the lower end of the transformer's 95% interval
                   (bootstrap over documents) above the upper end of the rule's AND the n-gram's. The transformer is
                   shown suggestions at the threshold its manifest records (an untuned bundle at the default, and the
                   rubric says so); each baseline, trained on the same training documents, at the threshold tuned for it
                   at the same price on the validation documents (core.release.evaluation.tuning). The figures are
                   core.release.evaluation.evaluation's own (evaluate_predictor), so `python -m core evaluate --compare`
                   prints the same numbers for the same EvalConfig; the rubric's summary keeps each predictor's
                   core.release.evaluation.comparison.summary.
  named fallback   the n-gram baseline trained on the same split saves and loads back as a bundle

Any failure fails the rubric. The policy and the records are core.release.gate.rubric; the model checks
(causality, cache, no-peek, canary) are core.release.gate.checks; this module runs them all in order.
Where the rubric goes: a bundle directory must hold exactly the files its manifest lists (verify_bundle
refuses any other), so nothing is written into it. `write_release_record` writes a side directory beside
it, `<bundle>.release/rubric.json` (and, on request, the fallback `ngram/` bundle); the registry keeps its
own copy of both with each promoted version.

The command line (`python -m core evaluate | baseline | release ...`) lives in cli/release.py;
nothing here prints.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from core.model.batches import document_stream
from core.model.bundle import load_bundle, verify_bundle
from core.model.bundle_checks import BundleError
from core.model.corpus import Corpus, CorpusError
from core.progress import Progress
from core.release.baselines.baseline_bundle import load_baseline, save_baseline
from core.release.baselines.ngram import NGramModel, train_ngram
from core.release.baselines.rule import train_rule
from core.release.evaluation.comparison import summary as predictor_summary
from core.release.evaluation.eval_report import EvalConfig, EvalReport
from core.release.evaluation.evaluation import evaluate_predictor, untuned_warning
from core.release.evaluation.held_out import HeldOut, held_out
from core.release.evaluation.tuning import tune_policy
from core.release.gate.checks import (
    BASELINE_CHECKS,
    cache_checks,
    canary_check,
    causality_check,
    peek_check,
    versus_baselines,
)
from core.release.gate.rubric import (
    DEFAULT_POLICY,
    FALLBACK,
    CheckResult,
    ReleaseCheck,
    ReleasePolicy,
    Rubric,
    not_run,
)
from core.release.serving.policy import SuggestionPolicy, policy_from_manifest
from core.release.serving.predictor import Predictor
from core.release.serving.transformer_predictor import TransformerPredictor

# The gate's steps in the order it runs them, as its `progress` names them (core.progress).
GATE_STEPS = (
    "integrity",
    "causality",
    "cache logits and greedy",
    "held-out split",
    "evaluating the transformer",
    "the rule: training, tuning, evaluating",
    "the n-gram: training, tuning, evaluating",
    "no-peek",
    "canary",
    "named fallback",
)


def check_release(
    bundle_dir: str | os.PathLike,
    *,
    corpus: Corpus | str | None = None,
    policy: ReleasePolicy = DEFAULT_POLICY,
    progress: Progress | None = None,
) -> ReleaseCheck:
    """Run every check of the module docstring on the bundle at `bundle_dir` (never writes anything).
    `progress` hears each of GATE_STEPS as it begins, and done == total when the rubric is complete (a bundle
    that does not load, or without its held-out text, skips the steps that need them)."""
    total = len(GATE_STEPS)

    def begin(step: str) -> None:
        if progress is not None:
            progress(GATE_STEPS.index(step), total, step)

    check = _check_release(Path(bundle_dir), corpus, policy, begin)
    if progress is not None:
        progress(total, total, "release check done")
    return check


def _check_release(
    path: Path, corpus: Corpus | str | None, policy: ReleasePolicy, begin: Callable[[str], None]
) -> ReleaseCheck:
    begin("integrity")
    checks: list[CheckResult] = []
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    problems = verify_bundle(path)
    bundle = None if problems else load_bundle(path)
    try:  # what load_predictor refuses, integrity refuses: a suggestion policy no surface could serve
        served = policy_from_manifest(bundle.manifest) if bundle else None
    except ValueError as e:
        problems, served = [f"the recorded suggestion policy is invalid: {e}"], None
    checks.append(
        CheckResult(
            "integrity",
            not problems,
            f"{len(problems)} problem(s)",
            len(problems),
            "verify_bundle finds none; a valid recorded suggestion policy",
            "; ".join(problems),
        )
    )
    if bundle is None or served is None:
        checks += [not_run(name, "the bundle does not load") for name in _LATER_CHECKS]
        return ReleaseCheck(Rubric(str(path), None, created, tuple(checks), None, {}), None, None, None)
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
    begin("causality")
    checks.append(causality_check(model, policy))
    begin("cache logits and greedy")
    checks.extend(cache_checks(model, policy))
    begin("held-out split")
    try:
        split = held_out(manifest, corpus)
    except (CorpusError, OSError) as e:
        checks += [not_run(name, f"the held-out text is unavailable ({e})") for name in _DATA_CHECKS]
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
    ev, info, untuned = policy.evaluation, split.describe(), untuned_warning(served)
    begin("evaluating the transformer")
    reports = {
        "transformer": evaluate_predictor(
            predictor,
            split.val,
            ev,
            policy=served,
            measure_latency=False,
            version=bundle.version,
            held_out_info=info,
            warnings=split.warnings + untuned,
        )
    }
    tuned: dict[str, SuggestionPolicy] = {}
    begin("the rule: training, tuning, evaluating")
    tuned["rule"], reports["rule"] = _tuned_report(train_rule(split.train, bundle.tokenizer), split, ev, served)
    begin("the n-gram: training, tuning, evaluating")
    ngram = train_ngram(split.train, bundle.tokenizer, order=policy.ngram_order)
    tuned["ngram"], reports["ngram"] = _tuned_report(ngram, split, ev, served)
    begin("no-peek")
    checks.append(peek_check(model, document_stream(split.val, bundle.tokenizer).tolist(), policy))
    begin("canary")
    checks.append(canary_check(predictor, split.val, policy))
    overall = {kind: r.overall for kind, r in reports.items() if kind != "transformer"}
    price = f"attention cost {served.attention_cost:g} keystrokes per suggestion shown and not taken (the bundle's)"
    note = "; ".join((price, *untuned))
    checks.extend(versus_baselines(reports["transformer"].overall, overall, policy, note=note))
    begin("named fallback")
    fallback_check, fallback = _fallback_check(ngram, tuned["ngram"], split)
    checks.append(fallback_check)
    rubric = Rubric(str(path), bundle.version, created, tuple(checks), fallback, _summary(split, reports, ev, served))
    return ReleaseCheck(
        rubric, ngram, split.corpus, {"val_fraction": split.val_fraction, "seed": split.seed}, tuned["ngram"]
    )


_DATA_CHECKS = (
    "held-out split",
    "plausible: no-peek",
    "plausible: canary",
    *BASELINE_CHECKS,
    "named fallback",
)
_LATER_CHECKS = ("marked safe", "causality", "cache logits", "cache greedy") + _DATA_CHECKS


def _tuned_report(
    baseline: Predictor, split: HeldOut, ev: EvalConfig, served: SuggestionPolicy
) -> tuple[SuggestionPolicy, EvalReport]:
    """A baseline's threshold tuned on the validation documents, and its evaluation at that threshold."""
    tuned, grid = tune_policy(baseline, split.val, ev, served)
    report = evaluate_predictor(
        baseline, split.val, ev, policy=tuned, measure_latency=False, held_out_info=split.describe(), tuning=grid
    )
    return tuned, report


def _summary(split: HeldOut, reports: dict[str, EvalReport], ev: EvalConfig, served: SuggestionPolicy) -> dict:
    """What the figures were measured on and, per predictor, core.release.evaluation.comparison.summary (the
    Release page's table of the gate's figures, and what `evaluate --compare --json` prints for the same EvalConfig)."""
    return {
        "held_out": split.describe(),
        "warnings": list(reports["transformer"].warnings),
        "evaluation": dataclasses.asdict(ev),
        "policy": served.to_dict(),
        "predictors": {kind: predictor_summary(r) for kind, r in reports.items()},
    }


def _fallback_check(ngram: NGramModel, tuned: SuggestionPolicy, split: HeldOut) -> tuple[CheckResult, dict | None]:
    """Save the n-gram as a baseline bundle (in a temporary directory), with its tuned threshold, and load it
    back; the registry and write_release_record save the same bundle (same counts, same policy, same version)."""
    with tempfile.TemporaryDirectory(prefix="fallback-") as tmp:
        try:
            path = save_baseline(
                Path(tmp) / FALLBACK,
                ngram,
                corpus=split.corpus,
                val_fraction=split.val_fraction,
                seed=split.seed,
                suggestion=tuned,
            )
            loaded = load_baseline(path)
        except (BundleError, OSError, ValueError) as e:
            return CheckResult("named fallback", False, "none", None, "an n-gram baseline bundle loads", str(e)), None
    info = {"kind": "ngram", "version": loaded.version, "order": ngram.order, "threshold": tuned.threshold}
    return CheckResult(
        "named fallback",
        True,
        f"n-gram order {ngram.order}, version {loaded.version}",
        None,
        "an n-gram baseline bundle on the same split loads back",
        f"served when no known-good model version loads; its threshold tuned on the validation documents: "
        f"{tuned.threshold}",
    ), info
