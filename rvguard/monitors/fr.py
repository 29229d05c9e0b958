"""FR — fleet routing: fresh views, more headroom wins, siloed stays in its engine's slots, per-engine
in flight ≤ C_e (DESIGN §10, §11).

Theory of operation
-------------------
A ``route`` with mode ``p2c`` decides on the fleet's headroom view read at
``view_time``: it is a bad prefix when that view is older than the
staleness bound (t − view_time > staleness) or missing. A ``siloed`` route
uses no shared view and is not judged on its age.

**The choice**: a fresh ``p2c`` route that records the engines it compared
(``sampled``: engine → the projected headroom it read for each, written by
the gateway, `rvguard.gateway.fleet_trace`) must go to one with the most
headroom among them (a tie: either); one to an engine it did not sample, or
to the one with less headroom, is a bad prefix. A route that records no
``sampled`` is not judged on its choice (FR cannot know what was compared).

**The siloed fallback never borrows another engine's floor**: a ``siloed``
route decides on no shared view, only on each engine's own slots, so it
must name an engine with a slot of its own free at the route (fewer than
C_e held there); one naming a full engine (or, under a fleet block, an
engine it does not list) is a bad prefix at the route, before any dispatch
spends the slot.

A request's engine is the one its last ``route`` or ``relocate`` named. Its
``dispatch`` takes one of that engine's C_e slots until it ends or is
evicted; a dispatch that finds C_e already taken is a bad prefix. A *late*
route, written after the request's dispatch (the dispatch waited for a slot
while an engine was out of rotation), is legal on purpose and judged as the
route and the slot taking at once: its view's age, its choice, and C_e
(it takes the slot even when it fails). A route of a request already
holding a slot is judged on its view and choice alone and moves no slot.

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
Bad locations are not final: the count stays exact after a violation, and
a violation's detail names every clause the event broke.

Cost: O(1) per event; memory O(requests in flight).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
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
    STALE = "stale"  # bad: routed on a stale view, against the headroom, or siloed onto a full engine
    LATE_STALE = "late-stale"  # bad: a route breaking a clause of a running request (running otherwise)
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


def _fresh(inst: Instance, ev: Route) -> bool:
    staleness = _staleness(inst, ev)
    if ev.mode is RouteMode.SILOED or staleness is None:
        return True
    return ev.view_time is not None and ev.t - ev.view_time <= staleness


def _sampled(ev: Route) -> dict[str, float] | None:
    """The engines a p2c route compared and the headroom it read for each (``None``: not recorded)."""
    raw = ev.extra.get("sampled")
    if not isinstance(raw, Mapping) or not raw:
        return None
    out = {str(k): v for k, v in ((k, _number(v)) for k, v in raw.items()) if v is not None}
    return out or None


def _bound(inst: Instance, ev: Route) -> float | None:
    """C_e of the route's engine: the block's (None for an unlisted one), else the route's own."""
    slots = inst.shared["FR"]["slots"]
    return _number(ev.extra.get("slots")) if slots is None else slots.get(ev.engine)


def _full(inst: Instance, ev: Route) -> str:
    """Why the route's engine has no slot free for it now (``""``: it has one, or no bound is known)."""
    state = inst.shared["FR"]
    slots = _bound(inst, ev)
    if slots is None:
        return (
            ""
            if state["slots"] is None
            else f"engine {ev.engine!r}, which the contract's fleet does not list"
        )
    held = len(state["holding"].get(ev.engine, ()))
    return f"{held} already in flight on engine {ev.engine!r} = C_e {slots:g}" if held >= slots else ""


def _route_faults(inst: Instance, ev: Route, *, room: bool) -> list[str]:
    """Every clause the route breaks (module doc); ``room``: judge the engine's slots too."""
    why = []
    if not _fresh(inst, ev):
        if ev.view_time is None:
            why.append("a p2c route with no view_time: routed on no view at all")
        else:
            age = ev.t - ev.view_time
            why.append(f"a p2c route decided on a view {age:g} s old > staleness {_staleness(inst, ev):g} s")
    elif ev.mode is RouteMode.P2C and (sampled := _sampled(ev)) is not None:
        best = max(sampled.values())
        got = sampled.get(ev.engine)
        if got is None:
            why.append(f"routed to {ev.engine!r}, which it did not sample ({', '.join(map(repr, sampled))})")
        elif got < best:
            better = sorted(e for e, h in sampled.items() if h == best)
            why.append(
                f"routed to {ev.engine!r} with headroom {got:g} while {better[0]!r} had {best:g}: "
                "the engine with more headroom wins"
            )
    if room and (full := _full(inst, ev)):
        if ev.mode is RouteMode.SILOED:
            why.append(f"a siloed route onto a full engine ({full}): it would spend that engine's floor")
        else:
            why.append(f"a late route onto a full engine ({full})")
    return why


