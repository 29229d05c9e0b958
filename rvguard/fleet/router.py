"""Routing over several engines: power-of-two-choices on headroom, siloed when the view is stale.

Theory of operation
-------------------
Each dispatch picks an engine from a *view*: per engine, its projected
headroom (a fraction in [0, 1], the dominant resource's), the time that
headroom was read, and this gateway's own count of its requests there
(exact: the gateway made them). The view is read at the decision — the
runbook's "signal at admission" — never remembered from an earlier one.

* **P2C** — among live engines with a free slot (in flight < C_e), sample
  two at random and take the one with more headroom; ties by a coin, all
  from an injected `random.Random` (seeded in tests); the decision carries
  the two compared and their headroom (``sampled``), which the gateway
  traces so FR can judge the choice. A fleet-wide argmax
  would send every decision taken on the same view to the same engine
  (herding); sampling two spreads them (`herding` measures both).
* **Siloed** — when the view is unavailable, or any live engine's view is
  older than ``staleness`` seconds, no decision rests on it: the request
  goes to the first engine with a free slot in a fixed ring that starts at
  ``crc32(rid) mod N`` (sorted engine names). Only the gateway's own slot
  counts (always fresh) are read, so each engine's own local gate still
  decides; the fallback never borrows another engine's floor.

FR (DESIGN §10): a P2C route's ``view_time`` is within ``staleness`` of the
decision, and no engine gets more than C_e in flight: both hold by
construction here, and the monitor checks them on traces.

Cost: O(N) per decision for N engines (the staleness scan); memory O(1).
"""

from __future__ import annotations

import math
import random
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["EngineView", "Route", "Router", "RouterStatistics", "argmax_route", "herding", "slot_headroom"]

RouteMode = Literal["p2c", "siloed"]


@dataclass(frozen=True, slots=True)
class EngineView:
    """What the router knows of one engine at one instant.

    Attributes:
        name: the engine's name (its upstream URL or a label).
        headroom: projected headroom in [0, 1] (the dominant resource's), larger is freer.
        view_time: when ``headroom`` was read (the telemetry's own timestamp); None = never.
        in_flight: this gateway's requests on the engine now.
        slots: C_e, the most this gateway may have in flight there.
        alive: False once the engine is out of rotation (dead, or failing).
    """

    name: str
    headroom: float
    view_time: float | None
    in_flight: int
    slots: int
    alive: bool = True

    @property
    def free(self) -> bool:
        """Alive with a free slot."""
        return self.alive and self.in_flight < self.slots


@dataclass(frozen=True, slots=True)
class Route:
    """One routing decision: the engine (None when none has room), on what view, and why.

    ``sampled``: the engines a P2C decision compared, each with the headroom it read (what FR
    judges the choice on: the route goes to one with the most); empty when siloed.
    """

    engine: str | None
    view_time: float | None
    mode: RouteMode
    reason: str = ""
    sampled: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class RouterStatistics:
    """Decisions so far, by mode and reason (trio-style ``statistics()``)."""

    p2c: int
    siloed: int
    unroutable: int
    siloed_reasons: dict[str, int]


def slot_headroom(slots: int, running: float, waiting: float) -> float:
    """Headroom from slot telemetry alone: free sequence slots after the engine's queue, over C_e.

    The stand-in until multi-resource projected headroom is available.

    >>> slot_headroom(4, 1, 0), slot_headroom(4, 3, 2)
    (0.75, 0.0)
    """
    if slots <= 0:
        return 0.0
    return min(max((slots - running - waiting) / slots, 0.0), 1.0)


class Router:
    """P2C on headroom with a siloed fallback (see module doc).

    Args:
        rng: the source of every random choice (seed it for reproducible routes).
        staleness: a view older than this (seconds) is stale.
    """

    def __init__(self, rng: random.Random, *, staleness: float) -> None:
        if not (math.isfinite(staleness) and staleness > 0.0):
            raise ValueError(f"staleness must be a positive number of seconds, got {staleness!r}")
        self.rng = rng
        self.staleness = staleness
        self._counts: Counter[str] = Counter()
        self._reasons: Counter[str] = Counter()

    def route(
        self, rid: str, views: Sequence[EngineView], now: float, *, view_available: bool = True
    ) -> Route:
        """Pick an engine for ``rid`` at ``now`` from ``views`` (read now)."""
        reason = "" if view_available else "view-unavailable"
        if not reason:
            reason = self._stale(views, now)
        out = self._p2c(views) if not reason else _siloed(rid, views, reason)
        self._counts[out.mode if out.engine is not None else "unroutable"] += 1
        if out.mode == "siloed":
            self._reasons[out.reason] += 1
        return out

    def statistics(self) -> RouterStatistics:
        """The counters now."""
        c = self._counts
        return RouterStatistics(c["p2c"], c["siloed"], c["unroutable"], dict(self._reasons))

    def _stale(self, views: Sequence[EngineView], now: float) -> str:
        """``""`` when every live engine's view is fresh, else why not."""
        for v in views:
            if not v.alive:
                continue
            if v.view_time is None:
                return "no-view"
            if now - v.view_time > self.staleness:
                return "stale"
        return ""

    def _p2c(self, views: Sequence[EngineView]) -> Route:
        free = [v for v in views if v.free]
        if not free:
            return Route(None, None, "p2c", "full")
        if len(free) == 1:
            best, compared = free[0], free
        else:
            a, b = compared = self.rng.sample(free, 2)
            if a.headroom == b.headroom:
                best = a if self.rng.random() < 0.5 else b
            else:
                best = a if a.headroom > b.headroom else b
        return Route(best.name, best.view_time, "p2c", sampled=tuple((v.name, v.headroom) for v in compared))


def _siloed(rid: str, views: Sequence[EngineView], reason: str) -> Route:
    """The first engine with a free slot in the fixed ring starting at crc32(rid) mod N."""
    ring = sorted(views, key=lambda v: v.name)
    if not ring:
        return Route(None, None, "siloed", reason)
    start = zlib.crc32(rid.encode()) % len(ring)
    for i in range(len(ring)):
        v = ring[(start + i) % len(ring)]
        if v.free:
            return Route(v.name, None, "siloed", reason)
    return Route(None, None, "siloed", reason)


def argmax_route(views: Sequence[EngineView]) -> Route:
    """The naive rule, for comparison only: the free engine with the most headroom (first on ties)."""
    free = [v for v in views if v.free]
    if not free:
        return Route(None, None, "p2c", "full")
    best = max(free, key=lambda v: v.headroom)
    return Route(best.name, best.view_time, "p2c", sampled=tuple((v.name, v.headroom) for v in free))


def herding(views: Sequence[EngineView], decisions: int, rng: random.Random) -> dict[str, list[int]]:
    """Route ``decisions`` admissions concurrently on one view: none sees the others' choices.

    The view is fresh by the clock (read at ``view_time``, decided at once) but
    stale in what matters: it misses the decisions taken alongside.

    Returns:
        Per policy (``argmax``, ``p2c``), how many admissions each engine got,
        in the order of ``views``.
    """
    if any(v.view_time is None for v in views):
        raise ValueError("herding needs a view of every engine (a view_time each)")
    router = Router(rng, staleness=1.0)
    names = [v.name for v in views]
    out = {"argmax": [0] * len(views), "p2c": [0] * len(views)}
    now = max((v.view_time or 0.0) for v in views) if views else 0.0
    for i in range(decisions):
        for policy, route in (("argmax", argmax_route(views)), ("p2c", router.route(f"r{i}", views, now))):
            if route.engine is not None:
                out[policy][names.index(route.engine)] += 1
    return out
