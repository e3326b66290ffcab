"""What the Monitoring page shows: pure functions over the telemetry store's rows, per model version side by side
(health, input quality, predictions, outcomes, slices and drift).

Percentiles are nearest-rank and include failed requests (the learner waited for them too). Drift is the population
stability index of live top-1 probabilities against a release-time reference replayed through the serving path.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from core import i18n
from core.i18n import N_, _
from core.numbers import percentile
from core.release.evaluation.slices import slice_names
from core.release.evaluation.utility import DEFAULT_ATTENTION_COST, net_saved
from core.telemetry.store import MAX_READ, TelemetryStore

BINS = tuple(round(0.1 * i, 1) for i in range(11))  # top-1 probability bins [0, 0.1), ..., [0.9, 1.0]
BIN_LABELS = tuple(f"{lo:.1f}-{hi:.1f}" for lo, hi in zip(BINS, BINS[1:]))
PSI_WARN = 0.2  # the usual reading: < 0.1 stable, 0.1-0.2 a moderate shift, > 0.2 a significant one
MIN_DRIFT_EVENTS = 100  # live events of the version before a verdict is given
MIN_REFERENCE_EVENTS = 50
# PSI = sum over bins of (live - ref) * ln(live / ref) on the shares, each share smoothed with PSI_PSEUDO counts per bin
# ((count + 0.5) / (n + 0.5 * bins), Jeffreys), so an empty bin neither gives infinity nor, with a few hundred events,
# dominates the index.
PSI_PSEUDO = 0.5
# The drift reference is the version's held-out split replayed through the serving path (a replay with no store),
# since the evaluation report keeps no distribution of top-1 probabilities.
REFERENCE_SEED = 0
REFERENCE_EVENTS = 300
FAMILY_COLUMNS = {"char_class": "char_class", "column": "column_bucket", "indent": "indent", "document": "document"}
# a page suggestion whose next character is not typed yet has no char_class
UNLABELLED = N_("(not known yet)")  # the page shows it translated; the figures keep it as it is
BUCKETS = {"minute": 60, "hour": 3600, "day": 86400}


def _short(value: float) -> str:
    """`value` as str() writes it, with the language's decimal sign."""
    text = str(value)
    return i18n.number(value, len(text.partition(".")[2])) if "." in text and "e" not in text else text


def drift_rule() -> str:
    """The rule drift() judges by, in the reader's language."""
    return _(
        "Warn when the population stability index of the top-1 probability over {bins} bins exceeds {warn} with at "
        "least {events} live events; with fewer, no verdict (not enough traffic yet)."
    ).format(bins=len(BIN_LABELS), warn=_short(PSI_WARN), events=MIN_DRIFT_EVENTS)


@dataclass(frozen=True)
class HealthRow:
    version: str
    bucket: str | None  # the time bucket's start, None for all of it
    requests: int
    errors: int
    error_rate: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None


@dataclass(frozen=True)
class QualityRow:
    version: str
    requests: int
    mean_prompt_chars: float
    share_unseen: float  # with at least one character outside the vocabulary
    share_truncated: float


@dataclass(frozen=True)
class PredictionRow:
    version: str
    predicted: int  # events with a distribution (not failed)
    histogram: tuple[int, ...]  # counts per BINS bin
    mean_top1: float | None
    mean_entropy_nats: float | None
    shown: int
    shown_rate: float | None  # shown / events with a suggestion decision


@dataclass(frozen=True)
class OutcomeRow:
    version: str
    shown: int
    matured: int  # shown, with a matured outcome
    accepted: int
    typed_other: int
    acceptance_rate: float | None  # accepted / matured
    # the decision utility (core.release.evaluation.utility), live: what the accepted suggestions saved, less the price
    # of each one typed over. Per matured suggestion, since live traffic does not count the characters typed by hand
    # (the evaluation's per-100-characters figure needs them); 0 < net_per_shown is a suggestion worth its look.
    saved: int = 0  # keystrokes: suggestion_chars - 1 of each accepted one
    net_saved: float = 0.0
    net_per_shown: float | None = None  # net_saved / matured
    attention_cost: float = DEFAULT_ATTENTION_COST


