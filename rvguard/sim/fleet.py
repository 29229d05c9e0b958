"""A fleet of engines under saturating surplus load: how much reserve keeps assured arrivals waiting-free.

Why this model (the runbook's Proposition 6, pooling vs siloed reserves): N
engines of C slots; surplus (opportunistic) work is always there and takes
every slot the reserve rule allows, so the reserve alone decides whether an
assured arrival finds a free slot at once. The rule RB: surplus in flight ≤
C − R on each engine (**siloed**, R per engine), or ≤ N·C − R fleet-wide
(**pooled**, one reserve behind the router). Assured work arrives as a
Poisson stream with lognormal service; an arrival that finds no free slot
where it may go *misses* (it then waits, ahead of surplus, for the next slot
that frees there). Siloed, a request may go only to its home engine
(crc32 of its rid mod N: the stated fixed rule); pooled, the real `Router`
picks among engines with a free slot by P2C on free-slot headroom, on a view
read at the decision. Deterministic: one heap of (time, priority, seq, …),
all randomness from the injected `random.Random`.

Cost: O(log h) per event; an assured arrival costs O(N) more when pooled.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Literal

from ..fleet.router import EngineView, Router

__all__ = ["FleetModel", "FleetRun", "Layout", "simulate_fleet"]

Layout = Literal["pooled", "siloed"]
_DONE, _ARRIVE = 0, 1  # heap priorities: a slot freed at t is free for an arrival at t


@dataclass(frozen=True, slots=True)
class FleetModel:
    """The fleet's shape and load.

    Attributes:
        engines: N.
        slots: C per engine.
        assured_load: offered assured load per engine, in Erlangs (arrival rate × mean service).
        service_mean: mean assured service (s).
        service_cv: its coefficient of variation (lognormal).
        surplus_mean: mean surplus service (s, exponential).
    """

    engines: int
    slots: int
    assured_load: float
    service_mean: float = 1.0
    service_cv: float = 1.0
    surplus_mean: float = 5.0


@dataclass(frozen=True, slots=True)
class FleetRun:
    """Assured arrivals judged (after warm-up) and how many found no free slot."""

    arrived: int
    missed: int

    @property
    def miss(self) -> float:
        """Fraction of judged arrivals that had to wait."""
        return self.missed / self.arrived if self.arrived else 0.0


class _Fleet:
    """The mutable state of one run."""

    def __init__(self, model: FleetModel, layout: Layout, reserve: int, rng: random.Random) -> None:
        self.m, self.layout, self.rng = model, layout, rng
        n, c = model.engines, model.slots
        self.assured = [0] * n
        self.surplus = [0] * n
        self.queues: list[deque[int]] = [deque() for _ in range(n if layout == "siloed" else 1)]
        self.cap = c - reserve if layout == "siloed" else n * c - reserve  # surplus allowed (RB)
        self.router = Router(rng, staleness=1.0)
        self.heap: list[tuple[float, int, int, int, int]] = []  # (t, prio, seq, kind, engine)
        self.seq = itertools.count()
        sigma2 = math.log(1.0 + model.service_cv**2)
        self.mu, self.sigma = math.log(model.service_mean) - sigma2 / 2, math.sqrt(sigma2)

    def push(self, t: float, prio: int, kind: int, engine: int) -> None:
        heapq.heappush(self.heap, (t, prio, next(self.seq), kind, engine))

    def free(self, e: int) -> int:
        return self.m.slots - self.assured[e] - self.surplus[e]

    def surplus_room(self, e: int) -> bool:
        total = self.surplus[e] if self.layout == "siloed" else sum(self.surplus)
        return total < self.cap

    def start_surplus(self, t: float, e: int) -> None:
        self.surplus[e] += 1
        self.push(t + self.rng.expovariate(1.0 / self.m.surplus_mean), _DONE, 1, e)

    def start_assured(self, t: float, e: int) -> None:
        self.assured[e] += 1
        self.push(t + self.rng.lognormvariate(self.mu, self.sigma), _DONE, 0, e)

    def fill(self, t: float) -> None:
        """Surplus takes every slot the reserve rule allows (saturating demand)."""
        for e in range(self.m.engines):
            while self.free(e) > 0 and self.surplus_room(e):
                self.start_surplus(t, e)

    def arrive(self, t: float, rid: str) -> bool:
        """Place one assured arrival; True when it found a free slot at once."""
        n = self.m.engines
        if self.layout == "siloed":
            e = zlib.crc32(rid.encode()) % n
            target: int | None = e if self.free(e) > 0 else None
            queue = self.queues[e]
        else:
            c = self.m.slots
            views = [EngineView(str(i), self.free(i) / c, t, c - self.free(i), c) for i in range(n)]
            route = self.router.route(rid, views, t)
            target = None if route.engine is None else int(route.engine)
            queue = self.queues[0]
        if target is None:
            queue.append(0)
            return False
        self.start_assured(t, target)
        return True

    def check(self) -> None:
        """Assert the invariants: no engine over C, surplus within the reserve rule."""
        for e in range(self.m.engines):
            assert min(self.assured[e], self.surplus[e], self.free(e)) >= 0
        surplus = self.surplus if self.layout == "siloed" else [sum(self.surplus)]
        assert all(s <= self.cap for s in surplus)

    def done(self, t: float, kind: int, e: int) -> None:
        """A slot on ``e`` frees: a waiting assured request first, else surplus if the rule allows."""
        if kind == 0:
            self.assured[e] -= 1
        else:
            self.surplus[e] -= 1
        queue = self.queues[e if self.layout == "siloed" else 0]
        if queue:
            queue.popleft()
            self.start_assured(t, e)
        elif self.surplus_room(e):
            self.start_surplus(t, e)


def simulate_fleet(
    model: FleetModel,
    layout: Layout,
    reserve: int,
    *,
    arrivals: int,
    rng: random.Random,
    warmup: float = 0.1,
    check: bool = False,
) -> FleetRun:
    """Run until ``arrivals`` assured arrivals; judge those after the first ``warmup`` fraction.

    Args:
        reserve: slots kept from surplus work: per engine when siloed, fleet-wide when pooled.
        check: assert the invariants after every event (tests).
    """
    limit = model.slots if layout == "siloed" else model.engines * model.slots
    if not 0 <= reserve <= limit:
        raise ValueError(f"reserve must lie in [0, {limit}] for a {layout} fleet, got {reserve}")
    fleet = _Fleet(model, layout, reserve, rng)
    fleet.fill(0.0)
    rate = model.engines * model.assured_load / model.service_mean
    fleet.push(rng.expovariate(rate), _ARRIVE, 0, 0)
    skip = int(arrivals * warmup)
    seen = missed = 0
    while fleet.heap:
        t, prio, _, kind, e = heapq.heappop(fleet.heap)
        if check:
            fleet.check()
        if prio == _DONE:
            fleet.done(t, kind, e)
            continue
        hit = fleet.arrive(t, f"{rng.getrandbits(64):016x}")  # random rids: the hash split is random
        seen += 1
        missed += (not hit) and seen > skip
        if seen >= arrivals:
            break
        fleet.push(t + rng.expovariate(rate), _ARRIVE, 0, 0)
    return FleetRun(arrivals - skip, missed)
