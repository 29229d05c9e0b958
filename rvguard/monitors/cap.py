"""CAP — capacity: at most C requests in flight at every instant, and at most C_e on each engine.

Theory of operation
-------------------
DESIGN §4: "Dispatch: at most C in flight". CAP's variables are shared by all
requests: the set of requests holding a slot (dispatched, neither ended nor
evicted since), and per engine the set holding one of its slots. A
``dispatch`` adds the request; it is a bad prefix when C requests already
hold a slot. Its terminal event or its eviction removes it (a relocated
request's next dispatch counts it again). Floor and surplus work count
alike: RB bounds the surplus part, CAP the whole.

Where ``route`` or ``relocate`` records name engines, a request's engine is
the one its last route or relocation named; its dispatch also takes one of
that engine's slots (a *late* route, written after the dispatch, takes it at
the route; a route of a request already holding an engine's slot moves
nothing), and is a bad prefix when C_e already hold one. C_e is the
contract's ``fleet`` block's when it lists the engine; else the ``slots`` the
last route record naming that engine carried (what the gateway held it to);
else C, which bounds every engine since it bounds them all together — so a
relocated request is judged against a limit even in a trace with no
``fleet`` block. A request never routed or relocated holds no engine's slot.

Bad locations are not final (``bad_is_final=False``): the request still ends
from there, so the counts stay exact after a violation and every later
dispatch beyond a limit is reported too. The witness is the request's events
up to the bad one; its context gives the limit, the count with it, and the
first `SHOWN` other holders in dispatch order.

Cost: O(1) per event; memory O(requests in flight + engines).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..contract import Contract
from ..events import Event, EventKind, Relocate, Route
from .automaton import Edge, Instance, TimedAutomaton

__all__ = ["CAP", "SHOWN", "TRANSITIONS", "Loc", "holders"]

#: how many of the other holders a violation names
SHOWN = 16


class Loc(Enum):
    """CAP locations of one request."""

    QUEUED = "queued"  # not holding a slot (before dispatch, or evicted)
    RUNNING = "running"
    OVER = "over"  # bad: dispatched with C already in flight (running otherwise)
    OVER_ENGINE = "over-engine"  # bad: took its engine's slot with C_e already taken (running otherwise)
    DONE = "done"


K = EventKind


def _shared(contract: Contract) -> dict[str, Any]:
    fleet = contract.fleet
    return {
        "limit": contract.slots,
        "holding": {},  # rid -> None, in dispatch order
        "engines": {} if fleet is None else dict(fleet.engines),  # C_e stated by the contract
        "carried": {},  # engine -> the slots the last route naming it carried
        "on": {},  # engine -> {rid: None} holding one of its slots
    }


def holders(holding: Mapping[str, None]) -> tuple[str, ...]:
    """The first `SHOWN` holders in dispatch order (what a violation names)."""
    return tuple(itertools.islice(holding, SHOWN))


def _slots(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return int(value) if float(value).is_integer() else None


def engine_limit(state: Mapping[str, Any], engine: str) -> int:
    """C_e: the contract's, else the last route's for that engine, else C."""
    stated = state["engines"].get(engine)
    if stated is not None:
        return int(stated)
    carried = state["carried"].get(engine)
    return int(state["limit"]) if carried is None else int(carried)


# -- the total -------------------------------------------------------------------------------
def _room(inst: Instance, ev: Event) -> bool:
    cap = inst.shared["CAP"]
    return len(cap["holding"]) < int(cap["limit"])


def _engine_room(inst: Instance, engine: str | None) -> bool:
    if engine is None:
        return True
    cap = inst.shared["CAP"]
    return len(cap["on"].get(engine, ())) < engine_limit(cap, engine)


def _dispatch_ok(inst: Instance, ev: Event) -> bool:
    return _room(inst, ev) and _engine_room(inst, inst.vars.get("cap_engine"))


def _over_engine_only(inst: Instance, ev: Event) -> bool:
    return _room(inst, ev)


def _take(inst: Instance, ev: Event) -> None:
    """Hold a slot (and the engine's, when placed): the common case, nothing recorded."""
    cap = inst.shared["CAP"]
    cap["holding"][inst.rid] = None
    engine = inst.vars.get("cap_engine")
    if engine is not None:
        cap["on"].setdefault(engine, {})[inst.rid] = None
        inst.vars["cap_holding"] = engine


def _take_over(inst: Instance, ev: Event) -> None:
    """Hold a slot beyond C: record the count and the holders the violation names."""
    cap = inst.shared["CAP"]
    holding = cap["holding"]
    inst.vars.update(
        cap_clause="C", cap_limit=cap["limit"], cap_in_flight=len(holding) + 1, cap_others=holders(holding)
    )
    _take(inst, ev)


def _take_over_engine(inst: Instance, ev: Event) -> None:
    """Hold a slot within C but one of the engine's beyond C_e: record that count and its holders."""
    _record_engine(inst, inst.vars["cap_engine"])
    _take(inst, ev)


def _record_engine(inst: Instance, engine: str) -> None:
    cap = inst.shared["CAP"]
    on = cap["on"].get(engine, {})
    inst.vars.update(
        cap_clause="C_e",
        cap_limit=engine_limit(cap, engine),
        cap_in_flight=len(on) + 1,
        cap_others=holders(on),
        cap_holding=engine,
    )


def _release(inst: Instance, ev: Event) -> None:
    cap = inst.shared["CAP"]
    cap["holding"].pop(inst.rid, None)
    engine = inst.vars.pop("cap_holding", None)
    if engine is not None:
        cap["on"][engine].pop(inst.rid, None)


# -- engines ---------------------------------------------------------------------------------
def _learn(inst: Instance, ev: Route | Relocate) -> None:
    if isinstance(ev, Route):
        slots = _slots(ev.extra.get("slots"))
        if slots is not None:
            inst.shared["CAP"]["carried"][ev.engine] = slots


def _place(inst: Instance, ev: Event) -> None:
    assert isinstance(ev, Route | Relocate)
    _learn(inst, ev)
    inst.vars["cap_engine"] = ev.engine


def _late(inst: Instance, ev: Event) -> bool:
    """A route of a running request that holds no engine's slot yet (a late route)."""
    return isinstance(ev, Route) and "cap_holding" not in inst.vars


def _late_room(inst: Instance, ev: Event) -> bool:
    assert isinstance(ev, Route)
    _learn(inst, ev)
    return _late(inst, ev) and _engine_room(inst, ev.engine)


def _late_take(inst: Instance, ev: Event) -> None:
    assert isinstance(ev, Route)
    inst.vars["cap_engine"] = ev.engine
    inst.shared["CAP"]["on"].setdefault(ev.engine, {})[inst.rid] = None
    inst.vars["cap_holding"] = ev.engine


def _late_take_over(inst: Instance, ev: Event) -> None:
    assert isinstance(ev, Route)
    _record_engine(inst, ev.engine)
    _late_take(inst, ev)


def _learn_only(inst: Instance, ev: Event) -> None:
    assert isinstance(ev, Route)
    _learn(inst, ev)


def _detail(inst: Instance, ev: Event | None, now: float) -> str:
    v = inst.vars
    if v["cap_clause"] == "C":
        return f"dispatch made {v['cap_in_flight']} requests in flight > C = {v['cap_limit']}"
    return (
        f"dispatch made {v['cap_in_flight']} requests in flight on engine {v['cap_holding']!r} "
        f"> C_e = {v['cap_limit']}"
    )


_ENDS = (K.COMPLETE, K.FAIL, K.DROP)
_RUNNING = (Loc.RUNNING, Loc.OVER, Loc.OVER_ENGINE)
TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.QUEUED, K.DISPATCH): (
        Edge(Loc.RUNNING, _dispatch_ok, "n < C and n_e < C_e", update=_take),
        Edge(
            Loc.OVER_ENGINE, _over_engine_only, "n < C, n_e ≥ C_e", update=_take_over_engine, detail=_detail
        ),
        Edge(Loc.OVER, label="n ≥ C", update=_take_over, detail=_detail),
    ),
    (Loc.QUEUED, K.ROUTE): (Edge(Loc.QUEUED, update=_place),),
    (Loc.QUEUED, K.RELOCATE): (Edge(Loc.QUEUED, update=_place),),
    **{
        (loc, K.ROUTE): (
            Edge(Loc.RUNNING, _late_room, "late route, n_e < C_e", update=_late_take),
            Edge(Loc.OVER_ENGINE, _late, "late route, n_e ≥ C_e", update=_late_take_over, detail=_detail),
            Edge(Loc.RUNNING, label="holding its engine's slot: moves nothing", update=_learn_only),
        )
        for loc in _RUNNING
    },
    **{(loc, K.EVICT): (Edge(Loc.QUEUED, update=_release),) for loc in _RUNNING},
    **{(loc, kind): (Edge(Loc.DONE, update=_release),) for loc in _RUNNING for kind in _ENDS},
}


def _context(inst: Instance) -> Mapping[str, Any]:
    v = inst.vars
    out = {"clause": v["cap_clause"], "limit": v["cap_limit"], "in_flight": v["cap_in_flight"]}
    if v["cap_clause"] == "C_e":
        out["engine"] = v["cap_holding"]
    return out | {"holders": list(v["cap_others"])}


CAP = TimedAutomaton(
    name="CAP",
    description="at most C requests in flight at every instant; at most C_e on each engine",
    locations=Loc,
    initial=Loc.QUEUED,
    bad=frozenset({Loc.OVER, Loc.OVER_ENGINE}),
    transitions=TRANSITIONS,
    context=_context,
    shared=_shared,
    bad_is_final=False,
)