@dataclass(frozen=True)
class SliceRow:
    version: str
    family: str
    name: str
    requests: int
    shown: int
    matured: int
    accepted: int
    acceptance_rate: float | None
    mean_top1: float | None


@dataclass(frozen=True)
class Drift:
    psi: float | None
    live: int
    reference: int
    live_shares: tuple[float, ...]  # per bin
    reference_shares: tuple[float, ...]
    verdict: str  # "warning", "stable", "not enough traffic", "no reference"
    message: str


def load(
    store: TelemetryStore,
    *,
    kind: str | None = "suggestion",
    surfaces: Iterable[str] | None = None,
    limit: int = MAX_READ,
) -> list[dict]:
    """The store's most recent `limit` events of `kind` (None: every kind) from `surfaces` (None: all)."""
    allowed = None if surfaces is None else set(surfaces)
    return [
        r
        for r in store.rows(limit)
        if (kind is None or r["kind"] == kind) and (allowed is None or r["surface"] in allowed)
    ]


def versions(rows: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(r["version"] for r in rows))


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def _by(rows: Sequence[dict], key: Callable[[dict], object]) -> dict:
    """The rows per key, keys in the order of their first row."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return groups


def _by_version(rows: Sequence[dict]) -> dict[str, list[dict]]:
    """The rows per version, versions in the order they were first served (as versions())."""
    return _by(rows, itemgetter("version"))


def _health(version: str, bucket: str | None, group: Sequence[dict]) -> HealthRow:
    latencies = [r["latency_ms"] for r in group]
    errors = sum(r["error"] is not None for r in group)
    return HealthRow(
        version, bucket, len(group), errors, errors / len(group), percentile(latencies, 50), percentile(latencies, 95)
    )


def health(rows: Sequence[dict]) -> list[HealthRow]:
    return [_health(v, None, g) for v, g in _by_version(rows).items()]


def bucket_width(rows: Sequence[dict]) -> str:
    """The bucket that gives a readable chart: a minute for up to two hours of events, an hour for up to two
    days, else a day."""
    if not rows:
        return "minute"
    span = (dt.datetime.fromisoformat(rows[-1]["at"]) - dt.datetime.fromisoformat(rows[0]["at"])).total_seconds()
    return "minute" if span <= 7200 else ("hour" if span <= 2 * 86400 else "day")


def _bucket_start(at: str, seconds: int) -> int:
    """The POSIX time at which the bucket of `seconds` holding the time `at` (ISO 8601) starts."""
    return int(dt.datetime.fromisoformat(at).timestamp() // seconds * seconds)


def _bucket_name(start: int) -> str:
    return dt.datetime.fromtimestamp(start, dt.UTC).strftime("%Y-%m-%d %H:%M")


def bucket_of(at: str, width: str) -> str:
    """The UTC start of the bucket holding the time `at` (ISO 8601), as 'YYYY-MM-DD HH:MM'."""
    return _bucket_name(_bucket_start(at, BUCKETS[width]))


def over_time(rows: Sequence[dict], width: str | None = None) -> list[HealthRow]:
    """health() per version and bucket (every version's buckets in time order, versions as in versions())."""
    seconds = BUCKETS[width or bucket_width(rows)]
    out = []
    for v, g in _by_version(rows).items():
        buckets = _by(g, lambda r: _bucket_start(r["at"], seconds))  # named once per bucket, not once per row
        out += [_health(v, _bucket_name(b), buckets[b]) for b in sorted(buckets)]
    return out


def input_quality(rows: Sequence[dict]) -> list[QualityRow]:
    out = []
    for v, g in _by_version(rows).items():
        out.append(
            QualityRow(
                v,
                len(g),
                math.fsum(r["prompt_chars"] for r in g) / len(g),
                sum(r["unseen_chars"] > 0 for r in g) / len(g),
                sum(bool(r["truncated"]) for r in g) / len(g),
            )
        )
    return out


def histogram(values: Iterable[float]) -> tuple[int, ...]:
    """Counts per BINS bin; 1.0 falls in the last bin."""
    v = np.clip(np.asarray(list(values), dtype=np.float64), 0.0, 1.0)
    index = np.minimum((v * 10).astype(np.int64), len(BIN_LABELS) - 1)  # bin i holds [i/10, (i+1)/10)
    return tuple(int(c) for c in np.bincount(index, minlength=len(BIN_LABELS)))


def predictions(rows: Sequence[dict]) -> list[PredictionRow]:
    out = []
    for v, g in _by_version(rows).items():
        top1 = [r["top1_prob"] for r in g if r["top1_prob"] is not None]
        entropy = [r["entropy_nats"] for r in g if r["entropy_nats"] is not None]
        decided = [r for r in g if r["shown"] is not None]
        shown = sum(r["shown"] == 1 for r in decided)
        out.append(
            PredictionRow(v, len(top1), histogram(top1), _mean(top1), _mean(entropy), shown, _rate(shown, len(decided)))
        )
    return out


def _outcome_counts(group: Sequence[dict]) -> tuple[int, int, int, int]:
    """Among the shown suggestions of `group`: (shown, matured, accepted, typed_other)."""
    shown = accepted = other = 0
    for r in group:
        if r["shown"] == 1:
            shown += 1
            accepted += r["outcome"] == "accepted"
            other += r["outcome"] == "typed_other"
    return shown, accepted + other, accepted, other


def outcomes(rows: Sequence[dict], attention_cost: float = DEFAULT_ATTENTION_COST) -> list[OutcomeRow]:
    """Per version: the outcomes of its shown suggestions, and their net keystrokes saved at `attention_cost`."""
    out = []
    for v, g in _by_version(rows).items():
        shown, matured, accepted, other = _outcome_counts(g)
        saved = sum(
            max(0, (r["suggestion_chars"] or 0) - 1) for r in g if r["shown"] == 1 and r["outcome"] == "accepted"
        )
        net = float(net_saved(saved, matured, accepted, attention_cost))
        out.append(
            OutcomeRow(
                v,
                shown,
                matured,
                accepted,
                other,
                _rate(accepted, matured),
                saved,
                net,
                net / matured if matured else None,
                attention_cost,
            )  # fmt: skip
        )
    return out


def slices(rows: Sequence[dict], family: str) -> list[SliceRow]:
    """Per version, per slice of `family` (a `SLICE_FAMILIES` name), in the
    evaluation's reading order (`slice_names`), UNLABELLED last."""
    if family not in FAMILY_COLUMNS:
        raise ValueError(f"family must be one of {tuple(FAMILY_COLUMNS)}, got {family!r}")
    column = FAMILY_COLUMNS[family]
    groups = _by(rows, lambda r: (r["version"], r[column]))  # None: not labelled (yet)
    labels = list(dict.fromkeys(name for _v, name in groups))  # in the order of their first row, as slice_names reads
    named = slice_names(family, np.array([n for n in labels if n is not None], dtype=object))
    order = [(n, n) for n in named] + ([(UNLABELLED, None)] if None in labels else [])
    out = []
    for v in dict.fromkeys(v for v, _name in groups):  # as versions(rows), from the groups
        for name, label in order:
            g = groups.get((v, label))
            if not g:
                continue
            shown, matured, accepted, _other = _outcome_counts(g)
            top1 = [r["top1_prob"] for r in g if r["top1_prob"] is not None]
            out.append(
                SliceRow(v, family, name, len(g), shown, matured, accepted, _rate(accepted, matured), _mean(top1))
            )
    return out


def shares(counts: Sequence[int]) -> tuple[float, ...]:
    total = sum(counts)
    return tuple(c / total for c in counts) if total else tuple(0.0 for _count in counts)


def smoothed(counts: Sequence[int]) -> tuple[float, ...]:
    total = sum(counts) + PSI_PSEUDO * len(counts)
    return tuple((c + PSI_PSEUDO) / total for c in counts)


def psi(live_counts: Sequence[int], reference_counts: Sequence[int]) -> float:
    """Population stability index of two histograms over the same bins (shares smoothed: see PSI_PSEUDO)."""
    if len(live_counts) != len(reference_counts) or not sum(live_counts) or not sum(reference_counts):
        raise ValueError("psi needs two non-empty histograms over the same bins")
    a, e = smoothed(live_counts), smoothed(reference_counts)
    return math.fsum((x - y) * math.log(x / y) for x, y in zip(a, e))


def drift(live_top1: Sequence[float], reference_top1: Sequence[float] | None) -> Drift:
    """The served version's live top-1 probabilities against its release-time reference, judged by drift_rule();
    its message in the reader's language."""
    live = histogram(live_top1)
    ref = histogram(reference_top1 or ())
    n, m = sum(live), sum(ref)
    if reference_top1 is None or m < MIN_REFERENCE_EVENTS:
        why = _(
            "No release-time reference: it needs at least {needed} suggestions on the version's held-out documents, "
            "and has {has}."
        ).format(needed=MIN_REFERENCE_EVENTS, has=m)
        return Drift(None, n, m, shares(live), shares(ref), "no reference", why)
    if n == 0:
        why = _("Not enough traffic yet: no live suggestions of this version ({needed} needed).").format(
            needed=MIN_DRIFT_EVENTS
        )
        return Drift(None, n, m, shares(live), shares(ref), "not enough traffic", why)
    value = psi(live, ref)
    if n < MIN_DRIFT_EVENTS:
        verdict, message = (
            "not enough traffic",
            _("Not enough traffic yet: {n} live suggestions, {needed} needed for a verdict (PSI so far {psi}).").format(
                n=n, needed=MIN_DRIFT_EVENTS, psi=i18n.number(value, 3)
            ),
        )
    elif value > PSI_WARN:
        verdict, message = (
            "warning",
            _(
                "Warning: the live top-1 distribution has drifted from the release-time one (PSI {psi} > {warn} over "
                "{n} live suggestions)."
            ).format(psi=i18n.number(value, 3), warn=_short(PSI_WARN), n=n),
        )
    else:
        verdict, message = (
            "stable",
            _("Stable: PSI {psi} <= {warn} over {n} live suggestions against {m} at release time.").format(
                psi=i18n.number(value, 3), warn=_short(PSI_WARN), n=n, m=m
            ),
        )
    return Drift(value, n, m, shares(live), shares(ref), verdict, message)


@dataclass(frozen=True)
class Figures:
    """Every figure of the Monitoring page from one read of the store."""

    events: int
    versions: list[str]
    health: list[HealthRow]
    width: str  # of over_time's buckets (bucket_width)
    over_time: list[HealthRow]
    input_quality: list[QualityRow]
    predictions: list[PredictionRow]
    outcomes: list[OutcomeRow]
    slices: dict[str, list[SliceRow]]  # per family of FAMILY_COLUMNS
    top1: dict[str, list[float]]  # per version, the live top-1 probabilities drift() compares


def figures(rows: Sequence[dict], attention_cost: float = DEFAULT_ATTENTION_COST) -> Figures:
    """Every figure from one read; the live net keystrokes saved at `attention_cost` (the served bundle's price,
    SuggestionPolicy.attention_cost; default the lab's)."""
    width = bucket_width(rows)
    top1 = {v: [r["top1_prob"] for r in g if r["top1_prob"] is not None] for v, g in _by_version(rows).items()}
    return Figures(
        len(rows), list(top1), health(rows), width, over_time(rows, width), input_quality(rows), predictions(rows),
        outcomes(rows, attention_cost), {family: slices(rows, family) for family in FAMILY_COLUMNS}, top1,
    )  # fmt: skip
