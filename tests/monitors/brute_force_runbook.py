"""Plain, independent checkers for PR, RL, EV, ER and FR, written from DESIGN §10's sentences.

Each recomputes its facts from the trace prefix at every event that could violate (O(n²) on
purpose) and shares no code with rvguard.monitors: entitlement is the contract's window formula,
the toggle bound is written out, and every field is read from the events themselves.
"""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction
from typing import Any

from rvguard.contract import Contract, window_index
from rvguard.events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Demote,
    Dispatch,
    Drop,
    Event,
    Evict,
    Fail,
    Relocate,
    Restore,
    Route,
    RouteMode,
    Sample,
)

Found = set[tuple[str, str, float]]


def _entitled(events: list[Event], c: Contract) -> dict[str, bool]:
    used: dict[tuple[str, int], float] = defaultdict(float)
    out = {}
    for a in events:
        if isinstance(a, Arrive):
            key = (a.tenant, window_index(a.t, c.epoch, c.window))
            used[key] += c.weight(a.prompt_tokens, a.max_tokens)
            floor = c.tenants[a.tenant].floor
            out[a.rid] = floor > 0 and used[key] <= floor
    return out


def _protected(events: list[Event], c: Contract) -> set[str]:
    """Floor-entitled, or admitted with basis floor (the assured class): never to be preempted."""
    entitled = _entitled(events, c)
    floor = {e.rid for e in events if isinstance(e, Admit) and e.basis is Basis.FLOOR}
    return {rid for rid, yes in entitled.items() if yes} | floor


#: DESIGN §11: "any end of an entitled request that the guard caused". The fail reasons the guard
#: writes on its own initiative, read off rvguard/enforce (preemption, eviction not relocated, shutdown,
#: the guard's process interrupted) and written out here; the engine's failures and the client's
#: (``cancelled``, ``client-error…``, ``timeout``, exception texts) are not the guard's.
GUARD_ENDS = (
    "preempted",
    "hold-bound",
    "shutdown",
    "redline-stale",
    "KeyboardInterrupt",
    "SystemExit",
    "GeneratorExit",
)


def preemption(events: list[Event], c: Contract) -> Found:
    """PR: a protected request's every eviction, and its fail that the guard caused."""
    guarded = _protected(events, c)
    return {
        ("PR", e.rid, e.t)
        for e in events
        if e.rid in guarded and (isinstance(e, Evict) or (isinstance(e, Fail) and e.reason in GUARD_ENDS))
    }


def eviction(events: list[Event], c: Contract) -> Found:
    """EV: at each evict, the evictions in flight before it (evicted, not relocated nor ended) must be
    fewer than k, and the request must not be protected; an emergency evict must record its resource
    and headroom, that headroom must be below the resource's hard floor and equal the Ĥ of the
    samples recorded before it (`_smoothed`; both when the contract has a headroom block), and it
    must not come while the credited headroom already reaches the target (`_redundant`). (Its plan's
    relief time is ER's, `relief`.)"""
    assert c.eviction is not None
    guarded = _protected(events, c)
    out = set()
    for i, e in enumerate(events):
        if not isinstance(e, Evict):
            continue
        state: dict[str, bool] = {}
        for x in events[:i]:
            if isinstance(x, Evict):
                state[x.rid] = True
            elif isinstance(x, Relocate | Fail):
                state[x.rid] = False
        bad = sum(state.values()) >= c.eviction.k or e.rid in guarded
        if bad or (e.reason == "emergency" and _emergency_wrong(events, i, c)):
            out.add(("EV", e.rid, e.t))
    return out


def _emergency_wrong(events: list[Event], i: int, c: Contract) -> bool:
    e = events[i]
    assert isinstance(e, Evict)
    if e.resource is None or e.headroom is None:
        return True
    if c.headroom is not None:
        limit = c.headroom.resources.get(e.resource)
        if limit is None or e.headroom >= limit.hard_floor:
            return True
        smoothed = _smoothed(events[:i], e.resource, c.headroom.alpha)
        if smoothed is not None and not math.isclose(e.headroom, smoothed, rel_tol=1e-9, abs_tol=1e-12):
            return True
    return _redundant(events, i, c)


def _smoothed(prefix: list[Event], resource: str, alpha: float) -> float | None:
    """Ĥ of ``resource`` after the fresh samples in ``prefix`` (each newer than all before it): the
    first sets it, each later one moves it by alpha toward its value; ``None``: none recorded."""
    smoothed, newest = None, -math.inf
    for s in prefix:
        if isinstance(s, Sample) and s.resource == resource and s.sample_time > newest:
            newest = s.sample_time
            smoothed = s.value if smoothed is None else alpha * s.value + (1 - alpha) * smoothed
    return smoothed


