"""WF — the well-formedness protocol of DESIGN §2, as a strict automaton.

Theory of operation
-------------------
Per request: ``arrive → admit → dispatch → (complete | fail | drop)``, or
``arrive → reject``, or ``admit → drop`` (deferred drop at dispatch time), or
``admit → fail`` (the request was cancelled or the guard shut down before it
reached a slot; an extension of DESIGN §2 so that such requests still get
exactly one terminal event without a false doom-drop). Anything else — an
event for a request that never arrived, a second ``arrive``, any event
after the terminal one — is missing from the table and so goes BAD.

Rejection is atomic: the monitor reports the violation and leaves every
automaton's state as it was before the illegal event (the event is refused,
as an h11 connection refuses an illegal event). Out-of-order timestamps are
not a WF verdict but a `TraceOrderError`: monitors learn time from events.
"""

from __future__ import annotations

from enum import Enum

from ..events import Event, EventKind
from .automaton import Edge, Instance, TimedAutomaton

__all__ = ["TRANSITIONS", "WF", "Loc"]


class Loc(Enum):
    """Protocol locations of one request."""

    NEW = "new"
    ARRIVED = "arrived"
    ADMITTED = "admitted"
    DISPATCHED = "dispatched"
    DONE = "done"
    BAD = "bad"


K = EventKind

TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ARRIVE): (Edge(Loc.ARRIVED),),
    (Loc.ARRIVED, K.ADMIT): (Edge(Loc.ADMITTED),),
    (Loc.ARRIVED, K.REJECT): (Edge(Loc.DONE),),
    (Loc.ADMITTED, K.DISPATCH): (Edge(Loc.DISPATCHED),),
    (Loc.ADMITTED, K.DROP): (Edge(Loc.DONE),),
    (Loc.ADMITTED, K.FAIL): (Edge(Loc.DONE),),
    (Loc.DISPATCHED, K.COMPLETE): (Edge(Loc.DONE),),
    (Loc.DISPATCHED, K.FAIL): (Edge(Loc.DONE),),
    (Loc.DISPATCHED, K.DROP): (Edge(Loc.DONE),),
}

_WHY = {
    Loc.NEW: "the request never arrived",
    Loc.ARRIVED: "the request has arrived but was neither admitted nor rejected",
    Loc.ADMITTED: "the request is admitted but not dispatched",
    Loc.DISPATCHED: "the request is in flight",
    Loc.DONE: "the request already had its terminal event",
}


def illegal_detail(loc: Loc, ev: Event) -> str:
    """The sentence reported for an event the protocol does not allow."""
    if ev.kind is K.ARRIVE and loc is not Loc.NEW:
        return f"duplicate arrive for rid {ev.rid!r}"
    return f"{ev.kind.value} not allowed: {_WHY.get(loc, loc.value)}"


def _strict_detail(inst: Instance, ev: Event | None, now: float) -> str:  # pragma: no cover - see Monitor
    return "" if ev is None else f"{ev.kind.value} not allowed here"


WF = TimedAutomaton(
    name="WF",
    description="well-formed request protocol (DESIGN §2)",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.BAD}),
    transitions=TRANSITIONS,
    strict=True,
    clocks=(),
    strict_detail=_strict_detail,
)

#: Locations after which the request is finished and its instance is freed.
FINAL = frozenset({Loc.DONE})
