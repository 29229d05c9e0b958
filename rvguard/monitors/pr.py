"""PR — preemption: no assured or floor-entitled request is ever ended by the guard (DESIGN §10, §11).

Theory of operation
-------------------
A request is *protected* when it is floor-entitled (DESIGN §1) or admitted
with basis ``floor`` (it holds the assured service). Surplus work — basis
``surplus``, or ``demoted`` burst excess of a floored tenant that is not
entitled, which is served at opportunistic rank — may be preempted; a
protected request may not: its ``evict`` (taken off its engine), or a
``fail`` the guard caused, is a bad prefix, at that event.

Who caused a ``fail`` is read from its reason (`GUARD_CAUSED`, the ends the
guard's code writes by itself): ``preempted`` (bare preemption, an eviction
not relocated), ``redline-stale`` (surplus held past the hold limit on a stale sample),
``hold-bound`` (surplus held longer than rationed relief's hold bound, `rvguard.enforce.rationing`),
``shutdown`` (`Guard.aclose` ending what its drain left,
`DecisionCore.fail_queued`), and ``KeyboardInterrupt`` / ``SystemExit`` /
``GeneratorExit`` (the guard's process interrupted, or its coroutine closed,
under a request: `Guard` names the exception). Every other reason is
the engine's (``timeout``: the engine outlasted the dispatch time-out;
``backend``, ``CancelledError: …``, ``<Exception>: …``, ``DispatchError: …``:
it failed) or the client's (``cancelled``: the caller gave up; ``client-error…``:
a 4xx): those ends are SF's to judge (it exempts the client's), not PR's.
A ``drop`` is DR's: the guard may drop only a doomed request, whatever its
reason. That a preempted request ends exactly once is WF's (one terminal
event per request); PR's table only says *who* the guard may end.

The bad location is not final (``bad_is_final=False``): a protected
request evicted, relocated and evicted again is reported at each
eviction. The witness is the request's events up to the bad one.

Cost: O(1) per event; memory O(1) per live request.
"""

from __future__ import annotations

from enum import Enum

from ..events import HOLD_BOUND, PREEMPTED, Admit, Basis, Event, EventKind, Fail
from .automaton import Edge, Instance, TimedAutomaton

__all__ = ["GUARD_CAUSED", "PR", "TRANSITIONS", "Loc", "guard_caused", "protected"]

#: the ``fail`` reasons the guard writes when it ends a request by itself (module docstring)
GUARD_CAUSED: frozenset[str] = frozenset(
    {PREEMPTED, HOLD_BOUND, "shutdown", "redline-stale", "KeyboardInterrupt", "SystemExit", "GeneratorExit"}
)


def guard_caused(reason: str) -> bool:
    """True when a ``fail`` with this reason is an end the guard caused (not the engine, nor the client)."""
    return reason in GUARD_CAUSED


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


def _ended_by_guard(inst: Instance, ev: Event) -> bool:
    return isinstance(ev, Fail) and ev.reason in GUARD_CAUSED


def _why(inst: Instance) -> str:
    return "floor-entitled" if inst.entitled else "admitted on the floor (assured)"


def _evicted(inst: Instance, ev: Event | None, now: float) -> str:
    return f"a {_why(inst)} request was evicted: only surplus work may be preempted"


def _failed(inst: Instance, ev: Event | None, now: float) -> str:
    reason = ev.reason if isinstance(ev, Fail) else PREEMPTED
    return (
        f"a {_why(inst)} request was ended by the guard (fail reason {reason!r}): "
        "only surplus work may be preempted"
    )


_GUARDED = (Loc.PROTECTED, Loc.PREEMPTED)
TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ADMIT): (
        Edge(Loc.PROTECTED, protected, "entitled or basis = floor"),
        Edge(Loc.OPEN, label="surplus (basis surplus or demoted, not entitled)"),
    ),
    **{(loc, K.EVICT): (Edge(Loc.PREEMPTED, label="evicted", detail=_evicted),) for loc in _GUARDED},
    **{
        (loc, K.FAIL): (
            Edge(Loc.PREEMPTED, _ended_by_guard, "reason ∈ GUARD_CAUSED", detail=_failed),
            Edge(Loc.DONE, label="the engine's or the client's end"),
        )
        for loc in _GUARDED
    },
}


def _context(inst: Instance) -> dict[str, object]:
    return {"entitled": inst.entitled, "tenant": inst.tenant}


PR = TimedAutomaton(
    name="PR",
    description="no assured or floor-entitled request is ever preempted (evicted, or failed by the guard)",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.PREEMPTED}),
    transitions=TRANSITIONS,
    context=_context,
    bad_is_final=False,
)