def relief(events: list[Event], c: Contract) -> Found:
    """ER: an evict with reason emergency whose record carries the plan's lands_at and deadline (finite
    numbers) with lands_at after deadline."""
    out = set()
    for e in events:
        if isinstance(e, Evict) and e.reason == "emergency":
            lands, deadline = e.extra.get("lands_at"), e.extra.get("deadline")
            numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (lands, deadline))
            if numbers and lands > deadline:  # type: ignore[operator]
                out.add(("ER", e.rid, e.t))
    return out


def _dec(x: float) -> Fraction:
    """The decimal a number is written as (its shortest repr), exactly."""
    return Fraction(repr(x))


def _redundant(events: list[Event], i: int, c: Contract) -> bool:
    """The credited-headroom rule at ``events[i]``, in exact decimals: target and capacity are the
    contract's when it states them, else the record's; credited headroom = the recorded headroom +
    (state / capacity) of each earlier eviction naming a resource and not yet landed, i.e. with no
    later sample of that resource whose sample_time exceeds the eviction's t and every sample_time of
    that resource recorded before it. A tie is reached."""
    e = events[i]
    assert isinstance(e, Evict) and c.eviction is not None
    target = c.eviction.target if c.eviction.target is not None else e.target
    capacity = c.eviction.capacity if c.eviction.capacity is not None else e.capacity
    if e.headroom is None or target is None or capacity is None:
        return False
    credited = _dec(e.headroom)
    for j, x in enumerate(events[:i]):
        if isinstance(x, Evict) and x.resource is not None and not _landed(events[:i], j, x.resource):
            credited += Fraction(x.state, capacity)
    return credited >= _dec(target)


def _landed(prefix: list[Event], j: int, resource: str) -> bool:
    for m in range(j + 1, len(prefix)):
        s = prefix[m]
        if isinstance(s, Sample) and s.resource == resource and s.sample_time > prefix[j].t:
            earlier = [y.sample_time for y in prefix[:m] if isinstance(y, Sample) and y.resource == resource]
            if all(s.sample_time > y for y in earlier):
                return True
    return False


def routing(events: list[Event], c: Contract) -> Found:
    """FR: a p2c route on no view or one older than the staleness; a fresh p2c route to an engine with
    less headroom than another it sampled (`_worse`); a siloed route (of a request holding no slot)
    naming an engine that already holds C_e or is not listed; a request taking a slot of an
    engine that already holds C_e (or that the contract does not list). A request takes its slot at
    its dispatch when routed (or relocated) before it, else at a late route after its dispatch (which,
    when stale, is judged stale alone); a route of a request holding a slot moves nothing."""
    assert c.fleet is not None
    out = set()
    engine_of: dict[str, str] = {}  # the last route or relocation's engine
    unplaced: set[str] = set()  # dispatched with no engine
    holding: dict[str, str] = {}

    def take(rid: str, engine: str, t: float) -> None:
        held = sum(e == engine for e in holding.values())
        if engine not in c.fleet.engines or held >= c.fleet.engines[engine]:  # type: ignore[union-attr]
            out.add(("FR", rid, t))
        holding[rid] = engine

    for e in events:
        if isinstance(e, Route):
            stale = e.mode is RouteMode.P2C and (e.view_time is None or e.t - e.view_time > c.fleet.staleness)
            if stale or (e.mode is RouteMode.P2C and _worse(e)):
                out.add(("FR", e.rid, e.t))
            if e.rid in holding:
                continue
            if e.mode is RouteMode.SILOED:  # on its engine's own slots: one must be free at the route
                held = sum(x == e.engine for x in holding.values())
                if e.engine not in c.fleet.engines or held >= c.fleet.engines[e.engine]:
                    out.add(("FR", e.rid, e.t))
            engine_of[e.rid] = e.engine
            if e.rid in unplaced:
                unplaced.discard(e.rid)
                if stale:
                    holding[e.rid] = e.engine
                else:
                    take(e.rid, e.engine, e.t)
        elif isinstance(e, Relocate):
            engine_of[e.rid] = e.engine
        elif isinstance(e, Dispatch):
            if e.rid in engine_of:
                take(e.rid, engine_of[e.rid], e.t)
            else:
                unplaced.add(e.rid)
        elif isinstance(e, Evict):
            holding.pop(e.rid, None)
            unplaced.discard(e.rid)
        elif isinstance(e, Complete | Fail | Drop):
            holding.pop(e.rid, None)
            unplaced.discard(e.rid)
            engine_of.pop(e.rid, None)
    return out


def _worse(e: Route) -> bool:
    """A p2c route that records the engines it compared (``sampled``: engine -> headroom) and went to
    one it did not sample or with less headroom than another it sampled."""
    sampled = e.extra.get("sampled")
    if not isinstance(sampled, dict) or not sampled:
        return False
    return e.engine not in sampled or any(h > sampled[e.engine] for h in sampled.values())


