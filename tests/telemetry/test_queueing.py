"""core.telemetry.queueing: the seeded simulation against closed forms computed here by hand (M/M/1 mean and p95
wait, M/D/1 and M/G/1 mean wait by Pollaczek-Khinchine, M/M/2 by Erlang C), each within 4 standard errors from
batch means of the simulated waits; a deliberately wrong simulation (round-robin servers) is caught by the same
rule; an offered load of 1 or more is reported unstable at once; the same seed gives waits that grow with the
rate; bad inputs are refused."""

import math

import numpy as np
import pytest

from core.telemetry.queueing import ClosedForm, md1, mgc_mean_wait, mmc, simulate, simulate_waits

CUSTOMERS = 200_000
WARMUP = 0.1
BATCHES = 20
SIGMAS = 4.0  # a deterministic seeded run; 4 standard errors leaves room for an unlucky seed, not for a bug


def exponential(mean):
    return lambda rng, n: rng.exponential(mean, n)


def kept(waits):
    return waits[int(len(waits) * WARMUP) :]


def nearest_rank(values, q):
    """The q-th percentile counted by hand: the ceil(q / 100 * n)-th smallest value."""
    return float(np.sort(values)[math.ceil(q / 100 * len(values)) - 1])


def batch_se(values, statistic=np.mean):
    """The standard error of `statistic` over the run from BATCHES consecutive batches (the batch-means method:
    batches far longer than the queue's memory are nearly independent)."""
    per_batch = np.array([statistic(b) for b in np.array_split(values, BATCHES)])
    return per_batch.std(ddof=1) / math.sqrt(BATCHES)


def assert_within(simulated, expected, se):
    assert se > 0
    assert abs(simulated - expected) <= SIGMAS * se, (simulated, expected, se)


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_exponential_service_matches_mm1_mean_and_p95(rho):
    mu, lam = 1.0, rho
    _, waits, _, _ = simulate_waits(lam, exponential(1 / mu), customers=CUSTOMERS, seed=11)
    w = kept(waits)
    mean_by_hand = rho / (mu - lam)
    p95_by_hand = math.log(rho / 0.05) / (mu - lam)  # P(W > t) = rho exp(-(mu - lam) t) = 0.05
    assert_within(w.mean(), mean_by_hand, batch_se(w))
    assert_within(nearest_rank(w, 95), p95_by_hand, batch_se(w, lambda b: nearest_rank(b, 95)))
    # the closed form the cost report uses is the same formula
    closed = mmc(lam, mu, 1)
    assert closed.utilisation == pytest.approx(rho, rel=1e-12)
    assert closed.wait_mean == pytest.approx(mean_by_hand, rel=1e-12)
    assert closed.wait_quantile(0.95) == pytest.approx(p95_by_hand, rel=1e-12)
    assert closed.wait_quantile(0.1) == 0.0  # 1 - p > rho: most customers never wait
    # simulate's summary is the kept part of the same run
    summary = simulate(lam, exponential(1 / mu), customers=CUSTOMERS, seed=11, warmup=WARMUP)
    assert summary.stable and summary.customers == w.size
    assert summary.wait_mean == pytest.approx(w.mean(), rel=1e-12)
    assert summary.wait_p95 == nearest_rank(w, 95)
    assert summary.wait_p50 == nearest_rank(w, 50) == float(np.percentile(w, 50, method="inverted_cdf"))
    assert summary.utilisation == pytest.approx(rho, abs=0.02)


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_deterministic_service_matches_md1_mean(rho):
    d = 2.0
    lam = rho / d
    _, waits, services, _ = simulate_waits(lam, [d], customers=CUSTOMERS, seed=5)
    assert (services == d).all()
    w = kept(waits)
    assert_within(w.mean(), rho * d / (2 * (1 - rho)), batch_se(w))
    assert md1(lam, d).wait_mean == pytest.approx(rho * d / (2 * (1 - rho)), rel=1e-12)


def test_measured_service_times_match_pollaczek_khinchine():
    """Service drawn from a fixed list (as the cost report draws measured times): M/G/1 mean wait
    lam E[S^2] / (2 (1 - rho)) with the list's own moments."""
    times = np.random.default_rng(3).lognormal(mean=-3.0, sigma=0.6, size=300)  # like suggestion times, seconds
    mean, second = times.mean(), (times**2).mean()
    lam = 0.7 / mean
    _, waits, _, _ = simulate_waits(lam, times, customers=CUSTOMERS, seed=9)
    by_hand = lam * second / (2 * (1 - lam * mean))
    w = kept(waits)
    assert_within(w.mean(), by_hand, batch_se(w))
    assert mgc_mean_wait(lam, mean, times.var() / mean**2, 1) == pytest.approx(by_hand, rel=1e-9)


