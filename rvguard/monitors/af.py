"""AF — admission floor: every floor-entitled request is admitted.

Theory of operation
-------------------
The integer variable of this property is the per-tenant, per-window credit
counter ``used_k(tenant)``: reset at every window edge ``t0 + kW``,
incremented by each arrival's credit (1, or w(R) with token credits). It
is kept by `rvguard.contract.Entitlement`, the one implementation shared
with the enforcer, and reaches this table as the instance fact
``entitled`` (``used_k ≤ B`` after the arrival). An entitled request must
be admitted: a ``reject`` (or a ``drop`` before admission) is a bad prefix.
The learner's proposal plays no part: AF holds whatever it proposed.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..events import Event, EventKind
from .automaton import Edge, Instance, TimedAutomaton, entitled

__all__ = ["AF", "TRANSITIONS", "Loc"]


class Loc(Enum):
    """AF locations of one request."""

    NEW = "new"
    ENTITLED = "entitled"
    NOT_ENTITLED = "not_entitled"
    ADMITTED = "admitted"
    BAD = "bad"


K = EventKind


def _detail(inst: Instance, ev: Event | None, now: float) -> str:
    what = "rejected" if ev is not None and ev.kind is K.REJECT else "dropped before admission"
    return (
        f"floor-entitled request {what}: arrival {inst.rank} of tenant {inst.tenant!r} "
        f"in window {inst.window} used {inst.used:g} of its floor"
    )


TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ARRIVE): (
        Edge(Loc.ENTITLED, entitled, "used_k(tenant) ≤ B"),
        Edge(Loc.NOT_ENTITLED, label="used_k(tenant) > B or B = 0"),
    ),
    (Loc.ENTITLED, K.ADMIT): (Edge(Loc.ADMITTED),),
    (Loc.ENTITLED, K.REJECT): (Edge(Loc.BAD, detail=_detail),),
    (Loc.ENTITLED, K.DROP): (Edge(Loc.BAD, detail=_detail),),
}


def _context(inst: Instance) -> Mapping[str, Any]:
    return {"tenant": inst.tenant, "window": inst.window, "rank": inst.rank, "credit_used": inst.used}


AF = TimedAutomaton(
    name="AF",
    description="every floor-entitled request is admitted",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.BAD}),
    transitions=TRANSITIONS,
    context=_context,
)
