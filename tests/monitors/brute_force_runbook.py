"""Plain, independent checkers for PR, RL, EV and FR, written from DESIGN §10's sentences.

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
GUARD_ENDS = ("preempted", "shutdown", "KeyboardInterrupt", "SystemExit", "GeneratorExit")


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
    fewer than k, and the request must not be protected; and an emergency evict that records its
    headroom must not come while the credited headroom already reaches the target (`_credited`)."""
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
        if sum(state.values()) >= c.eviction.k or e.rid in guarded or _redundant(events, i, c):
            out.add(("EV", e.rid, e.t))
    return out


def _redundant(events: list[Event], i: int, c: Contract) -> bool:
    """The credited-headroom rule at ``events[i]``, in exact fractions: target and capacity are the
    contract's when it states them, else the record's; credited headroom = the recorded headroom +
    (state / capacity) of each earlier eviction naming a resource and not yet landed, i.e. with no
    later sample of that resource whose sample_time exceeds the eviction's t and every sample_time of
    that resource recorded before it."""
    e = events[i]
    assert isinstance(e, Evict) and c.eviction is not None
    target = c.eviction.target if c.eviction.target is not None else e.target
    capacity = c.eviction.capacity if c.eviction.capacity is not None else e.capacity
    if e.reason != "emergency" or e.headroom is None or target is None or capacity is None:
        return False
    credited = Fraction(e.headroom)
    for j, x in enumerate(events[:i]):
        if isinstance(x, Evict) and x.resource is not None and not _landed(events[:i], j, x.resource):
            credited += Fraction(x.state, capacity)
    return credited >= Fraction(target)


def _landed(prefix: list[Event], j: int, resource: str) -> bool:
    for m in range(j + 1, len(prefix)):
        s = prefix[m]
        if isinstance(s, Sample) and s.resource == resource and s.sample_time > prefix[j].t:
            earlier = [y.sample_time for y in prefix[:m] if isinstance(y, Sample) and y.resource == resource]
            if all(s.sample_time > y for y in earlier):
                return True
    return False


def routing(events: list[Event], c: Contract) -> Found:
    """FR: a p2c route on no view or one older than the staleness; a request taking a slot of an
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
            if stale:
                out.add(("FR", e.rid, e.t))
            if e.rid in holding:
                continue
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


def redline(events: list[Event], c: Contract) -> Found:
    """RL: each demote cites a recorded sample of its resource at most `staleness` old and demotes a
    surplus request; at each demote or restore, the resource's toggles so far (direction changes of
    its demote/restore events, the first demote included) ≤ 2·ceil(n / (dwell + 1)) for n fresh samples
    (each newer than every earlier one of that resource) recorded before it."""
    assert c.headroom is not None
    h = c.headroom
    guarded = _protected(events, c)
    out = set()
    for i, e in enumerate(events):
        if not isinstance(e, Demote | Restore):
            continue
        samples = [x for x in events[:i] if isinstance(x, Sample) and x.resource == e.resource]
        n, freshest = _fresh(samples)
        if isinstance(e, Demote):
            stale = freshest is None or e.sample_time > freshest or e.t - e.sample_time > h.staleness
            if stale or e.rid in guarded:
                out.add(("RL", e.rid, e.t))
        acts = [x for x in events[: i + 1] if isinstance(x, Demote | Restore) and x.resource == e.resource]
        if _flips(acts) > 2 * math.ceil(n / (h.dwell + 1)):
            out.add(("RL", e.rid, e.t))
    return out


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
