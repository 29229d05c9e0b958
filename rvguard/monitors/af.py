"""AF — admission floor: every floor-entitled request is admitted.

Theory of operation
-------------------
The integer variable of this property is the per-tenant, per-window credit
counter ``used_k(tenant)``: reset at every window edge ``t0 + kW``,
incremented by each arrival's credit (1, or w(R) with token credits). It
is kept by `rvguard.contract.Entitlement`, the one implementation shared
with the enforcer, and reaches this table as the instance fact
``entitled`` (``used_k ≤ B`` after the arrival). An entitled request must
be admitted: a ``reject`` (or a ``drop`` before admission) is a bad prefix,
and so is an ``admit`` as ``demoted``: under ``excess: demote`` that is the
same refusal of the floor as a reject under ``reject`` (an admission as
``surplus`` is left alone: only a policy with no floor at all, a baseline,
admits a floored tenant so). Where the trace records why the floor was refused
(a shared pool's refusal, a declared floor lowering: the decision's
``floor_refused`` field and the watch's ``alert`` records), `rvguard check`
reports the violation as a declared exception, counted apart
(`rvguard.attribution`). The learner's proposal plays no part: AF holds
whatever it proposed.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..events import Admit, Basis, Event, EventKind
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


def _not_demoted(inst: Instance, ev: Event) -> bool:
    return not (isinstance(ev, Admit) and ev.basis is Basis.DEMOTED)


def _detail(inst: Instance, ev: Event | None, now: float) -> str:
    if isinstance(ev, Admit):
        what = f"admitted as {ev.basis.value}, not on the floor"
    else:
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
    (Loc.ENTITLED, K.ADMIT): (
        Edge(Loc.ADMITTED, _not_demoted, "basis ≠ demoted"),
        Edge(Loc.BAD, label="basis = demoted", detail=_detail),
    ),
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
