"""RB — reserved buffer: surplus work in flight never exceeds C − R (DESIGN §10).

Theory of operation
-------------------
The contract's ``reserve`` R holds R of the C slots back from surplus
(opportunistic) work: a request admitted on any basis but ``floor``
(``surplus`` or ``demoted``). RB's variable is shared by all requests: the
set of surplus requests holding a slot (dispatched, not ended), whose size
n starts at 0 (`shared`). Each request's table remembers its admission
basis; a surplus request's ``dispatch`` adds it, and is a bad prefix when n
already reached C − R; its terminal event (complete, fail, drop) or its eviction removes it (a
relocated request's next dispatch counts it again).
The bad location OVER is not final (``bad_is_final=False``): the request
still ends from there, so n stays exact after a violation and every later
surplus dispatch beyond C − R is reported too. Floor work is never counted,
so it may hold any of the C slots.

RB needs only the events every trace has: ``admit`` with its basis,
``dispatch`` and the terminal kinds. The witness is the violating request's
events (arrive, admit, dispatch); its context gives the limit C − R, the
count with it, and the first `SHOWN` surplus requests holding the other
slots, in dispatch order (`holders`).

Cost: O(1) per event (a dict insert or delete); memory O(surplus in flight).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..contract import Contract
from ..events import Admit, Basis, Event, EventKind
from .automaton import Edge, Instance, TimedAutomaton

__all__ = ["RB", "SHOWN", "TRANSITIONS", "Loc", "holders"]

#: how many of the other surplus holders a violation names
SHOWN = 16


class Loc(Enum):
    """RB locations of one request."""

    NEW = "new"
    FLOOR = "floor"
    SURPLUS = "surplus"
    RUNNING = "running"
    OVER = "over"
    DONE = "done"


K = EventKind


def _shared(contract: Contract) -> dict[str, Any]:
    return {"limit": contract.slots - contract.reserve, "holding": {}}


def _on_floor(inst: Instance, ev: Event) -> bool:
    return isinstance(ev, Admit) and ev.basis is Basis.FLOOR


def _room(inst: Instance, ev: Event) -> bool:
    rb = inst.shared["RB"]
    return len(rb["holding"]) < int(rb["limit"])


def _take(inst: Instance, ev: Event) -> None:
    inst.shared["RB"]["holding"][inst.rid] = None


def holders(holding: Mapping[str, None]) -> tuple[str, ...]:
    """The first `SHOWN` holders in dispatch order (what a violation names)."""
    return tuple(itertools.islice(holding, SHOWN))


def _take_over(inst: Instance, ev: Event) -> None:
    rb = inst.shared["RB"]
    inst.vars.update(limit=rb["limit"], in_flight=len(rb["holding"]) + 1, holders=holders(rb["holding"]))
    rb["holding"][inst.rid] = None


def _release(inst: Instance, ev: Event) -> None:
    inst.shared["RB"]["holding"].pop(inst.rid, None)


def _detail(inst: Instance, ev: Event | None, now: float) -> str:
    v = inst.vars
    return (
        f"surplus dispatch made {v['in_flight']} surplus requests in flight > C − R = {v['limit']} "
        f"(the reserve's slots are for floor work)"
    )


_END = (Edge(Loc.DONE, update=_release),)
TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ADMIT): (
        Edge(Loc.FLOOR, _on_floor, "basis = floor"),
        Edge(Loc.SURPLUS, label="basis ≠ floor (surplus, demoted)"),
    ),
    (Loc.SURPLUS, K.DISPATCH): (
        Edge(Loc.RUNNING, _room, "n < C − R", update=_take),
        Edge(Loc.OVER, label="n ≥ C − R", update=_take_over, detail=_detail),
    ),
    **{(loc, kind): _END for loc in (Loc.RUNNING, Loc.OVER) for kind in (K.COMPLETE, K.FAIL, K.DROP)},
    # DESIGN §10: an evicted request gives its slot back; relocated, it is dispatched (and counted) again
    **{(loc, K.EVICT): (Edge(Loc.SURPLUS, update=_release),) for loc in (Loc.RUNNING, Loc.OVER)},
}


def _context(inst: Instance) -> Mapping[str, Any]:
    v = inst.vars
    return {"limit": v["limit"], "surplus_in_flight": v["in_flight"], "holders": list(v["holders"])}


RB = TimedAutomaton(
    name="RB",
    description="surplus work in flight never exceeds C − R (the reserved buffer)",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.OVER}),
    transitions=TRANSITIONS,
    context=_context,
    shared=_shared,
    bad_is_final=False,
)
