"""Shared fixtures for the simulator tests: the marquee contract and small runs."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from rvguard.contract import Contract, contract_from_mapping
from rvguard.enforce.request import Request
from rvguard.events import Arrive, Complete, Event
from rvguard.sim.experiments import MARQUEE_CONTRACT
from rvguard.sim.workloads import poisson

MARQUEE: Contract = MARQUEE_CONTRACT


def single_tenant(slots: int, *, tiers: int = 1, deadline: float = 1e6) -> Contract:
    """Unfloored tenants ``c0, c1, …`` with tiers 0, 1, …: a plain (priority) queue."""
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": slots,
            "service": {"s_max": 1e6, "s_max_opp": 1e6, "lower": 0.0},
            "tenants": {f"c{i}": {"floor": 0, "deadline": deadline, "tier": i} for i in range(tiers)},
        }
    )


def marquee_arrivals(seed: int, *, opp_rate: float = 14.0, duration: float = 12.0) -> list[Request]:
    """Arrivals at the marquee load from ``seed``."""
    return poisson(MARQUEE, random.Random(seed), assured_rate=6.0, opp_rate=opp_rate, duration=duration)


def poisson_classes(
    rng: random.Random, lam: float, tiers: int, horizon: float
) -> list[tuple[str, list[float]]]:
    """Arrival times of ``tiers`` Poisson classes ``c0, c1, …`` splitting the rate ``lam`` evenly."""
    streams = []
    for i in range(tiers):
        times, t = [], rng.expovariate(lam / tiers)
        while t < horizon:
            times.append(t)
            t += rng.expovariate(lam / tiers)
        streams.append((f"c{i}", times))
    return streams


def sojourns_by_tenant(events: Iterable[Event], warmup: float) -> dict[str, list[float]]:
    """Completed sojourns per tenant of the requests that arrived after ``warmup``."""
    start: dict[str, tuple[str, float]] = {}
    soj: dict[str, list[float]] = {}
    for ev in events:
        if isinstance(ev, Arrive) and ev.t > warmup:
            start[ev.rid] = (ev.tenant, ev.t)
        elif isinstance(ev, Complete) and ev.rid in start:
            tenant, t0 = start.pop(ev.rid)
            soj.setdefault(tenant, []).append(ev.t - t0)
    return soj


def ciw_sojourns(
    seed: int, *, lam: float, tiers: int, servers: int, horizon: float, warmup: float, service: Any
) -> dict[str, list[float]]:
    """Sojourns per class from ciw: Poisson classes, non-preemptive priority by class index."""
    import ciw

    ciw.seed(seed)
    names = [f"c{i}" for i in range(tiers)]
    net = ciw.create_network(
        arrival_distributions={n: [ciw.dists.Exponential(lam / tiers)] for n in names},
        service_distributions={n: [service()] for n in names},
        number_of_servers=[servers],
        priority_classes={n: i for i, n in enumerate(names)},
    )
    sim = ciw.Simulation(net)
    sim.simulate_until_max_time(horizon)
    soj: dict[str, list[float]] = {}
    for r in sim.get_all_records():
        if r.arrival_date > warmup:
            soj.setdefault(r.customer_class, []).append(r.exit_date - r.arrival_date)
    return soj
