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

from rvguard.events import Arrive, Complete, Event
from rvguard.sim.backend import ExponentialService
from rvguard.sim.run import run_once
from rvguard.sim.workloads import merge_streams

from ._common import single_tenant

LAM, MU, C, HORIZON, WARMUP = 3.0, 1.0, 4, 3000.0, 200.0


def _erlang_c_sojourn(lam: float, mu: float, c: int) -> float:
    a = lam / mu
    rho = a / c
    top = a**c / math.factorial(c) / (1 - rho)
    p_wait = top / (sum(a**k / math.factorial(k) for k in range(c)) + top)
    return p_wait / (c * mu - lam) + 1 / mu


def _ours(seed: int, tiers: int) -> dict[str, float]:
    contract = single_tenant(C, tiers=tiers)
    rng = random.Random(seed)
    streams = []
    for i in range(tiers):
        times, t = [], rng.expovariate(LAM / tiers)
        while t < HORIZON:
            times.append(t)
            t += rng.expovariate(LAM / tiers)
        streams.append((f"c{i}", times))
    arrivals = merge_streams(streams, contract)
    events = run_once(contract, arrivals, model=ExponentialService(MU), seed=seed).result.events
    return _mean_by_tenant(events)


def _mean_by_tenant(events: tuple[Event, ...]) -> dict[str, float]:
    start: dict[str, tuple[str, float]] = {}
    soj: dict[str, list[float]] = {}
    for ev in events:
        if isinstance(ev, Arrive) and ev.t > WARMUP:
            start[ev.rid] = (ev.tenant, ev.t)
        elif isinstance(ev, Complete) and ev.rid in start:
            tenant, t0 = start[ev.rid]
            soj.setdefault(tenant, []).append(ev.t - t0)
    return {k: statistics.mean(v) for k, v in soj.items()}


def _ciw(seed: int, tiers: int) -> dict[str, float]:
    ciw.seed(seed)
    names = [f"c{i}" for i in range(tiers)]
    net = ciw.create_network(
        arrival_distributions={n: [ciw.dists.Exponential(LAM / tiers)] for n in names},
        service_distributions={n: [ciw.dists.Exponential(MU)] for n in names},
        number_of_servers=[C],
        priority_classes={n: i for i, n in enumerate(names)},
    )
    sim = ciw.Simulation(net)
    sim.simulate_until_max_time(HORIZON)
    soj: dict[str, list[float]] = {}
    for r in sim.get_all_records():
        if r.arrival_date > WARMUP:
            soj.setdefault(r.customer_class, []).append(r.exit_date - r.arrival_date)
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
