"""A bundle against its baselines: one row per metric, each predictor's figure side by side."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.i18n import N_
from core.release.evaluation.eval_report import EvalReport

# (field of MetricSet or latency key, label, which way is better)
COMPARISON_ROWS = (  # labels marked N_: the Release page shows them translated (the CLI and JSON in English)
    ("loss", N_("held-out loss (nats/char)"), N_("lower")),
    ("bits_per_char", N_("bits per character"), N_("lower")),
    ("top1", N_("top-1 accuracy"), N_("higher")),
    ("top3", N_("top-3 accuracy"), N_("higher")),
    ("net_keystrokes_saved_per_100", N_("net keystrokes saved per 100 chars"), N_("higher")),
    ("keystrokes_saved_per_100", N_("gross keystrokes saved per 100 chars"), N_("higher")),
    ("acceptance_rate", N_("acceptance rate"), N_("higher")),
    ("shown_per_100", N_("suggestions shown per 100 chars"), ""),
    ("threshold", N_("suggestion threshold"), ""),
    ("attention_cost", N_("attention cost (keystrokes per suggestion not taken)"), ""),
    ("worst_top1", N_("worst slice by top-1 (accuracy)"), N_("higher")),
    ("latency.p50_ms", N_("latency p50 ms per suggestion"), N_("lower")),
    ("latency.p95_ms", N_("latency p95 ms per suggestion"), N_("lower")),
)
# the figures with an interval: the comparison shows "value [low, high]" for them (MetricSet field of the interval)
INTERVALS = {
    "loss": "loss_ci",
    "net_keystrokes_saved_per_100": "net_keystrokes_saved_ci",
    "keystrokes_saved_per_100": "keystrokes_saved_ci",
    "acceptance_rate": "acceptance_ci",
}


@dataclass(frozen=True)
class Evaluation:
    report: EvalReport  # the bundle's
    baselines: tuple[EvalReport, ...]  # rule and n-gram on the same split, when asked for
    comparison: tuple[dict, ...]  # comparison_table(baselines + (report,))

    def summaries(self) -> dict:
        """{predictor kind: summary(report)} for the bundle and its baselines."""
        return {r.predictor: summary(r) for r in (self.report, *self.baselines)}

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
            if key in INTERVALS:
                ci = getattr(r.overall, INTERVALS[key])
                row[f"{r.predictor}_ci"] = None if ci is None else [ci.low, ci.high]
        if key == "worst_top1":
            row["slice"] = {r.predictor: next((w.slice for w in r.worst if w.metric == "top1"), None) for r in reports}
        rows.append(row)
    return rows


def _figure(report: EvalReport, key: str) -> float | None:
    m = report.overall
    if key in ("threshold", "attention_cost"):
        return report.policy.get(key)
    if key == "worst_top1":
        return next((w.value for w in report.worst if w.metric == "top1"), None)
    if key.startswith("latency."):
        return None if report.latency is None else getattr(report.latency, key.split(".")[1])
    return getattr(m, key)


def summary(report: EvalReport) -> dict:
    """The headline figures of one predictor, as `evaluate --compare --json` prints them."""
    m = report.overall
    ci, net_ci = m.keystrokes_saved_ci, m.net_keystrokes_saved_ci
    return {
        "net_keystrokes_saved_per_100": m.net_keystrokes_saved_per_100,
        "net_keystrokes_saved_ci": None if net_ci is None else [net_ci.low, net_ci.high],
        "attention_cost": report.policy.get("attention_cost"),
        "keystrokes_saved_per_100": m.keystrokes_saved_per_100,
        "keystrokes_saved_ci": None if ci is None else [ci.low, ci.high],
        "acceptance_rate": m.acceptance_rate,
        "acceptance_ci": None if m.acceptance_ci is None else [m.acceptance_ci.low, m.acceptance_ci.high],
        "shown_per_100": m.shown_per_100,
        "loss": m.loss,
        "loss_ci": None if m.loss_ci is None else [m.loss_ci.low, m.loss_ci.high],
        "typed_chars": m.typed_chars,
        "documents": m.documents,
        "threshold": report.policy.get("threshold"),
        "threshold_tuned": report.policy.get("tuned"),
        "version": report.version,
    }
