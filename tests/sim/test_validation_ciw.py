"""The simulator against an independent queueing library (ciw): M/M/c, FIFO and priority.

With the `ExponentialService` model (no batching coupling) the simulator is
an M/M/c queue; its mean sojourn must agree with ciw's on the same
parameters, and both with the Erlang-C formula, within statistical
tolerance (a few standard errors over seeds).
"""

from __future__ import annotations

import math
import random
import statistics

import ciw
import pytest

from rvguard.sim.backend import ExponentialService
from rvguard.sim.run import run_once
from rvguard.sim.workloads import merge_streams

from ._common import ciw_sojourns, poisson_classes, single_tenant, sojourns_by_tenant

LAM, MU, C, HORIZON, WARMUP = 3.0, 1.0, 4, 3000.0, 200.0


def _erlang_c_sojourn(lam: float, mu: float, c: int) -> float:
    a = lam / mu
    rho = a / c
    top = a**c / math.factorial(c) / (1 - rho)
    p_wait = top / (sum(a**k / math.factorial(k) for k in range(c)) + top)
    return p_wait / (c * mu - lam) + 1 / mu


def _ours(seed: int, tiers: int) -> dict[str, float]:
    contract = single_tenant(C, tiers=tiers)
    arrivals = merge_streams(poisson_classes(random.Random(seed), LAM, tiers, HORIZON), contract)
    events = run_once(contract, arrivals, model=ExponentialService(MU), seed=seed).result.events
    return {k: statistics.mean(v) for k, v in sojourns_by_tenant(events, WARMUP).items()}


def _ciw(seed: int, tiers: int) -> dict[str, float]:
    soj = ciw_sojourns(
        seed,
        lam=LAM,
        tiers=tiers,
        servers=C,
        horizon=HORIZON,
        warmup=WARMUP,
        service=lambda: ciw.dists.Exponential(MU),
    )
    return {k: statistics.mean(v) for k, v in soj.items()}


def _agree(ours: list[float], theirs: list[float]) -> None:
    diff = statistics.mean(ours) - statistics.mean(theirs)
    se = math.sqrt(statistics.variance(ours) / len(ours) + statistics.variance(theirs) / len(theirs))
    assert abs(diff) <= 4 * se + 0.02, (
        f"ours {statistics.mean(ours):.3f} vs ciw {statistics.mean(theirs):.3f}"
    )


def test_mmc_fifo_mean_sojourn() -> None:
    seeds = range(4)
    ours = [_ours(s, 1)["c0"] for s in seeds]
    theirs = [_ciw(s, 1)["c0"] for s in seeds]
    _agree(ours, theirs)
    assert statistics.mean(ours) == pytest.approx(_erlang_c_sojourn(LAM, MU, C), rel=0.1)


def test_mmc_nonpreemptive_priority_mean_sojourn() -> None:
    seeds = range(4)
    ours = [_ours(s, 2) for s in seeds]
    theirs = [_ciw(s, 2) for s in seeds]
    for cls in ("c0", "c1"):
        _agree([o[cls] for o in ours], [t[cls] for t in theirs])
    assert statistics.mean(o["c0"] for o in ours) < statistics.mean(o["c1"] for o in ours)
