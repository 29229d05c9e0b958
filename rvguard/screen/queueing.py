"""Queueing formulas behind the P95 screen: non-preemptive priority M/G/c, approximated.

Theory of operation
-------------------
Requests of priority class k (tier order, 0 first) arrive as Poisson
streams at rates λ_k; every class draws its service from one distribution
with mean m and squared coefficient of variation c_s²; C servers; no
preemption. Write ρ_k = λ_k·m/C, σ_k = ρ_0 + … + ρ_k, and a = C·σ_K (the
offered load in Erlangs).

* **Probability of waiting** P_w = ErlangC(C, a) (Erlang 1917; computed by
  the Erlang-B recursion, e.g. Gross & Harris, *Fundamentals of Queueing
  Theory*, §2.3). At a ≥ C every server is always busy: P_w = 1.
* **Class waits** (Cobham 1954, "Priority assignment in waiting line
  problems", Oper. Res. 2(1); its M/M/c form with a common service rate is
  exact — Kella & Yechiali 1985; Gross & Harris §3.4)::

      W_k = P_w · (m/C) / ((1 − σ_{k−1})(1 − σ_k))

  and FIFO is the one-class case W = P_w · (m/C) / (1 − ρ). A class whose
  σ_k ≥ 1 is unstable (W = ∞); the classes above it still get finite waits
  because with P_w = 1 the formula is that of a system whose servers never
  idle.
* **General service** (Allen 1978, *Probability, Statistics and Queueing
  Theory*; Cunneen): multiply every wait by (c_a² + c_s²)/2. With Poisson
  arrivals c_a² = 1. Exact at C = 1 (it is Pollaczek–Khinchine, and with
  priorities Cobham's M/G/1 result); an approximation for C > 1.
* **Waiting-time tail** (stated approximation): an atom 1 − P_w at zero and
  an exponential tail of matched mean, P(W > t) = P_w·exp(−t·P_w / W_k).
  Exact for M/M/c FIFO and for the top class of M/M/c priority (its
  conditional wait is Exp(Cμ − λ_0)); for general service it is the
  Kingman/Whitt heavy-traffic exponential with the Allen–Cunneen mean.
* **Sojourn** T = W + S with W independent of the request's own service S
  (S drawn from the service sample):
  P(T ≤ x) = mean_j 1{s_j ≤ x}·(1 − P_w·exp(−(x − s_j)·P_w/W_k)); the P95 is
  the root of P(T ≤ x) = 0.95, found by bisection.

What it leaves out, and why it is optimistic there: the continuous-batching
coupling of service to load (the batch width and prefill stalls of
`rvguard.sim.backend`), correlation between arrivals, and the divergence of
every term as σ → 1, where a small error in m moves the answer without
bound. Cost: O(C) for Erlang C, O(n · 200) for the P95 over n samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

__all__ = [
    "ServiceDistribution",
    "allen_cunneen",
    "class_waits",
    "erlang_c",
    "sojourn_quantile",
]

F64 = npt.NDArray[np.float64]


def erlang_c(servers: int, load: float) -> float:
    """ErlangC(C, a): the probability an arrival waits in M/M/C at offered load ``a`` Erlangs.

    Why the recursion: B_k = a·B_{k−1}/(k + a·B_{k−1}) never overflows, unlike
    the textbook sum of a^k/k!. Returns 1 when a ≥ C (the queue never empties).

    >>> round(erlang_c(1, 0.5), 6)
    0.5
    >>> round(erlang_c(2, 1.0), 6)
    0.333333
    """
    if servers < 1:
        raise ValueError(f"need at least one server, got {servers}")
    if load <= 0.0:
        return 0.0
    if load >= servers:
        return 1.0
    b = 1.0
    for k in range(1, servers + 1):
        b = load * b / (k + load * b)
    return servers * b / (servers - load * (1.0 - b))


def allen_cunneen(scv_service: float, scv_arrival: float = 1.0) -> float:
    """The Allen–Cunneen factor (c_a² + c_s²)/2 that turns an M/M/c wait into a G/G/c estimate."""
    return (scv_arrival + scv_service) / 2.0


@dataclass(frozen=True)
class ServiceDistribution:
    """A service-time sample (seconds), sorted: its moments and its quantiles.

    Attributes:
        sample: sorted, finite, positive service times.
    """

    sample: F64

    @classmethod
    def of(cls, values: Sequence[float] | F64) -> ServiceDistribution:
        """Validate and sort a sample; raises ValueError on an empty or non-positive one."""
        arr = np.sort(np.asarray(values, dtype=np.float64))
        if arr.size == 0:
            raise ValueError("the service sample is empty")
        if not np.all(np.isfinite(arr)) or arr[0] <= 0.0:
            raise ValueError("service times must be finite and positive")
        return cls(arr)

    @property
    def mean(self) -> float:
        """Sample mean m."""
        return float(self.sample.mean())

    @property
    def scv(self) -> float:
        """Squared coefficient of variation c_s² = Var/m² (population variance)."""
        m = self.mean
        return float(self.sample.var() / (m * m))

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0–100), nearest rank (no interpolation)."""
        n = self.sample.size
        rank = max(1, math.ceil(q / 100.0 * n - 1e-9))
        return float(self.sample[min(rank, n) - 1])

    @classmethod
    def lognormal_through(cls, p50: float, p99: float, *, size: int = 20_000) -> ServiceDistribution:
        """A lognormal service fitted through two percentiles, as a quantile sample.

        For users who know their service percentiles but hold no sample: μ =
        ln p50, σ = ln(p99/p50) / z₀.₉₉, and the sample is the distribution's
        quantiles at (i + ½)/size, so its p50 and p99 reproduce the inputs to
        within a sample step. Lognormal is an assumption (service times are
        positive and right-skewed); the result says so where it is used.
        """
        if not (math.isfinite(p50) and math.isfinite(p99) and 0.0 < p50 <= p99):
            raise ValueError(f"need finite 0 < p50 ≤ p99, got p50={p50!r}, p99={p99!r}")
        z = NormalDist()
        sigma = math.log(p99 / p50) / z.inv_cdf(0.99)
        quantiles = [z.inv_cdf((i + 0.5) / size) for i in range(size)]
        return cls(np.exp(math.log(p50) + sigma * np.asarray(quantiles, dtype=np.float64)))

    def scaled(self, mean: float) -> ServiceDistribution:
        """The same shape rescaled to ``mean`` (c_s² is unchanged)."""
        return ServiceDistribution(self.sample * (mean / self.mean))


