"""The release rubric: the policy it is held to, each check's result with its measured figure, and where it is
written (beside the bundle, never into it).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.files import write_json_atomic
from core.i18n import N_
from core.jsonfile import read_json_file
from core.model.corpus import Corpus
from core.release.baselines.baseline_bundle import save_baseline
from core.release.baselines.ngram import DEFAULT_ORDER, NGramModel
from core.release.evaluation.eval_report import EvalConfig
from core.release.serving.policy import SuggestionPolicy

RUBRIC = "rubric.json"
FALLBACK = "ngram"
EXIT_FAILED = 1  # the rubric failed or a promotion was refused (2 stays a usage error)


@dataclass(frozen=True)
class ReleasePolicy:
    causality_sequences: int = 2  # each edits every position of one context-long sequence
    peek_positions: int = 256
    # no-peek: a causal model does as well or worse when each target's window ends just before it (half the context);
    # a model that peeks loses its advantage there
    peek_ratio: float = 0.9
    canary_chars: int = 2048
    # canary: shuffled held-out text leaves a causal model nothing better than the characters' entropy H; 10% covers
    # sampling noise and what a window of earlier characters says about the rest of a shuffle. One-sided: a leaking
    # model need not fail it (a tiny model trained 1500 steps without the mask scored 9.2 nats there against H = 2.7)
    canary_tolerance: float = 0.10
    # a character model of this size does not get four times better than a 5-gram; a leaking one does
    ngram_floor_ratio: float = 0.25
    require_beats_baseline: bool = True  # False only where a test needs a known-good model in seconds
    ngram_order: int = DEFAULT_ORDER
    evaluation: EvalConfig = field(default_factory=lambda: EvalConfig(latency_samples=0))
    seed: int = 0

    def __post_init__(self) -> None:
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
    summary: dict  # the held-out split, the evaluation config, per predictor comparison.summary (gate._summary)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def failures(self) -> list[str]:
        return [f"{c.name}: {c.figure} ({c.threshold})" for c in self.checks if not c.passed]

    def table(self) -> list[dict]:
        return [
            {
                "check": c.name,
                "result": N_("pass") if c.passed else N_("FAIL"),  # marked: the Release page shows them translated
                "figure": c.figure,
                "threshold": c.threshold,
                "detail": c.detail,
            }
            for c in self.checks
        ]

    def to_dict(self) -> dict:
        """JSON-ready; a non-finite number (a figure of a broken model) becomes None, never NaN or inf."""

        def finite(v: Any) -> Any:
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
    fallback_policy: SuggestionPolicy | None = None  # the fallback's threshold, tuned on the validation documents


DEFAULT_POLICY = ReleasePolicy()  # frozen: one shared default is safe


def not_run(name: str, why: str) -> CheckResult:
    """A check that could not run fails the rubric, saying why."""
    return CheckResult(name, False, N_("not run"), None, N_("must run"), why)


def side_dir(bundle_dir: str | os.PathLike) -> Path:
    """Where `release check` writes beside a bundle: <parent>/<name>.release/."""
    path = Path(bundle_dir).resolve()
    return path.parent / f"{path.name}.release"


def write_release_record(
    check: ReleaseCheck, out_dir: str | os.PathLike | None = None, *, save_fallback: bool = False
) -> Path:
    """rubric.json (atomically) into `out_dir` (default: side_dir of the bundle), and with save_fallback
    the fallback n-gram bundle as `ngram/` (its counts are deterministic, so it gets the version the rubric
    names; the registry stores its own copy). Never writes into the bundle itself."""
    out = side_dir(check.rubric.bundle) if out_dir is None else Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if save_fallback and check.fallback is not None and check.corpus is not None and check.split is not None:
        save_baseline(
            out / FALLBACK,
            check.fallback,
            corpus=check.corpus,
            command=(),
            val_fraction=check.split["val_fraction"],
            seed=check.split["seed"],
            suggestion=check.fallback_policy,
        )
    write_json_atomic(out / RUBRIC, check.rubric.to_dict())
    return out


MAX_RUBRIC_BYTES = 1 << 20  # a rubric is a few kB (the held-out document names are its longest part)


def read_rubric(path: str | os.PathLike) -> Rubric:
    """The Rubric a rubric.json records (written by write_release_record or stored by the registry), read through
    the one bounded JSON reader. A file that is not a rubric, or holds a field of the wrong type, raises
    ValueError naming the field; OSError (missing, unreadable) passes through. Its `passed` is recomputed from
    the checks, never taken from the file."""
    data = read_json_file(path, max_bytes=MAX_RUBRIC_BYTES)

    def field_of(record: object, name: str, kinds: tuple[type, ...], where: str) -> Any:
        value = record.get(name) if isinstance(record, dict) else None
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ValueError(f"{path}: {where}{name} is {type(value).__name__}, not a rubric's field")
        return value

    checks = []
    for i, c in enumerate(field_of(data, "checks", (list,), "")):
        at = f"checks[{i}]."
        checks.append(
            CheckResult(
                field_of(c, "name", (str,), at),
                field_of(c, "passed", (bool,), at),
                field_of(c, "figure", (str,), at),
                None if c.get("value") is None else float(field_of(c, "value", (int, float), at)),
                field_of(c, "threshold", (str,), at),
                field_of(c, "detail", (str,), at),
            )
        )
    return Rubric(
        field_of(data, "bundle", (str,), ""),
        None if data.get("version") is None else field_of(data, "version", (str,), ""),
        field_of(data, "created", (str,), ""),
        tuple(checks),
        None if data.get("fallback") is None else field_of(data, "fallback", (dict,), ""),
        field_of(data, "summary", (dict,), ""),
    )
