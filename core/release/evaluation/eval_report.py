"""What an evaluation is asked for and what it reports: the frozen records a page, the command line and the release
gate read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from core.numbers import integer

SLICE_FAMILIES = ("char_class", "column", "indent", "document")


@dataclass(frozen=True)
class EvalConfig:
    max_positions: int = 20_000  # next-character positions scored, in seeded chunks
    chunk: int = 64
    typing_chars: int = 20_000  # characters of simulated typing, shared out over every document
    segment_chars: int = 500  # typed in seeded stretches of this many characters
    latency_samples: int = 30
    min_slice_positions: int = 50
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        for name in (
            "max_positions",
            "chunk",
            "typing_chars",
            "segment_chars",
            "latency_samples",
            "min_slice_positions",
            "seed",
        ):
            value = getattr(self, name)
            low = 0 if name in ("seed", "latency_samples", "typing_chars") else 1
            integer(name, value, low)
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must lie in (0, 1), got {self.confidence!r}")


DEFAULT_EVAL = EvalConfig()  # frozen: one shared default is safe


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class MetricSet:
    positions: int  # scored next-character positions
    loss: float | None  # nats per character
    loss_ci: Interval | None  # every interval: bootstrap over documents (core.release.evaluation.bootstrap)
    bits_per_char: float | None
    top1: float | None
    top1_ci: Interval | None
    top3: float | None
    top3_ci: Interval | None
    typed_chars: int  # characters covered by the typing simulation
    offered: int  # suggestions shown
    accepted: int
    acceptance_rate: float | None  # accepted / shown
    acceptance_ci: Interval | None
    keystrokes_saved_per_100: float | None  # gross: every accepted suggestion's k - 1, nothing charged
    keystrokes_saved_ci: Interval | None
    shown_per_100: float | None  # suggestions shown per 100 characters covered
    documents: int  # documents with scored or typed positions in this set
    # the decision utility (core.release.evaluation.utility): gross less the attention cost of each suggestion not
    # taken, at the policy's attention_cost (EvalReport.policy records it); what thresholds are tuned on and the gate
    # decides on
    net_keystrokes_saved_per_100: float | None = None
    net_keystrokes_saved_ci: Interval | None = None


@dataclass(frozen=True)
class SliceMetrics:
    family: str  # one of SLICE_FAMILIES
    name: str
    metrics: MetricSet

    @property
    def label(self) -> str:
        return f"{self.family}={self.name}"


@dataclass(frozen=True)
class WorstSlice:
    metric: str  # "top1" or "loss"
    slice: str  # "family=name"
    value: float
    ci: Interval | None  # None for a loss over a single position
    positions: int


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    mean_ms: float
    samples: int


@dataclass(frozen=True)
class EvalReport:
    predictor: str  # kind: "transformer", "ngram", "rule"
    version: str | None
    held_out: dict  # corpus source and fingerprint, val_fraction, seed, recorded, documents, characters
    config: EvalConfig
    overall: MetricSet
    slices: tuple[SliceMetrics, ...]
    worst: tuple[WorstSlice, ...]
    latency: Latency | None  # one suggestion as served (core.release.evaluation.latency)
    policy: dict  # the SuggestionPolicy the typist was shown suggestions with (to_dict)
    tuning: tuple[
        dict, ...
    ] = ()  # a baseline's threshold grid, tuned for this comparison (core.release.evaluation.tuning)
    warnings: tuple[str, ...] = ()
    seconds: float = 0.0

    def to_dict(self) -> dict:
        """Plain JSON-ready values (intervals as {"low", "high"}, absent values as None)."""
        return dataclasses.asdict(self)

    def slice_table(self) -> list[dict]:
        """One row per slice: the figures a page shows in its table."""
        return [{"slice": s.label, **_flat(s.metrics)} for s in self.slices]


def _flat(m: MetricSet) -> dict:
    """One flat row of a MetricSet: each interval as <name>_low and <name>_high."""
    row: dict[str, object] = {}
    for k, v in dataclasses.asdict(m).items():
        if isinstance(v, dict):
            row[f"{k}_low"], row[f"{k}_high"] = v["low"], v["high"]
        elif v is None and k.endswith("_ci"):
            row[f"{k}_low"] = row[f"{k}_high"] = None
        else:
            row[k] = v
    return row
