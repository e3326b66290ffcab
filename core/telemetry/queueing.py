"""A queue fed by Poisson arrivals: a seeded simulation of it, and the closed forms that hold it to account.

    M/M/c (Erlang C), M/M/1: P(W > t) = rho exp(-(mu - lam) t), M/D/1: E[W] = rho D / (2 (1 - rho))

An offered load rho = lam E[S] / c >= 1 has no steady state: it is reported unstable, never looped on. Time is in
any one unit, the caller's.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from core.numbers import integer, percentile

MAX_RATE = 1e9  # arrivals per time unit
MAX_SERVERS = 1024
MIN_CUSTOMERS, MAX_CUSTOMERS = 100, 2_000_000  # a 2 M customer run takes a few seconds of pure Python
MAX_SERVICE_SAMPLES = 1_000_000

Sampler = Callable[[np.random.Generator, int], np.ndarray]
Service = Sequence[float] | np.ndarray | Sampler  # measured times (drawn with replacement) or a sampler


@dataclass(frozen=True)
class QueueResult:
    arrival_rate: float
    servers: int
    offered_load: float  # rho = lam E[S] / c
    stable: bool  # rho < 1; otherwise every wait figure is None (no steady state)
    utilisation: float  # busy share of the servers over the measured window (min(rho, 1) when unstable)
    wait_mean: float | None  # time from arrival to the start of service
    wait_p50: float | None
    wait_p95: float | None
    sojourn_p50: float | None  # wait + service: what the customer waits for the answer
    sojourn_p95: float | None
    customers: int  # simulated customers measured (after the warm-up)


@dataclass(frozen=True)
class ClosedForm:
    """A closed-form steady state of M/M/c (or M/D/1): waits None when rho >= 1."""

    arrival_rate: float
    servers: int
    utilisation: float  # rho
    stable: bool
    wait_mean: float | None
    p_wait: float | None  # P(W > 0): the chance a customer waits at all (Erlang C)
    decay: float | None  # cmu - lam: P(W > t) = p_wait exp(-decay t) for M/M/c; None for M/D/1

    def wait_quantile(self, p: float) -> float | None:
        """The p-quantile of the wait: ln(p_wait / (1 - p)) / decay when p_wait > 1 - p, else 0 (M/M/c only)."""
        if not 0.0 < p < 1.0:
            raise ValueError(f"p must lie in (0, 1), got {p!r}")
        if not self.stable:
            return None
        if self.decay is None or self.p_wait is None:
            raise ValueError("the wait distribution of this queue has no closed form here (M/D/1): use the mean")
        return math.log(self.p_wait / (1.0 - p)) / self.decay if self.p_wait > 1.0 - p else 0.0


def _positive(name: str, value: object, upper: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if not 0.0 < value <= upper:
        raise ValueError(f"{name} must lie in (0, {upper:g}], got {value!r}")
    return float(value)


def _percentile(values: np.ndarray, q: float) -> float:
    """`percentile` of a non-empty array; sorted by numpy first, so the kernel's sort of up to
    MAX_CUSTOMERS values is a single pass over a list already in order."""
    value = percentile(np.sort(values).tolist(), q)  # (n,) -> list of n floats
    if value is None:
        raise ValueError("a percentile of no values")
    return value


def _service_draws(service: Service, rng: np.random.Generator, n: int) -> tuple[np.ndarray, float]:
    """n service times and their mean E[S] (the population mean of a measured sequence, else the draws')."""
    if callable(service):
        draws = np.asarray(service(rng, n), dtype=np.float64)  # (n,)
        if draws.shape != (n,):
            raise ValueError(f"the service sampler must return {n} times, got shape {draws.shape}")
        mean = float(draws.mean()) if n else 0.0
    else:
        times = np.asarray(service, dtype=np.float64)  # (M,)
        if times.ndim != 1 or not 1 <= times.size <= MAX_SERVICE_SAMPLES:
            raise ValueError(
                f"service times must be a 1-D sequence of 1..{MAX_SERVICE_SAMPLES:,} values, got shape {times.shape}"
            )
        if not np.isfinite(times).all() or (times < 0).any():
            raise ValueError("service times must be finite and >= 0")
        draws = times[rng.integers(0, times.size, size=n)]  # (n,) drawn with replacement
        mean = float(times.mean())
    if not np.isfinite(draws).all() or (draws < 0).any():
        raise ValueError("service times from the sampler must be finite and >= 0")
    return draws, mean


def simulate_waits(
    arrival_rate: float,
    service: Service,
    *,
    servers: int = 1,
    customers: int = 20_000,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(arrivals, waits, services, E[S]) of every customer, in arrival order, of one seeded FIFO run."""
    lam = _positive("arrival_rate", arrival_rate, MAX_RATE)
    c = integer("servers", servers, 1, MAX_SERVERS)
    n = integer("customers", customers, MIN_CUSTOMERS, MAX_CUSTOMERS)
    rng = np.random.default_rng(integer("seed", seed, 0, 2**63 - 1))
    gaps = rng.standard_exponential(n)  # (n,) drawn first, whatever the rate: common random numbers
    services, mean = _service_draws(service, rng, n)  # (n,)
    arrivals = np.cumsum(gaps) / lam  # (n,)
    # Kiefer-Wolfowitz: customer k (arriving at a_k) starts at max(a_k, earliest free time) and frees that server
    # S_k later. The draws do not depend on the rate, so two runs with one seed and different rates share their random
    # numbers: the waits grow with the rate customer by customer, which makes "the largest load within a target" a
    # clean bisection.
    free = [0.0] * c  # a heap: the time each server next falls free
    waits = [0.0] * n
    for k, (a, s) in enumerate(zip(arrivals.tolist(), services.tolist())):
        start = a if a >= free[0] else free[0]
        heapq.heapreplace(free, start + s)
        waits[k] = start - a
    return arrivals, np.asarray(waits), services, mean


def simulate(
    arrival_rate: float,
    service: Service,
    *,
    servers: int = 1,
    customers: int = 20_000,
    warmup: float = 0.1,
    seed: int = 0,
) -> QueueResult:
    """Summary of one seeded run; the first `warmup` share of customers (the queue filling up from empty) is not
    measured. Unstable loads (rho >= 1) are reported without simulating."""
    if isinstance(warmup, bool) or not isinstance(warmup, (int, float)) or not 0.0 <= warmup <= 0.5:
        raise ValueError(f"warmup must be a share in [0, 0.5], got {warmup!r}")
    lam = _positive("arrival_rate", arrival_rate, MAX_RATE)
    c = integer("servers", servers, 1, MAX_SERVERS)
    if not callable(service):
        times = np.asarray(service, dtype=np.float64)
        if times.ndim == 1 and times.size and np.isfinite(times).all():
            rho = lam * float(times.mean()) / c
            if rho >= 1.0:  # no steady state: say so at once, however many customers were asked for
                return QueueResult(lam, c, rho, False, 1.0, None, None, None, None, None, 0)
    arrivals, waits, services, mean = simulate_waits(lam, service, servers=c, customers=customers, seed=seed)
    rho = lam * mean / c
    if rho >= 1.0:
        return QueueResult(lam, c, rho, False, 1.0, None, None, None, None, None, 0)
    first = int(len(waits) * warmup)
    w, s = waits[first:], services[first:]  # (n_kept,)
    span = float(arrivals[-1] - arrivals[first]) or math.inf
    sojourn = w + s  # (n_kept,)
    return QueueResult(
        arrival_rate=lam,
        servers=c,
        offered_load=rho,
        stable=True,
        utilisation=min(1.0, float(s.sum()) / (c * span)),
        wait_mean=float(w.mean()),
        wait_p50=_percentile(w, 50),
        wait_p95=_percentile(w, 95),
        sojourn_p50=_percentile(sojourn, 50),
        sojourn_p95=_percentile(sojourn, 95),
        customers=int(w.size),
    )


def mmc(lam: float, mu: float, servers: int = 1) -> ClosedForm:
    """M/M/c: rho = lam / (c mu); the Erlang C probability of waiting P(W > 0) = C(c, a) with a = lam / mu;
    mean wait C / (c mu - lam); P(W > t) = C exp(-(c mu - lam) t)."""
    lam, mu = _positive("lam", lam, MAX_RATE), _positive("mu", mu, MAX_RATE)
    c = integer("servers", servers, 1, MAX_SERVERS)
    a = lam / mu
    rho = a / c
    if rho >= 1.0:
        return ClosedForm(lam, c, rho, False, None, None, None)
    term, below = 1.0, 1.0  # a^k / k!, summed for k < c (Erlang C, term by term so no factorial overflows)
    for k in range(1, c):
        term *= a / k
        below += term
    top = term * a / c / (1.0 - rho)  # a^c / (c! (1 - rho))
    p_wait = top / (below + top)
    decay = c * mu - lam
    return ClosedForm(lam, c, rho, True, p_wait / decay, p_wait, decay)


def mm1(lam: float, mu: float) -> ClosedForm:
    """M/M/1: rho = lam / mu, mean wait rho / (mu - lam), P(W > t) = rho exp(-(mu - lam) t)."""
    return mmc(lam, mu, 1)


def md1(lam: float, service: float) -> ClosedForm:
    """M/D/1 with service time D: rho = lam D, mean wait rho D / (2 (1 - rho)), P(W > 0) = rho."""
    lam, d = _positive("lam", lam, MAX_RATE), _positive("service", service)
    rho = lam * d
    if rho >= 1.0:
        return ClosedForm(lam, 1, rho, False, None, None, None)
    return ClosedForm(lam, 1, rho, True, rho * d / (2.0 * (1.0 - rho)), rho, None)


def mgc_mean_wait(lam: float, mean: float, scv: float, servers: int = 1) -> float | None:
    """Mean wait of M/G/c with service mean `mean` and squared coefficient of variation `scv` (Var / mean^2):
    (1 + scv) / 2 times the M/M/c mean wait. For one server this is Pollaczek-Khinchine, exactly
    lam E[S^2] / (2 (1 - rho)); for more it is the Lee-Longton approximation. None when rho >= 1."""
    if isinstance(scv, bool) or not isinstance(scv, (int, float)) or not 0.0 <= scv < math.inf:
        raise ValueError(f"scv must be a finite number >= 0, got {scv!r}")
    base = mmc(lam, 1.0 / _positive("mean", mean), servers)
    return None if base.wait_mean is None else (1.0 + scv) / 2.0 * base.wait_mean
