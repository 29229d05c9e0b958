"""EV — eviction: at most k evictions in flight, and never of a protected request (DESIGN §10).

Theory of operation
-------------------
An eviction is *in flight* from its ``evict`` until the request is
``relocate``-d (queued again) or ends (``fail``). EV's variable is shared
by all requests (`shared`): the evicted requests in flight, in eviction
order; the contract's ``eviction.k`` bounds their number. An ``evict``
is a bad prefix when k are already in flight, or when the request is
protected (floor-entitled or admitted on the floor: `pr.protected`),
which the emergency channel must never pick. The bad locations are not
final: the request still relocates or ends, so the count stays exact
after a violation, and each later violating eviction is reported too.

What EV does not judge: the runbook's "no eviction while credited
headroom already reaches the target" needs the planner's headroom
accounting, which the trace does not carry.

Cost: O(1) per event; memory O(evictions in flight).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..contract import Contract
from ..errors import SpecError
from ..events import Event, EventKind
from .automaton import Edge, Instance, TimedAutomaton
from .pr import protected

__all__ = ["EV", "SHOWN", "TRANSITIONS", "Loc"]

#: how many of the other evictions in flight a violation names
SHOWN = 16


class Loc(Enum):
    """EV locations of one request."""

    NEW = "new"
    READY = "ready"  # admitted, surplus
    GUARDED = "guarded"  # admitted, protected: never to be evicted
    EVICTED = "evicted"
    OVER = "over"  # bad: evicted beyond k, or a protected request evicted (it still relocates or ends)
    DONE = "done"


K = EventKind


def _shared(contract: Contract) -> dict[str, Any]:
    if contract.eviction is None:  # pragma: no cover - resolve_properties refuses EV first
        raise SpecError("property EV needs the contract's eviction block (k)", field="eviction")
    return {"k": contract.eviction.k, "evicting": {}}


def _ok(inst: Instance, ev: Event) -> bool:
    state = inst.shared["EV"]
    return len(state["evicting"]) < int(state["k"])


def _take(inst: Instance, ev: Event) -> None:
    state = inst.shared["EV"]
    evicting: dict[str, None] = state["evicting"]
    inst.vars.update(
        ev_limit=state["k"],
        ev_in_flight=len(evicting) + 1,
        ev_others=tuple(itertools.islice(evicting, SHOWN)),
        ev_protected=inst.vars.get("ev_guarded", False),
    )
    evicting[inst.rid] = None


def _take_guarded(inst: Instance, ev: Event) -> None:
    """`_take` for a protected request (which eviction must never pick)."""
    inst.vars["ev_guarded"] = True
    _take(inst, ev)


def _was_guarded(inst: Instance, ev: Event) -> bool:
    return bool(inst.vars.get("ev_guarded", False))


def _release(inst: Instance, ev: Event) -> None:
    inst.shared["EV"]["evicting"].pop(inst.rid, None)


def _detail(inst: Instance, ev: Event | None, now: float) -> str:
    v = inst.vars
    if v["ev_protected"]:
        return (
            "a floor-entitled or assured request was evicted: the emergency channel takes surplus work only"
        )
    return f"eviction made {v['ev_in_flight']} evictions in flight > k = {v['ev_limit']}"


_TAKE = Edge(Loc.EVICTED, _ok, "fewer than k in flight", update=_take)
_OVER = Edge(Loc.OVER, label="k in flight already", update=_take, detail=_detail)
TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ADMIT): (
        Edge(Loc.GUARDED, protected, "entitled or basis = floor"),
        Edge(Loc.READY, label="surplus"),
    ),
    (Loc.READY, K.EVICT): (_TAKE, _OVER),
    (Loc.GUARDED, K.EVICT): (Edge(Loc.OVER, label="protected", update=_take_guarded, detail=_detail),),
    **{
        (loc, K.RELOCATE): (
            Edge(Loc.GUARDED, _was_guarded, "protected", update=_release),
            Edge(Loc.READY, label="surplus", update=_release),
        )
        for loc in (Loc.EVICTED, Loc.OVER)
    },
    **{(loc, K.FAIL): (Edge(Loc.DONE, update=_release),) for loc in (Loc.EVICTED, Loc.OVER)},
}


def _context(inst: Instance) -> Mapping[str, Any]:
    v = inst.vars
    return {
        "limit": v["ev_limit"],
        "evictions_in_flight": v["ev_in_flight"],
        "others": list(v["ev_others"]),
        "protected": v["ev_protected"],
    }


EV = TimedAutomaton(
    name="EV",
    description="at most k evictions in flight, never of an assured or floor-entitled request",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.OVER}),
    transitions=TRANSITIONS,
    context=_context,
    shared=_shared,
    bad_is_final=False,
)
