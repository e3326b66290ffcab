"""The release gate: a leak detector and a production rubric, each check with its measured figure.

It runs every check in order (integrity, marked safe, causality, cache logits and greedy tokens, the held-out split,
the plausibility of the loss, the baselines beaten on loss and on net keystrokes, the named fallback), and any
failure fails the rubric. The rubric is written beside the bundle, never into it, since a bundle must hold exactly
the files its manifest lists. Nothing here prints.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from core.i18n import N_
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
            N_("verify_bundle finds none; a valid recorded suggestion policy"),
            "; ".join(problems),
        )
    )
    if bundle is None or served is None:
        checks += [not_run(name, N_("the bundle does not load")) for name in _LATER_CHECKS]
        return ReleaseCheck(Rubric(str(path), None, created, tuple(checks), None, {}), None, None, None)
    model, manifest = bundle.model, bundle.manifest
    checks.append(
        CheckResult(
            "marked safe",
            bundle.safe,
            str(bundle.safe).lower(),
            None,
            N_("manifest safe is true"),
            manifest["unsafe_reason"] or "",
        )
    )
    begin("causality")
    checks.append(causality_check(model, policy))
    begin("cache logits and greedy")
    checks.extend(cache_checks(model, policy))
    # The evaluation runs on the split the manifest records, on the corpus whose fingerprint it records: else the
    # "held-out" text may have been trained on.
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
            N_("the training split, on the training corpus (fingerprint)"),
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
    """What the figures were measured on and, per predictor, the comparison's `summary` (the
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
            return (
                CheckResult("named fallback", False, N_("none"), None, N_("an n-gram baseline bundle loads"), str(e)),
                None,
            )
    info = {"kind": "ngram", "version": loaded.version, "order": ngram.order, "threshold": tuned.threshold}
    return CheckResult(
        "named fallback",
        True,
        f"n-gram order {ngram.order}, version {loaded.version}",
        None,
        N_("an n-gram baseline bundle on the same split loads back"),
        f"served when no known-good model version loads; its threshold tuned on the validation documents: "
        f"{tuned.threshold}",
    ), info
