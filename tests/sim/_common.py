"""Shared fixtures for the simulator tests: the marquee contract and small runs."""

from __future__ import annotations

import random

from rvguard.contract import Contract, contract_from_mapping
from rvguard.enforce.request import Request
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
