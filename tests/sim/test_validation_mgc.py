"""The simulator against ciw: exponential, lognormal and deterministic service, mean and P95 sojourn.

test_validation_ciw.py checks M/M/c means against ciw and Erlang C; a mean
alone can hide a wrong dispatch order, so here M/M/c's P95 is compared too.
A P95 comparison needs the whole sojourn distribution to match, and a
general service (M/G/c) breaks the memorylessness that would forgive a
service clock started at the wrong moment. Both queues run the same model (Poisson arrivals, i.i.d. service,
C servers, FIFO or two-class non-preemptive priority) on independent seeds;
per seed we take the mean and the P95 sojourn of each class after a
warm-up, and require the two simulators' seed-averages to agree within
4 standard errors (plus 3 % of the value for the P95's small bias).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable

import ciw
import pytest

from rvguard.sim.backend import DeterministicService, ExponentialService, LognormalService, ServiceModel
from rvguard.sim.run import run_once
from rvguard.sim.workloads import merge_streams

from ._common import ciw_sojourns, poisson_classes, single_tenant, sojourns_by_tenant

LAM, C, HORIZON, WARMUP, SEEDS = 3.0, 4, 2000.0, 150.0, range(5)
SIGMA = 0.8
MU_LOG = -(SIGMA**2) / 2  # mean service 1.0
Stats = dict[str, tuple[float, float]]  # class → (mean, p95)


def _p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[-1]


def _summary(soj: dict[str, list[float]]) -> Stats:
    return {k: (statistics.fmean(v), _p95(v)) for k, v in soj.items()}


def _ours(seed: int, tiers: int, model: ServiceModel) -> Stats:
    contract = single_tenant(C, tiers=tiers)
    streams = poisson_classes(random.Random(f"mgc:{seed}"), LAM, tiers, HORIZON)
    events = run_once(contract, merge_streams(streams, contract), model=model, seed=seed).result.events
    return _summary(sojourns_by_tenant(events, WARMUP))


def _ciw(seed: int, tiers: int, service: Callable[[], ciw.dists.Distribution]) -> Stats:
    return _summary(
        ciw_sojourns(seed, lam=LAM, tiers=tiers, servers=C, horizon=HORIZON, warmup=WARMUP, service=service)
    )


def _agree(ours: list[float], theirs: list[float], rel: float, what: str) -> None:
    a, b = statistics.fmean(ours), statistics.fmean(theirs)
    se = math.sqrt(statistics.variance(ours) / len(ours) + statistics.variance(theirs) / len(theirs))
    assert abs(a - b) <= 4 * se + rel * b, f"{what}: ours {a:.3f} vs ciw {b:.3f} (se {se:.3f})"


CASES = [
    ("exponential", ExponentialService(1.0), lambda: ciw.dists.Exponential(1.0)),  # M/M/c: the tail too
    ("lognormal", LognormalService(MU_LOG, SIGMA), lambda: ciw.dists.Lognormal(MU_LOG, SIGMA)),
    ("deterministic", DeterministicService(1.0), lambda: ciw.dists.Deterministic(1.0)),
]


@pytest.mark.parametrize("tiers", [1, 2], ids=["fifo", "priority"])
@pytest.mark.parametrize(("name", "model", "dist"), CASES, ids=[c[0] for c in CASES])
def test_mgc_mean_and_p95_sojourn_agree_with_ciw(name, model, dist, tiers) -> None:  # type: ignore[no-untyped-def]
    ours = [_ours(s, tiers, model) for s in SEEDS]
    theirs = [_ciw(s, tiers, dist) for s in SEEDS]
    for cls in [f"c{i}" for i in range(tiers)]:
        _agree([o[cls][0] for o in ours], [t[cls][0] for t in theirs], 0.02, f"{name} {cls} mean")
        _agree([o[cls][1] for o in ours], [t[cls][1] for t in theirs], 0.03, f"{name} {cls} p95")
    if tiers == 2:  # priority is visible in the tail, not only in the mean
        assert statistics.fmean(o["c0"][1] for o in ours) < statistics.fmean(o["c1"][1] for o in ours)


def test_md_c_never_serves_faster_than_its_service() -> None:
    """Deterministic service: every sojourn is at least the service time (a sanity floor on P95 too)."""
    stats = _ours(0, 1, DeterministicService(1.0))
    mean, p95 = stats["c0"]
    assert 1.0 <= mean <= p95
