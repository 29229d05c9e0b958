"""FR — fleet routing: no request routed on a stale view; per-engine in flight ≤ C_e (DESIGN §10).

Theory of operation
-------------------
A ``route`` with mode ``p2c`` decides on the fleet's headroom view read at
``view_time``: it is a bad prefix when that view is older than the
staleness bound (t − view_time > staleness) or missing. A ``siloed`` route
uses no shared view and is not judged on its age.

A request's engine is the one its last ``route`` or ``relocate`` named. Its
``dispatch`` takes one of that engine's C_e slots until it ends or is
evicted; a dispatch that finds C_e already taken is a bad prefix. A *late*
route, written after the request's dispatch (the dispatch waited for a slot
while an engine was out of rotation), is judged as the route and the slot
taking at once: on a stale view it is a bad prefix (and takes the slot all
the same), otherwise it is one when C_e is already taken. A route of a
request already holding a slot is judged on its view alone and moves no
slot.

The bounds are the contract's ``fleet`` block (``staleness``; C_e from
``engines``, where a dispatch to an engine it does not list is a bad
prefix) when it has one; otherwise each ``route`` record's own
``staleness`` and ``slots`` (what the gateway held it to, written by
`rvguard.gateway.fleet_trace`). A route carrying neither, with no block, is
judged on what it carries: nothing. Counts are per event stream: merged
replica traces are judged each on its own (`rvguard.check.check_traces`),
C_e being one replica's allowance. A request
never routed (a single-engine trace) holds no engine's slot, and FR takes
none of its moves (they stay on the monitor's cached fast path). FR's shared
variable is the requests holding each engine's slots, in dispatch order.
Bad locations are not final: the count stays exact after a violation.

Cost: O(1) per event; memory O(requests in flight).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..contract import Contract
from ..events import Event, EventKind, Relocate, Route, RouteMode
from .automaton import Edge, Instance, TimedAutomaton

__all__ = ["FR", "SHOWN", "TRANSITIONS", "Loc"]

#: how many of the engine's other holders a violation names
SHOWN = 16


class Loc(Enum):
    """FR locations of one request."""

    IDLE = "idle"  # never routed: it holds no engine's slot, and FR takes none of its moves
    ROUTED = "routed"  # routed (or relocated), not holding its engine's slot
    UNPLACED = "unplaced"  # dispatched before any route: no engine's slot until a late route
    RUNNING = "running"
    STALE = "stale"  # bad: routed on a stale view (routed otherwise)
    LATE_STALE = "late-stale"  # bad: routed late on a stale view (running otherwise)
    OVER = "over"  # bad: dispatched beyond its engine's C_e (running otherwise)
    DONE = "done"


K = EventKind


def _shared(contract: Contract) -> dict[str, Any]:
    """The contract's bounds (None without a fleet block: each route's own) and the slots held."""
    fleet = contract.fleet
    if fleet is None:
        return {"staleness": None, "slots": None, "holding": {}}
    return {"staleness": fleet.staleness, "slots": dict(fleet.engines), "holding": {}}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _staleness(inst: Instance, ev: Route) -> float | None:
    block = inst.shared["FR"]["staleness"]
    return _number(ev.extra.get("staleness")) if block is None else block


def _limit(inst: Instance, engine: str) -> float | None:
    """C_e: the block's (None for an engine it does not list), else the request's route's own."""
    slots = inst.shared["FR"]["slots"]
    return inst.vars.get("fr_slots") if slots is None else slots.get(engine)


def _fresh(inst: Instance, ev: Event) -> bool:
    assert isinstance(ev, Route)
    staleness = _staleness(inst, ev)
    if ev.mode is RouteMode.SILOED or staleness is None:
        return True
    return ev.view_time is not None and ev.t - ev.view_time <= staleness


def _place(inst: Instance, ev: Event) -> None:
    assert isinstance(ev, Route | Relocate)
    inst.vars["fr_engine"] = ev.engine
    inst.vars["fr_slots"] = None  # a relocation's engine has its bound on the route that follows
    if isinstance(ev, Route):
        inst.vars.update(
            fr_view_time=ev.view_time,
            fr_staleness=_staleness(inst, ev),
            fr_slots=_number(ev.extra.get("slots")),
        )


def _room(inst: Instance, ev: Event) -> bool:
    engine = inst.vars["fr_engine"]
    state = inst.shared["FR"]
    slots = _limit(inst, engine)
    if slots is None:
        return state["slots"] is None  # no bound carried: judged on nothing; with a block: unlisted
    return len(state["holding"].get(engine, ())) < slots


def _late_room(inst: Instance, ev: Event) -> bool:
    """A late route's engine has room (what `_room` asks at a dispatch, on the route's own fields)."""
    assert isinstance(ev, Route)
    state = inst.shared["FR"]
    slots = _number(ev.extra.get("slots")) if state["slots"] is None else state["slots"].get(ev.engine)
    if slots is None:
        return state["slots"] is None
    return len(state["holding"].get(ev.engine, ())) < slots


def _fresh_with_room(inst: Instance, ev: Event) -> bool:
    return _fresh(inst, ev) and _late_room(inst, ev)


def _place_and_take(inst: Instance, ev: Event) -> None:
    _place(inst, ev)
    _take(inst, ev)