def test_two_servers_match_erlang_c():
    lam, mu = 1.6, 1.0  # rho = 0.8 per server
    rho = lam / (2 * mu)
    p_wait = 2 * rho**2 / (1 + rho)  # Erlang C for c = 2
    mean_by_hand = p_wait / (2 * mu - lam)
    p95_by_hand = math.log(p_wait / 0.05) / (2 * mu - lam)
    _, waits, _, _ = simulate_waits(lam, exponential(1 / mu), servers=2, customers=CUSTOMERS, seed=2)
    w = kept(waits)
    assert_within(w.mean(), mean_by_hand, batch_se(w))
    assert_within(nearest_rank(w, 95), p95_by_hand, batch_se(w, lambda b: nearest_rank(b, 95)))
    closed = mmc(lam, mu, 2)
    assert closed.p_wait == pytest.approx(p_wait, rel=1e-12)
    assert closed.wait_mean == pytest.approx(mean_by_hand, rel=1e-12)


def test_a_wrong_simulation_fails_the_same_check():
    """Round-robin over two servers (each an M/M/1 fed every other customer, not the first free server) waits
    far longer than Erlang C: the 4-standard-error rule must reject it, or it would pass a bug too."""
    lam, mu = 1.6, 1.0
    rng = np.random.default_rng(2)
    arrivals = np.cumsum(rng.standard_exponential(CUSTOMERS)) / lam
    services = rng.exponential(1 / mu, CUSTOMERS)
    free, waits = [0.0, 0.0], np.empty(CUSTOMERS)
    for k in range(CUSTOMERS):
        server = k % 2
        start = max(arrivals[k], free[server])
        free[server] = start + services[k]
        waits[k] = start - arrivals[k]
    w = kept(waits)
    mean_by_hand = mmc(lam, mu, 2).wait_mean
    assert abs(w.mean() - mean_by_hand) > SIGMAS * batch_se(w)


@pytest.mark.parametrize(
    "service, lam", [([1.0], 1.0), ([0.5, 1.5], 1.2), (lambda rng, n: rng.exponential(1.0, n), 1.5)]
)
def test_an_offered_load_of_one_or_more_is_unstable(service, lam):
    r = simulate(lam, service, customers=1_000, seed=0)
    assert not r.stable and r.offered_load >= 1.0
    assert (r.wait_mean, r.wait_p50, r.wait_p95, r.sojourn_p50, r.sojourn_p95) == (None,) * 5
    assert r.utilisation == 1.0
    if not callable(service):
        assert r.customers == 0  # refused before simulating anything: no loop over a growing queue
    huge = simulate(lam, service, customers=2_000_000, seed=0) if not callable(service) else r
    assert not huge.stable and huge.customers == 0


def test_closed_forms_report_unstable_loads():
    for closed in (mmc(1.0, 1.0, 1), mmc(2.0, 1.0, 1), md1(1.0, 1.0), mmc(4.0, 1.0, 3)):
        assert isinstance(closed, ClosedForm) and not closed.stable
        assert closed.wait_mean is None and closed.wait_quantile(0.95) is None
    assert mgc_mean_wait(2.0, 1.0, 0.5, 1) is None


def test_the_same_seed_gives_waits_that_grow_with_the_rate():
    """Common random numbers: the bisection for the largest class relies on p95 growing with the load."""
    times = np.random.default_rng(1).lognormal(-4.0, 0.5, 200)
    p95s = [simulate(lam, times, servers=2, customers=5_000, seed=4).sojourn_p95 for lam in range(10, 60, 5)]
    assert all(a <= b for a, b in zip(p95s, p95s[1:])), p95s
    again = simulate(30, times, servers=2, customers=5_000, seed=4)
    assert again == simulate(30, times, servers=2, customers=5_000, seed=4)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(arrival_rate=float("nan")), "arrival_rate"),
        (dict(arrival_rate=0.0), "arrival_rate"),
        (dict(arrival_rate=1e12), "arrival_rate"),
        (dict(servers=0), "servers"),
        (dict(servers=True), "servers"),
        (dict(customers=10), "customers"),
        (dict(customers=10**9), "customers"),
        (dict(service=[]), "service"),
        (dict(service=[0.1, -1.0]), "service"),
        (dict(service=[0.1, float("inf")]), "service"),
        (dict(warmup=0.9), "warmup"),
        (dict(seed=-1), "seed"),
    ],
)
def test_bad_inputs_are_refused(kwargs, words):
    args = dict(arrival_rate=0.5, service=[0.1], servers=1, customers=1_000, seed=0) | kwargs
    with pytest.raises(ValueError, match=words):
        simulate(args.pop("arrival_rate"), args.pop("service"), **args)