def _route_ok(inst: Instance, ev: Event) -> bool:
    """A route before its dispatch: fresh, well chosen, and a siloed one onto a free engine."""
    assert isinstance(ev, Route)
    return not _route_faults(inst, ev, room=ev.mode is RouteMode.SILOED)


def _late_ok(inst: Instance, ev: Event) -> bool:
    """A late route (after its dispatch): fresh, well chosen, its engine with room (it takes the slot)."""
    assert isinstance(ev, Route)
    return not _route_faults(inst, ev, room=True)


def _rerouted_ok(inst: Instance, ev: Event) -> bool:
    """A route of a request holding a slot: fresh and well chosen (it moves no slot)."""
    assert isinstance(ev, Route)
    return not _route_faults(inst, ev, room=False)


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


def _noted(room: str) -> Callable[[Instance, Event], None]:
    """An update that records the route's faults (``room``: which slots clause applies) for the detail."""

    def update(inst: Instance, ev: Event) -> None:
        assert isinstance(ev, Route)
        judged = ev.mode is RouteMode.SILOED if room == "siloed" else room == "late"
        inst.vars["fr_why"] = _route_faults(inst, ev, room=judged)

    return update


def _chain(*updates: Callable[[Instance, Event], None]) -> Callable[[Instance, Event], None]:
    def update(inst: Instance, ev: Event) -> None:
        for u in updates:
            u(inst, ev)

    return update


def _room(inst: Instance, ev: Event) -> bool:
    engine = inst.vars["fr_engine"]
    state = inst.shared["FR"]
    slots = _limit(inst, engine)
    if slots is None:
        return state["slots"] is None  # no bound carried: judged on nothing; with a block: unlisted
    return len(state["holding"].get(engine, ())) < slots


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


def _why(inst: Instance, ev: Event | None, now: float) -> str:
    return "; ".join(inst.vars["fr_why"])


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
    # a late route: legal, judged as the route and the slot taking at once (it takes the slot anyway)
    (Loc.UNPLACED, K.ROUTE): (
        Edge(
            Loc.RUNNING,
            _late_ok,
            "late: fresh view, chosen on headroom, fewer than C_e",
            update=_chain(_place, _take),
        ),
        Edge(
            Loc.LATE_STALE,
            label="late: stale view, against the headroom, or C_e taken",
            update=_chain(_noted("late"), _place, _take),
            detail=_why,
        ),
    ),
    **{
        (loc, K.ROUTE): (
            Edge(
                Loc.ROUTED,
                _route_ok,
                "fresh view and chosen on headroom; siloed onto a free engine",
                update=_place,
            ),
            Edge(
                Loc.STALE,
                label="stale view, against the headroom, or siloed onto a full engine",
                update=_chain(_noted("siloed"), _place),
                detail=_why,
            ),
        )
        for loc in _PLACED
    },
    **{(loc, K.RELOCATE): (Edge(Loc.ROUTED, update=_place),) for loc in _PLACED},
    # a route of a request holding a slot: judged on its view and choice; the slot stays where it is
    **{
        (loc, K.ROUTE): (
            Edge(Loc.RUNNING, _rerouted_ok, "fresh view and chosen on headroom"),
            Edge(
                Loc.LATE_STALE, label="stale view or against the headroom", update=_noted("none"), detail=_why
            ),
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
    description="no p2c route on a view older than the staleness bound; a fresh p2c route goes to the "
    "sampled engine with the most headroom; a siloed one only onto an engine with a free slot; "
    "per-engine in flight ≤ C_e",
    locations=Loc,
    initial=Loc.IDLE,
    bad=frozenset({Loc.STALE, Loc.OVER, Loc.LATE_STALE}),
    transitions=TRANSITIONS,
    context=_context,
    shared=_shared,
    bad_is_final=False,
)