def _take(inst: Instance, ev: Event) -> None:
    engine = inst.vars["fr_engine"]
    state = inst.shared["FR"]
    holding: dict[str, None] = state["holding"].setdefault(engine, {})
    inst.vars.update(
        fr_limit=_limit(inst, engine),
        fr_in_flight=len(holding) + 1,
        fr_others=tuple(itertools.islice(holding, SHOWN)),
    )
    holding[inst.rid] = None
    inst.vars["fr_holding"] = engine


def _release(inst: Instance, ev: Event) -> None:
    engine = inst.vars.pop("fr_holding", None)
    if engine is not None:
        inst.shared["FR"]["holding"][engine].pop(inst.rid, None)


def _stale(inst: Instance, ev: Event | None, now: float) -> str:
    view = inst.vars.get("fr_view_time")
    if view is None:
        return "a p2c route with no view_time: routed on no view at all"
    limit = inst.vars["fr_staleness"]
    return f"a p2c route decided on a view {now - view:g} s old > staleness {limit:g} s"


def _stale_route(inst: Instance, ev: Event | None, now: float) -> str:
    """`_stale` on the route's own view (a running request's route places nothing)."""
    assert isinstance(ev, Route)
    if ev.view_time is None:
        return "a p2c route with no view_time: routed on no view at all"
    return (
        f"a p2c route decided on a view {now - ev.view_time:g} s old > staleness {_staleness(inst, ev):g} s"
    )


def _over(inst: Instance, ev: Event | None, now: float) -> str:
    v = inst.vars
    if v["fr_limit"] is None:
        return f"dispatched on engine {v['fr_engine']!r}, which the contract's fleet does not list"
    return (
        f"dispatch made {v['fr_in_flight']} in flight on engine {v['fr_engine']!r} > C_e = {v['fr_limit']:g}"
    )


_ENDS = (K.COMPLETE, K.FAIL, K.DROP)
_PLACED = (Loc.IDLE, Loc.ROUTED, Loc.STALE)  # where a route or a relocation may come
_ROUTED = (Loc.ROUTED, Loc.STALE)
_RUNNING = (Loc.RUNNING, Loc.OVER, Loc.LATE_STALE)
TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    # a dispatch before any route holds no slot (plain moves: the monitor's fast path keeps them)
    (Loc.IDLE, K.DISPATCH): (Edge(Loc.UNPLACED),),
    (Loc.UNPLACED, K.EVICT): (Edge(Loc.IDLE),),
    **{(Loc.UNPLACED, k): (Edge(Loc.DONE),) for k in _ENDS},
    (Loc.UNPLACED, K.ROUTE): (
        Edge(Loc.RUNNING, _fresh_with_room, "late: fresh view, fewer than C_e", update=_place_and_take),
        Edge(
            Loc.OVER, _fresh, "late: C_e taken, or an unlisted engine", update=_place_and_take, detail=_over
        ),
        Edge(
            Loc.LATE_STALE,
            label="late: p2c on a stale or missing view",
            update=_place_and_take,
            detail=_stale,
        ),
    ),
    **{
        (loc, K.ROUTE): (
            Edge(Loc.ROUTED, _fresh, "siloed, or view_time within staleness", update=_place),
            Edge(Loc.STALE, label="p2c on a stale or missing view", update=_place, detail=_stale),
        )
        for loc in _PLACED
    },
    **{(loc, K.RELOCATE): (Edge(Loc.ROUTED, update=_place),) for loc in _PLACED},
    # a route of a request holding a slot: judged on its view; the slot stays where it is
    **{
        (loc, K.ROUTE): (
            Edge(Loc.RUNNING, _fresh, "siloed, or view_time within staleness"),
            Edge(Loc.LATE_STALE, label="p2c on a stale or missing view", detail=_stale_route),
        )
        for loc in _RUNNING
    },
    **{
        (loc, K.DISPATCH): (
            Edge(Loc.RUNNING, _room, "fewer than C_e on its engine", update=_take),
            Edge(Loc.OVER, label="C_e taken, or an unlisted engine", update=_take, detail=_over),
        )
        for loc in _ROUTED
    },
    **{(loc, K.EVICT): (Edge(Loc.ROUTED, update=_release),) for loc in _RUNNING},
    **{(loc, k): (Edge(Loc.DONE, update=_release),) for loc in _RUNNING for k in _ENDS},
}


def _context(inst: Instance) -> Mapping[str, Any]:
    v = inst.vars
    out: dict[str, Any] = {"engine": v.get("fr_engine")}
    if "fr_in_flight" in v:
        out.update(limit=v["fr_limit"], in_flight=v["fr_in_flight"], others=list(v["fr_others"]))
    if "fr_view_time" in v:
        out["view_time"] = v["fr_view_time"]
    return out


FR = TimedAutomaton(
    name="FR",
    description="no p2c route on a view older than the staleness bound; per-engine in flight ≤ C_e",
    locations=Loc,
    initial=Loc.IDLE,
    bad=frozenset({Loc.STALE, Loc.OVER, Loc.LATE_STALE}),
    transitions=TRANSITIONS,
    context=_context,
    shared=_shared,
    bad_is_final=False,
)
