"""The queueing formulas against exact M/M/c, M/M/1-priority and M/D/1 results."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rvguard.screen.queueing import (
    ServiceDistribution,
    allen_cunneen,
    class_waits,
    erlang_c,
    sojourn_quantile,
)

# Stated tolerance for the sojourn P95 against a closed form: the service
# distribution is a 20 000-point quantile grid of the exponential, whose
# mean is off by < 0.1 %; 1 % covers it.
P95_TOL = 0.01


def _erlang_c_sum(c: int, a: float) -> float:
    """Textbook Erlang C: the sum of a^k/k! (independent of the recursion)."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def _exp_grid(mean: float, n: int = 20_000) -> ServiceDistribution:
    u = (np.arange(n) + 0.5) / n
    return ServiceDistribution.of(-np.log1p(-u) * mean)


def _mmc_sojourn_p95(lam_top: float, mu: float, c: int, p_wait: float) -> float:
    """Exact P95 of W + S when W has an atom and an Exp(cμ − λ_top) tail, S ~ Exp(μ)."""
    delta = c * mu - lam_top

    def tail(x: float) -> float:
        return math.exp(-mu * x) + p_wait * mu / (mu - delta) * (math.exp(-delta * x) - math.exp(-mu * x))

    lo, hi = 0.0, 100.0 / min(mu, delta)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) > 0.05 else (lo, mid)
    return hi


@given(st.integers(1, 12), st.floats(0.01, 0.99))
def test_erlang_c_matches_the_sum_formula(c: int, rho: float) -> None:
    assert erlang_c(c, c * rho) == pytest.approx(_erlang_c_sum(c, c * rho), rel=1e-9)


def test_erlang_c_edges() -> None:
    assert erlang_c(3, 0.0) == 0.0
    assert erlang_c(3, 3.0) == 1.0
    with pytest.raises(ValueError, match="server"):
        erlang_c(0, 1.0)


@pytest.mark.parametrize(("c", "lam", "mu"), [(1, 0.7, 1.0), (4, 8.0, 2.5), (8, 7.0, 1.0)])
def test_mmc_fifo_mean_wait_is_erlang_c(c: int, lam: float, mu: float) -> None:
    exact = _erlang_c_sum(c, lam / mu) / (c * mu - lam)
    assert class_waits([lam], 1.0 / mu, c, scv=1.0)[0] == pytest.approx(exact, rel=1e-9)


def test_mm1_priority_is_cobham() -> None:
    lam1, lam2, mu = 0.3, 0.5, 1.0
    rho1, rho = lam1 / mu, (lam1 + lam2) / mu
    w0 = rho / mu  # Σ λ E[S²]/2 for exponential service
    w = class_waits([lam1, lam2], 1 / mu, 1)
    assert w[0] == pytest.approx(w0 / (1 - rho1), rel=1e-12)
    assert w[1] == pytest.approx(w0 / ((1 - rho1) * (1 - rho)), rel=1e-12)


def test_md1_is_pollaczek_khinchine() -> None:
    lam, s = 0.6, 1.0
    w = class_waits([lam], s, 1, scv=0.0)[0]
    assert w == pytest.approx(lam * s * s / (2 * (1 - lam * s)), rel=1e-12)
    assert allen_cunneen(0.0) == 0.5


def test_saturated_lower_class_leaves_the_top_class_finite() -> None:
    w = class_waits([1.0, 50.0], 1.0, 4)
    assert math.isinf(w[1])
    # every server always busy: the top class sees an M/M/1 with rate Cμ
    assert w[0] == pytest.approx(1 / (4 - 1.0), rel=1e-12)
    assert math.isinf(class_waits([5.0], 1.0, 4)[0])


@pytest.mark.parametrize(("c", "lam", "mu"), [(1, 0.6, 1.0), (4, 2.8, 1.0), (4, 8.5, 2.4)])
def test_mmc_fifo_sojourn_p95_matches_closed_form(c: int, lam: float, mu: float) -> None:
    p_wait = _erlang_c_sum(c, lam / mu)
    service = _exp_grid(1 / mu)
    w = class_waits([lam], 1 / mu, c)[0]
    got = sojourn_quantile(service, w, p_wait)
    assert got == pytest.approx(_mmc_sojourn_p95(lam, mu, c, p_wait), rel=P95_TOL)


def test_mm1_priority_top_class_sojourn_p95() -> None:
    lam1, lam2, mu = 0.4, 0.45, 1.0
    p_wait = (lam1 + lam2) / mu
    w = class_waits([lam1, lam2], 1 / mu, 1)[0]
    got = sojourn_quantile(_exp_grid(1 / mu), w, p_wait)
    assert got == pytest.approx(_mmc_sojourn_p95(lam1, mu, 1, p_wait), rel=P95_TOL)


def test_no_wait_gives_the_service_quantile() -> None:
    s = ServiceDistribution.of([1.0, 2.0, 3.0, 4.0] * 5)
    assert sojourn_quantile(s, 0.0, 0.0) == 4.0
    assert math.isinf(sojourn_quantile(s, math.inf, 1.0))
    with pytest.raises(ValueError, match="q must"):
        sojourn_quantile(s, 1.0, 0.5, q=1.0)


def test_service_distribution() -> None:
    s = ServiceDistribution.of([3.0, 1.0, 2.0, 4.0])
    assert s.mean == 2.5
    assert s.scv == pytest.approx(1.25 / 6.25)
    assert s.percentile(50) == 2.0
    assert s.percentile(99) == 4.0
    assert s.scaled(5.0).mean == pytest.approx(5.0)
    assert s.scaled(5.0).scv == pytest.approx(s.scv)
    for bad in ([], [0.0, 1.0], [float("nan")]):
        with pytest.raises(ValueError, match="service"):
            ServiceDistribution.of(bad)
