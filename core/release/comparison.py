"""A bundle against its baselines: one row per metric, each predictor's figure side by side.

comparison_table(reports)   {"metric", "better", <predictor kind>: value, ...} per row of COMPARISON_ROWS
Evaluation                  the bundle's EvalReport, the baselines' and their comparison
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.release.eval_report import EvalReport

# (field of MetricSet or latency key, label, which way is better)
COMPARISON_ROWS = (
    ("loss", "held-out loss (nats/char)", "lower"),
    ("bits_per_char", "bits per character", "lower"),
    ("top1", "top-1 accuracy", "higher"),
    ("top3", "top-3 accuracy", "higher"),
    ("keystrokes_saved_per_100", "keystrokes saved per 100 chars", "higher"),
    ("acceptance_rate", "acceptance rate", "higher"),
    ("offered_per_100", "suggestions offered per 100 chars", ""),
    ("worst_top1", "worst slice by top-1 (accuracy)", "higher"),
    ("cached.p50_ms", "latency p50 ms (cached)", "lower"),
    ("cached.p95_ms", "latency p95 ms (cached)", "lower"),
    ("uncached.p50_ms", "latency p50 ms (uncached)", "lower"),
    ("uncached.p95_ms", "latency p95 ms (uncached)", "lower"),
)


@dataclass(frozen=True)
class Evaluation:
    report: EvalReport  # the bundle's
    baselines: tuple[EvalReport, ...]  # rule and n-gram on the same split, when asked for
    comparison: tuple[dict, ...]  # comparison_table(baselines + (report,))

    def to_dict(self) -> dict:
        return {
            **self.report.to_dict(),
            "baselines": [r.to_dict() for r in self.baselines],
            "comparison": list(self.comparison),
        }


def comparison_table(reports: Sequence[EvalReport]) -> list[dict]:
    """One row per metric: {"metric", "better", <predictor kind>: value, ...} (None where absent)."""
    rows: list[dict] = []
    for key, label, better in COMPARISON_ROWS:
        row: dict[str, object] = {"metric": label, "better": better}
        for r in reports:
            row[r.predictor] = _figure(r, key)
        if key == "worst_top1":
            row["slice"] = {r.predictor: next((w.slice for w in r.worst if w.metric == "top1"), None) for r in reports}
        rows.append(row)
    return rows


def _figure(report: EvalReport, key: str) -> float | None:
    m = report.overall
    if key == "offered_per_100":
        return 100.0 * m.offered / m.typed_chars if m.typed_chars else None
    if key == "worst_top1":
        return next((w.value for w in report.worst if w.metric == "top1"), None)
    if "." in key:
        mode, name = key.split(".")
        lat = report.latency.get(mode)
        return None if lat is None else getattr(lat, name)
    return getattr(m, key)