def redline(events: list[Event], c: Contract) -> Found:
    """RL, from DESIGN §10 and §11: a demote or restore cites a sample of its resource; it must be a
    sample recorded before it (sample_time equal to one of the resource's fresh samples) at most
    `staleness` old. A demote must be of a surplus request and justified: the redline (EWMA
    Ĥ = αH + (1−α)Ĥ over the fresh samples, slope between successive fresh samples, projection
    Ĥ + horizon·slope; fire below h_min, clear at h_min + margin after dwell samples) fires on the
    resource after the cited sample and still fires at the demote. A restore needs the redline clear on
    every stated resource. At each demote or restore the resource's toggles so far (direction changes
    of its demote/restore events, the first demote included) may exceed 2·ceil(n / (dwell + 1)) for n
    fresh samples; only the event whose count first goes above it (or goes above it again after
    falling back within it) is reported."""
    assert c.headroom is not None
    h = c.headroom
    guarded = _protected(events, c)
    out = set()
    for i, e in enumerate(events):
        if not isinstance(e, Demote | Restore):
            continue
        prefix = events[:i]
        times = [r[0] for r in _readings(prefix, e.resource, c)]
        bad = not times or e.t - e.sample_time > h.staleness or e.sample_time not in times
        if isinstance(e, Demote):
            bad = bad or e.rid in guarded or not _demote_justified(prefix, e, c)
        else:
            bad = bad or any(_firing_now(prefix, name, c) for name in h.resources)
        if bad or _crosses(events, i, c):
            out.add(("RL", e.rid, e.t))
    return out


def _readings(prefix: list[Event], resource: str, c: Contract) -> list[tuple[float, bool]]:
    """(sample_time, firing after it) for each fresh sample of ``resource`` in ``prefix``."""
    assert c.headroom is not None
    h, limit = c.headroom, c.headroom.resources.get(resource)
    out: list[tuple[float, bool]] = []
    smoothed = slope = 0.0
    prev_t = -math.inf
    firing, fired_at = False, 0
    for s in prefix:
        if not isinstance(s, Sample) or s.resource != resource or not s.sample_time > prev_t:
            continue
        if not out:
            new, slope = s.value, 0.0
        else:
            new = h.alpha * s.value + (1 - h.alpha) * smoothed
            slope = (new - smoothed) / (s.sample_time - prev_t)
        smoothed, prev_t = new, s.sample_time
        low = min(smoothed, smoothed + h.horizon * slope)
        count = len(out) + 1
        if limit is not None and not firing and low < limit.h_min:
            firing, fired_at = True, count
        elif (
            limit is not None and firing and low >= limit.h_min + limit.margin and count - fired_at >= h.dwell
        ):
            firing = False
        out.append((s.sample_time, firing))
    return out


def _firing_now(prefix: list[Event], resource: str, c: Contract) -> bool:
    readings = _readings(prefix, resource, c)
    return bool(readings) and readings[-1][1]


def _demote_justified(prefix: list[Event], e: Demote, c: Contract) -> bool:
    assert c.headroom is not None
    if e.resource not in c.headroom.resources:
        return False
    readings = dict(_readings(prefix, e.resource, c))
    return readings.get(e.sample_time, False) and _firing_now(prefix, e.resource, c)


def _crosses(events: list[Event], i: int, c: Contract) -> bool:
    """Whether the toggle count at ``events[i]`` is over the bound while at the previous demote or
    restore of that resource it was not."""
    assert c.headroom is not None
    res = events[i].resource  # type: ignore[attr-defined]
    mine = [j for j in range(i + 1) if isinstance(events[j], Demote | Restore) and events[j].resource == res]  # type: ignore[attr-defined]

    def over(j: int) -> bool:
        acts = [events[m] for m in mine if m <= j]
        n, _ = _fresh([x for x in events[:j] if isinstance(x, Sample) and x.resource == res])
        return _flips(acts) > 2 * math.ceil(n / (c.headroom.dwell + 1))  # type: ignore[union-attr]

    return over(i) and (len(mine) < 2 or not over(mine[-2]))


def _fresh(samples: list[Any]) -> tuple[int, float | None]:
    n, freshest = 0, None
    for s in samples:
        if freshest is None or s.sample_time > freshest:
            n, freshest = n + 1, s.sample_time
    return n, freshest


def _flips(acts: list[Any]) -> int:
    flips, last = 0, "restore"  # before any action the redline is off
    for a in acts:
        now = "demote" if isinstance(a, Demote) else "restore"
        flips += now != last
        last = now
    return flips
