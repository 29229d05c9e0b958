"""DR — doom-sound drop, and ND — no doomed dispatch (optional, needs U).

Theory of operation
-------------------
DR: a request may be dropped at t only if it is doomed, t + L(R) > D(R),
with L the contract's service lower bound at the request's capped output
length. A drop with t + L(R) ≤ D(R) is a bad prefix. DR is sound only
while L(R) really bounds the service from below (a declared assumption;
`check` compares L with the observed services).

ND: a dispatch at t needs t + U(R) ≤ D(R), with U the optional upper
bound; otherwise the request may miss although it took a slot. Dispatches
with t + L(R) > D(R) are certainly doomed; those in between are uncertain
(the detail says which). Every dispatch is judged: an evicted request is
queued again (DESIGN §10: evict → relocate → dispatch), so its next
dispatch needs t + U(R) ≤ D(R) as much as its first.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..events import Event, EventKind
from .automaton import Edge, Instance, TimedAutomaton

__all__ = ["DR", "ND", "TRANSITIONS", "Loc"]


class Loc(Enum):
    """DR / ND locations of one request."""

    NEW = "new"
    LIVE = "live"
    RUNNING = "running"  # ND: dispatched (an eviction queues it again)
    DONE = "done"
    BAD = "bad"


K = EventKind


def _doomed(inst: Instance, ev: Event) -> bool:
    return ev.t + inst.lower > inst.deadline


def _not_doomed(inst: Instance, ev: Event | None, now: float) -> str:
    return (
        f"dropped although not doomed: t + L(R) = {now:.6g} + {inst.lower:.6g} ≤ D(R) = {inst.deadline:.6g}"
    )


TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ARRIVE): (Edge(Loc.LIVE),),
    (Loc.LIVE, K.DROP): (
        Edge(Loc.DONE, _doomed, "t + L(R) > D(R)"),
        Edge(Loc.BAD, label="t + L(R) ≤ D(R)", detail=_not_doomed),
    ),
}


def _context(inst: Instance) -> Mapping[str, Any]:
    return {"deadline": inst.deadline, "lower": inst.lower}


DR = TimedAutomaton(
    name="DR",
    description="a request is dropped only if doomed: t + L(R) > D(R)",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.BAD}),
    transitions=TRANSITIONS,
    context=_context,
)


def _surely_on_time(inst: Instance, ev: Event) -> bool:
    return inst.upper is not None and ev.t + inst.upper <= inst.deadline


def _doomed_dispatch(inst: Instance, ev: Event | None, now: float) -> str:
    upper = inst.upper if inst.upper is not None else float("nan")
    how = "certainly doomed" if now + inst.lower > inst.deadline else "uncertain"
    return f"dispatched with t + U(R) = {now:.6g} + {upper:.6g} > D(R) = {inst.deadline:.6g} ({how})"


ND_TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ARRIVE): (Edge(Loc.LIVE),),
    (Loc.LIVE, K.DISPATCH): (
        Edge(Loc.RUNNING, _surely_on_time, "t + U(R) ≤ D(R)"),
        Edge(Loc.BAD, label="t + U(R) > D(R)", detail=_doomed_dispatch),
    ),
    # an evicted request is queued again: its next dispatch (after its relocation) is judged too
    (Loc.RUNNING, K.EVICT): (Edge(Loc.LIVE),),
}


def _nd_context(inst: Instance) -> Mapping[str, Any]:
    return {"deadline": inst.deadline, "lower": inst.lower, "upper": inst.upper}


ND = TimedAutomaton(
    name="ND",
    description="no doomed dispatch: t + U(R) ≤ D(R) at dispatch (needs U)",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.BAD}),
    transitions=ND_TRANSITIONS,
    context=_nd_context,
)
