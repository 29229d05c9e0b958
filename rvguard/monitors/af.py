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

The upper side (DESIGN §11): floor credit is not spent beyond B. The floor
credit admitted per tenant and contract window — each ``admit`` with basis
``floor`` weighs its request's credit (1, or w(R)), counted in the window of
its arrival, in exact units — never exceeds B: an admit that takes it past B
is a bad prefix, at that admit (a guard that over-admits on the floor takes
capacity the other tenants' floors were promised). That count is shared by
all requests (`TimedAutomaton.shared`), kept per (tenant, window) in credit
units. A replica's trace alone is judged against the whole B (a replica of a
fleet may spend the whole pool); several replicas' merged traces against B
fleet-wide, by `rvguard.fleet.judge`, which counts the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..contract import Contract
from ..events import Admit, Arrive, Basis, Event, EventKind
from .automaton import Edge, Instance, TimedAutomaton, entitled

__all__ = ["AF", "TRANSITIONS", "Loc"]


class Loc(Enum):
    """AF locations of one request."""

    NEW = "new"
    ENTITLED = "entitled"
    NOT_ENTITLED = "not_entitled"
    ADMITTED = "admitted"
    BAD = "bad"
    OVER = "over"  # bad: admitted on the floor beyond B (the upper side)


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


# -- the upper side: floor credit admitted per (tenant, window) ≤ B -----------------------------
def _shared(contract: Contract) -> dict[str, Any]:
    units = contract.credit_units()
    return {"contract": contract, "units": units, "spent": {}}


def _floor_admit(ev: Event) -> bool:
    return isinstance(ev, Admit) and ev.basis is Basis.FLOOR


def _on_floor(inst: Instance, ev: Event) -> bool:
    return _floor_admit(ev)


def _units(inst: Instance) -> int:
    """The request's credit in units, from its arrive (the first event of its witness)."""
    state = inst.shared["AF"]
    arrive = inst.events[0]
    assert isinstance(arrive, Arrive)
    return int(state["contract"].weight_units(arrive.prompt_tokens, arrive.max_tokens, state["units"]))


def _within(inst: Instance, ev: Event) -> bool:
    if not _on_floor(inst, ev):
        return False
    state = inst.shared["AF"]
    spent = state["spent"].get((inst.tenant, inst.window), 0)
    return bool(spent + _units(inst) <= state["units"].floors[inst.tenant])


def _spend(inst: Instance, ev: Event) -> None:
    state = inst.shared["AF"]
    key = (inst.tenant, inst.window)
    spent = state["spent"][key] = state["spent"].get(key, 0) + _units(inst)
    units = state["units"]
    inst.vars["af_upper"] = {
        "floor_admitted": spent / units.scale,
        "floor": units.floors[inst.tenant] / units.scale,
    }


def _over(inst: Instance, ev: Event | None, now: float) -> str:
    upper = inst.vars["af_upper"]
    return (
        f"admitted on the floor beyond B: tenant {inst.tenant!r}'s floor credit admitted in window "
        f"{inst.window} reached {upper['floor_admitted']:g} > B = {upper['floor']:g}"
    )


# Both guards of the upper side hold only for a floor admission: the monitor's product takes every
# other admission on its fast path (`rvguard.monitors.product`, gates).
_on_floor.event_gate = _floor_admit  # type: ignore[attr-defined]
_within.event_gate = _floor_admit  # type: ignore[attr-defined]


def _upper(then: Loc) -> tuple[Edge, ...]:
    """The upper side's edges at an ``admit`` (tried first), the request going on to ``then``."""
    return (
        Edge(then, _within, "basis = floor and spent_k(tenant) + w ≤ B", update=_spend),
        Edge(Loc.OVER, _on_floor, "basis = floor and spent_k(tenant) + w > B", update=_spend, detail=_over),
    )


TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ARRIVE): (
        Edge(Loc.ENTITLED, entitled, "used_k(tenant) ≤ B"),
        Edge(Loc.NOT_ENTITLED, label="used_k(tenant) > B or B = 0"),
    ),
    (Loc.ENTITLED, K.ADMIT): (
        *_upper(Loc.ADMITTED),
        Edge(Loc.ADMITTED, _not_demoted, "basis ≠ demoted"),
        Edge(Loc.BAD, label="basis = demoted", detail=_detail),
    ),
    (Loc.NOT_ENTITLED, K.ADMIT): _upper(Loc.NOT_ENTITLED),
    (Loc.ENTITLED, K.REJECT): (Edge(Loc.BAD, detail=_detail),),
    (Loc.ENTITLED, K.DROP): (Edge(Loc.BAD, detail=_detail),),
}


def _context(inst: Instance) -> Mapping[str, Any]:
    ctx: dict[str, Any] = {"tenant": inst.tenant, "window": inst.window, "rank": inst.rank}
    ctx["credit_used"] = inst.used
    ctx.update(inst.vars.get("af_upper", {}))  # the upper side's count, when it was judged
    return ctx


AF = TimedAutomaton(
    name="AF",
    description="every floor-entitled request is admitted; floor credit admitted per window ≤ B",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.BAD, Loc.OVER}),
    transitions=TRANSITIONS,
    context=_context,
    shared=_shared,
)