def class_waits(rates: Sequence[float], mean: float, servers: int, *, scv: float = 1.0) -> list[float]:
    """Mean wait of each priority class (rates in priority order; module doc formulas).

    Pass a single rate for FIFO. ``inf`` marks an unstable class.

    >>> [round(w, 6) for w in class_waits([0.5], 1.0, 1)]  # M/M/1: ρ/(μ(1−ρ))
    [1.0]
    """
    if mean <= 0.0:
        raise ValueError(f"mean service must be positive, got {mean!r}")
    rhos = [max(r, 0.0) * mean / servers for r in rates]
    p_wait = erlang_c(servers, servers * sum(rhos))
    base = p_wait * (mean / servers) * allen_cunneen(scv)
    waits: list[float] = []
    sigma_prev = 0.0
    for rho in rhos:
        sigma = sigma_prev + rho
        if sigma >= 1.0:
            waits.append(math.inf)
        else:
            waits.append(base / ((1.0 - sigma_prev) * (1.0 - sigma)))
        sigma_prev = sigma
    return waits


def _cdf(x: float, sample: F64, p_wait: float, rate: float) -> float:
    ok = sample[sample <= x]
    if p_wait <= 0.0 or rate == math.inf:
        return ok.size / sample.size
    return float(np.sum(1.0 - p_wait * np.exp(-(x - ok) * rate)) / sample.size)


def sojourn_quantile(
    service: ServiceDistribution, mean_wait: float, p_wait: float, *, q: float = 0.95
) -> float:
    """The ``q`` quantile of T = W + S under the atom-plus-exponential wait (module doc).

    Args:
        service: the service sample S is drawn from.
        mean_wait: W_k, the class's mean wait (``inf``: the answer is ``inf``).
        p_wait: P_w, the probability of waiting at all.
        q: the quantile, in (0, 1).
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    if math.isinf(mean_wait):
        return math.inf
    sample = service.sample
    if p_wait <= 0.0 or mean_wait <= 0.0:
        return _empirical(sample, q)
    theta = mean_wait / p_wait  # conditional mean wait
    rate = 1.0 / theta
    lo = float(sample[0])
    hi = float(sample[-1]) + theta * max(0.0, math.log(p_wait / (1.0 - q))) + 1e-9
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _cdf(mid, sample, p_wait, rate) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return hi


def _empirical(sample: F64, q: float) -> float:
    rank = max(1, math.ceil(q * sample.size - 1e-9))
    return float(sample[rank - 1])
