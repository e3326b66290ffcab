"""One class on one machine: the queues its suggestions and training runs join, and the largest class served in time.

Learners typing make a Poisson stream of suggestion requests served first come first served by the cores the
training slots leave; training runs arrive Poisson and hold a slot for their training time (M/D/c). The request
rate is measured from page traffic when there is enough of it.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
from sqlalchemy import select

from core.telemetry.queueing import mgc_mean_wait, simulate

MAX_LEARNERS = 10_000  # the largest class searched
CUSTOMERS = 20_000  # simulated suggestions (or training runs) per queue run
WARMUP = 0.1  # share of them that only warms the queue up (core.telemetry.queueing.simulate)
MIN_GAPS, MAX_GAP_SECONDS, MAX_EVENTS = 100, 60.0, 200_000  # enough traffic, a break, rows read at most
CURVE_POINTS = 12


@dataclass(frozen=True)
class CurvePoint:
    learners: int
    offered_load: float
    stable: bool
    wait_p95_ms: float | None  # None when unstable (no steady state)
    sojourn_p95_ms: float | None


@dataclass(frozen=True)
class Queueing:
    learners: int
    requests_per_learner_per_second: float
    rate_source: str  # "telemetry", "default" or "given"
    rate_note: str
    cores: int
    training_slots: int
    serving_workers: int
    latency_target_ms: float
    customers: int
    warmup: float
    seed: int
    arrival_rate_per_second: float
    offered_load: float  # rho = lam E[S] / workers
    stable: bool
    utilisation: float
    wait_mean_ms: float | None
    wait_p50_ms: float | None
    wait_p95_ms: float | None
    sojourn_p95_ms: float | None  # wait + service: what a learner waits for a suggestion
    closed_form_wait_mean_ms: float | None  # Pollaczek-Khinchine (one worker) or Lee-Longton (more)
    training_requests_per_hour: float
    training_service_seconds: float
    training_offered_load: float
    training_stable: bool
    training_wait_mean_seconds: float | None
    training_wait_p50_seconds: float | None
    training_wait_p95_seconds: float | None
    training_closed_form_wait_mean_seconds: float | None  # M/D/1 (one slot) or Lee-Longton with scv 0
    largest_class: int  # the most learners whose simulated p95 sojourn <= latency_target_ms (0: not one)
    largest_class_capped: bool  # True when MAX_LEARNERS already passes
    curve: tuple[CurvePoint, ...]

    def rows(self) -> list[tuple[str, str, str]]:
        """(figure, value as text, unit) for the cost table (`CostReport.table`)."""
        q = self
        formula = "Pollaczek-Khinchine" if q.serving_workers == 1 else "Lee-Longton approximation"
        t_formula = "M/D/1" if q.training_slots == 1 else "Lee-Longton approximation"
        return [
            (
                "arrivals",
                _f(q.arrival_rate_per_second),
                f"/s ({q.learners} learners x {q.requests_per_learner_per_second:g}/s, {q.rate_source})",
            ),
            ("serving workers", str(q.serving_workers), f"({q.cores} cores - {q.training_slots} training slot(s))"),
            ("serving utilisation", _f(q.utilisation, 3), f"(offered load {q.offered_load:.3f})"),
            ("wait p50", _f(q.wait_p50_ms), "ms (simulated)"),
            ("wait p95", _f(q.wait_p95_ms), "ms (simulated)"),
            ("wait mean", _f(q.wait_mean_ms), f"ms (simulated; {formula} {_f(q.closed_form_wait_mean_ms)})"),
            ("time to a suggestion p95", _f(q.sojourn_p95_ms), f"ms (target {q.latency_target_ms:g})"),
            (
                "training queue utilisation",
                _f(q.training_offered_load, 3),
                f"({q.training_requests_per_hour:g} runs/hour)",
            ),
            ("training wait p50", _f(q.training_wait_p50_seconds, 1), "s (simulated)"),
            ("training wait p95", _f(q.training_wait_p95_seconds, 1), "s (simulated)"),
            (
                "training wait mean",
                _f(q.training_wait_mean_seconds, 1),
                f"s (simulated; {t_formula} {_f(q.training_closed_form_wait_mean_seconds, 1)})",
            ),
            (
                "largest class within the target",
                f"{q.largest_class:,}{'+' if q.largest_class_capped else ''}",
                "learners",
            ),
        ]


def _seconds(at: object) -> float | None:
    """A recorded time as epoch seconds: a number as it is, an ISO 8601 text parsed; None otherwise."""
    if isinstance(at, (int, float)) and not isinstance(at, bool) and math.isfinite(at):
        return float(at)
    if isinstance(at, str):
        try:
            return datetime.fromisoformat(at).timestamp()
        except ValueError:
            return None
    return None


def measured_request_rate(db: Path | str) -> tuple[float | None, str]:
    """(suggestions per learner per second while typing, how it was found); None when the database is absent,
    unreadable or holds fewer than MIN_GAPS usable gaps of page traffic. `db` is the SQLite file, or the
    PostgreSQL URL of LAB_DATABASE_URL (read with one SELECT; its tables are never created or migrated here)."""
    if isinstance(db, str) and "://" in db:
        return _rate_from(*_server_rows(db))
    db = Path(db)
    if not db.is_file():
        return None, f"no telemetry database at {str(db)!r} yet"
    try:
        # Read-only: a cost report never creates, migrates or sets aside the database the server records to, as the
        # telemetry store's writer may.
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=2.0)
        try:
            rows = con.execute(
                "SELECT session, at FROM events WHERE kind = 'suggestion' AND surface = 'page' "
                "AND session IS NOT NULL ORDER BY session, at LIMIT ?",
                (MAX_EVENTS,),
            ).fetchall()
        finally:
            con.close()
    except sqlite3.Error as e:
        return None, f"the telemetry database {str(db)!r} cannot be read ({' '.join(str(e).split())})"
    return _rate_from(rows, "")


def _server_rows(url: str) -> tuple[list, str]:
    """The same rows from a PostgreSQL server, or ([], why not)."""
    from core.database import Database
    from core.telemetry.schema import EVENTS

    db = Database(url, path_env="", default="", what="telemetry database", timeout_ms=2000, error=RuntimeError)
    c = EVENTS.c
    query = (
        select(c.session, c.at)
        .where(c.kind == "suggestion", c.surface == "page", c.session.is_not(None))
        .order_by(c.session, c.at)
        .limit(MAX_EVENTS)
    )
    try:
        with db.transaction() as conn:
            return [tuple(r) for r in conn.execute(query)], ""
    except Exception as e:  # noqa: BLE001 - any failure of the server is reported as why there is no rate
        return [], f"the telemetry database {db.name!r} cannot be read ({' '.join(str(e).split())[:200]})"
    finally:
        db.dispose()


def _rate_from(rows: list, problem: str) -> tuple[float | None, str]:
    if problem:
        return None, problem
    gaps: list[float] = []
    sessions: set[object] = set()
    last: dict[object, float] = {}
    for session, at in rows:
        t = _seconds(at)
        if t is None:
            continue
        if session in last and 0.0 < t - last[session] <= MAX_GAP_SECONDS:
            gaps.append(t - last[session])
            sessions.add(session)
        last[session] = t
    if len(gaps) < MIN_GAPS:
        return None, (
            f"the telemetry database holds {len(gaps)} gaps between a page session's suggestions, fewer than "
            f"{MIN_GAPS}: not enough traffic to measure a rate"
        )
    return len(gaps) / sum(gaps), (
        f"measured: {len(gaps):,} gaps of at most {MAX_GAP_SECONDS:g} s between suggestions of {len(sessions)} page "
        "sessions"
    )


def _f(value: float | None, digits: int = 2) -> str:
    return "n/a (unstable)" if value is None else f"{value:,.{digits}f}"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def class_sojourn_p95_ms(learners: int, rate: float, service_s: np.ndarray, workers: int, seed: int) -> float | None:
    """The simulated p95 sojourn (ms) of a class of `learners`; None when their load is unstable. The same seed for
    every class size: common random numbers, so the figure grows with the class."""
    return _ms(simulate(learners * rate, service_s, servers=workers, customers=CUSTOMERS, seed=seed).sojourn_p95)


def largest_class(rate: float, service_s: np.ndarray, workers: int, target_ms: float, seed: int) -> tuple[int, bool]:
    """(the largest n in 1..MAX_LEARNERS whose p95 sojourn is within target_ms, whether MAX_LEARNERS passed), by
    bisection; 0 when a single learner already misses the target."""

    def passes(n: int) -> bool:
        p95 = class_sojourn_p95_ms(n, rate, service_s, workers, seed)
        return p95 is not None and p95 <= target_ms

    if not passes(1):
        return 0, False
    if passes(MAX_LEARNERS):
        return MAX_LEARNERS, True
    lo, hi = 1, MAX_LEARNERS  # passes(lo) and not passes(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if passes(mid) else (lo, mid)
    return lo, False


def class_queueing(
    service_ms: tuple[float, ...],
    training_seconds: float,
    *,
    learners: int,
    rate: float,
    rate_source: str,
    rate_note: str,
    cores: int,
    training_slots: int,
    training_per_hour: float,
    target_ms: float,
    seed: int,
) -> Queueing:
    """Both queues of the pattern (module docstring), the largest class within target_ms and the p95 curve."""
    service_s = np.asarray(service_ms, dtype=np.float64) / 1000.0  # (samples,)
    workers = max(1, cores - training_slots)
    lam = learners * rate
    q = simulate(lam, service_s, servers=workers, customers=CUSTOMERS, warmup=WARMUP, seed=seed)
    mean = float(service_s.mean())
    closed = mgc_mean_wait(lam, mean, float(service_s.var()) / mean**2, workers) if mean > 0 else 0.0
    if training_per_hour > 0 and training_slots > 0:
        t_lam = training_per_hour / 3600.0
        t = simulate(t_lam, [training_seconds], servers=training_slots, customers=CUSTOMERS, warmup=WARMUP, seed=seed)
        training = (t.offered_load, t.stable, t.wait_mean, t.wait_p50, t.wait_p95)
        t_closed = mgc_mean_wait(t_lam, training_seconds, 0.0, training_slots)
    else:  # no training traffic, or no slot for it: nothing waits for one
        training, t_closed = (0.0, True, 0.0, 0.0, 0.0), 0.0
    best, capped = largest_class(rate, service_s, workers, target_ms, seed)
    saturating = math.ceil(workers / (rate * mean)) if mean > 0 else MAX_LEARNERS  # offered load 1
    top = min(MAX_LEARNERS, max(learners, best + 1, math.ceil(1.1 * saturating)))
    sizes = {*np.linspace(1, top, CURVE_POINTS).round().astype(int).tolist(), learners, best, best + 1}
    curve = []
    for n in sorted(n for n in sizes if 1 <= n <= MAX_LEARNERS):
        r = simulate(n * rate, service_s, servers=workers, customers=CUSTOMERS, warmup=WARMUP, seed=seed)
        curve.append(CurvePoint(n, r.offered_load, r.stable, _ms(r.wait_p95), _ms(r.sojourn_p95)))
    return Queueing(
        learners=learners,
        requests_per_learner_per_second=rate,
        rate_source=rate_source,
        rate_note=rate_note,
        cores=cores,
        training_slots=training_slots,
        serving_workers=workers,
        latency_target_ms=target_ms,
        customers=CUSTOMERS,
        warmup=WARMUP,
        seed=seed,
        arrival_rate_per_second=lam,
        offered_load=q.offered_load,
        stable=q.stable,
        utilisation=q.utilisation,
        wait_mean_ms=_ms(q.wait_mean),
        wait_p50_ms=_ms(q.wait_p50),
        wait_p95_ms=_ms(q.wait_p95),
        sojourn_p95_ms=_ms(q.sojourn_p95),
        closed_form_wait_mean_ms=_ms(closed),
        training_requests_per_hour=training_per_hour,
        training_service_seconds=training_seconds,
        training_offered_load=training[0],
        training_stable=training[1],
        training_wait_mean_seconds=training[2],
        training_wait_p50_seconds=training[3],
        training_wait_p95_seconds=training[4],
        training_closed_form_wait_mean_seconds=t_closed,
        largest_class=best,
        largest_class_capped=capped,
        curve=tuple(curve),
    )
