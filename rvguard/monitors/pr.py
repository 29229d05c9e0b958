"""PR — preemption: no assured or floor-entitled request is ever preempted (DESIGN §10).

Theory of operation
-------------------
A request is *protected* when it is floor-entitled (DESIGN §1) or admitted
with basis ``floor`` (it holds the assured service). Surplus work — basis
``surplus``, or ``demoted`` burst excess of a floored tenant, which is
served at opportunistic rank — may be preempted; a protected request may
not: its ``evict`` (taken off its engine) or its ``fail`` with reason
``preempted`` is a bad prefix, at that event. That a preempted request
ends exactly once is WF's (one terminal event per request); PR's table
only says *who* may be preempted.

The bad location is not final (``bad_is_final=False``): a protected
request evicted, relocated and evicted again is reported at each
eviction. The witness is the request's events up to the bad one.

Cost: O(1) per event; memory O(1) per live request.
"""

from __future__ import annotations

from enum import Enum

from ..events import PREEMPTED, Admit, Basis, Event, EventKind, Fail
from .automaton import Edge, Instance, TimedAutomaton

__all__ = ["PR", "TRANSITIONS", "Loc", "protected"]


class Loc(Enum):
    """PR locations of one request."""

    NEW = "new"
    OPEN = "open"  # surplus work: it may be preempted
    PROTECTED = "protected"
    PREEMPTED = "preempted"  # bad: a protected request was preempted (it still reacts)
    DONE = "done"


K = EventKind


def protected(inst: Instance, ev: Event) -> bool:
    """Guard at ``admit``: the request is floor-entitled or admitted on the floor (assured)."""
    return inst.entitled or (isinstance(ev, Admit) and ev.basis is Basis.FLOOR)


def _preempted(inst: Instance, ev: Event) -> bool:
    return isinstance(ev, Fail) and ev.reason == PREEMPTED


def _why(inst: Instance) -> str:
    return "floor-entitled" if inst.entitled else "admitted on the floor (assured)"


def _evicted(inst: Instance, ev: Event | None, now: float) -> str:
    return f"a {_why(inst)} request was evicted: only surplus work may be preempted"


def _failed(inst: Instance, ev: Event | None, now: float) -> str:
    return f"a {_why(inst)} request ended with fail reason {PREEMPTED!r}: only surplus work may be preempted"


_GUARDED = (Loc.PROTECTED, Loc.PREEMPTED)
TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ADMIT): (
        Edge(Loc.PROTECTED, protected, "entitled or basis = floor"),
        Edge(Loc.OPEN, label="surplus (basis surplus or demoted, not entitled)"),
    ),
    **{(loc, K.EVICT): (Edge(Loc.PREEMPTED, label="evicted", detail=_evicted),) for loc in _GUARDED},
    **{
        (loc, K.FAIL): (
            Edge(Loc.PREEMPTED, _preempted, "reason = preempted", detail=_failed),
            Edge(Loc.DONE, label="another reason"),
        )
        for loc in _GUARDED
    },
}


def _context(inst: Instance) -> dict[str, object]:
    return {"entitled": inst.entitled, "tenant": inst.tenant}


PR = TimedAutomaton(
    name="PR",
    description="no assured or floor-entitled request is ever preempted (evicted, or failed 'preempted')",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.PREEMPTED}),
    transitions=TRANSITIONS,
    context=_context,
    bad_is_final=False,
)
