"""Replay arrivals of several tenants through the real `DecisionCore` (ticks of 1.0 s).

The driver: at each instant, completions first (each refills its slot
inside `DecisionCore.finish`), then arrivals in the given order (the Guard's
and the simulator's order). Every job completes at its dispatch time plus its
service. Deadlines in the core's contract are far away, so nothing is dropped
and the schedule does not depend on them: a job's sojourn is compared with
the deadline under test afterwards.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rvguard.contract import Contract, contract_from_mapping
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.events import Admit, Basis, Dispatch, Proposal

FAR = 1e6
OPP = "opp"


@dataclass(frozen=True, slots=True)
class Tenant:
    """A floored tenant of the search: tier, floor, ceiling (ticks)."""

    tier: int
    floor: int
    s_max: int


def core_contract(
    window: int,
    slots: int,
    tenants: Mapping[str, Tenant],
    s_opp: int,
    deadlines: Mapping[str, float],
    *,
    epoch: float = 0.0,
    reserve: int = 0,
) -> Contract:
    """The contract: the floored tenants and one unfloored tenant ``opp`` below them all."""
    lowest = max(t.tier for t in tenants.values()) + 1
    spec: dict[str, object] = {
        name: {
            "floor": t.floor,
            "deadline": deadlines.get(name, FAR),
            "tier": t.tier,
            "s_max": float(t.s_max),
        }
        for name, t in tenants.items()
    }
    spec[OPP] = {"floor": 0, "deadline": FAR, "tier": lowest}
    return contract_from_mapping(
        {
            "epoch": epoch,
            "window": float(window),
            "slots": slots,
            "reserve": reserve,
            "service": {"s_max": float(max(t.s_max for t in tenants.values())), "s_max_opp": float(s_opp)},
            "tenants": spec,
        }
    )


def replay(core: DecisionCore, jobs: Sequence[tuple[str, int, int]]) -> list[int]:
    """Start tick of each job ``(tenant, arrival, service)``, delivered in list order at each tick.

    Floor tenants' jobs must be admitted on the floor (asserted: the search
    only offers entitled arrivals).
    """
    pending = sorted(range(len(jobs)), key=lambda i: (jobs[i][1], i))
    running: list[tuple[int, int]] = []
    start: dict[int, int] = {}

    def record(events: list[object], now: int) -> None:
        for ev in events:
            if isinstance(ev, Dispatch):
                i = int(ev.rid)
                start[i] = now
                heapq.heappush(running, (now + jobs[i][2], i))

    while pending or running:
        now = min(([jobs[pending[0]][1]] if pending else []) + ([running[0][0]] if running else []))
        while running and running[0][0] == now:
            _, i = heapq.heappop(running)
            record(core.finish(str(i), float(now)), now)  # type: ignore[arg-type]
        while pending and jobs[pending[0]][1] == now:
            i = pending.pop(0)
            tenant = jobs[i][0]
            events = core.arrive(Request(str(i), tenant, float(now), deadline=FAR), Proposal(admit=True), now)
            decision = events[1]
            assert isinstance(decision, Admit), (jobs[i], decision)
            assert tenant == OPP or decision.basis is Basis.FLOOR, (jobs[i], decision)
            record(events, now)  # type: ignore[arg-type]
    return [start[i] for i in range(len(jobs))]
