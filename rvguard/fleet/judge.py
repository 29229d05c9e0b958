"""AF judged on a fleet: several replicas' merged trace, in the order the shared credit pool decided.

Theory of operation
-------------------
One guard's AF monitor counts entitlement in trace order. Several replicas
spending one pool decide in the *pool's* order, which their merged trace
(ordered by time, each replica's clock its own) need not repeat: two
arrivals a microsecond apart on two replicas may reach Redis the other way
round. So the fleet is judged on two counts, per (tenant, window):

* **credits** — the floor credit admitted fleet-wide (``admit`` with basis
  ``floor``, weighed as the contract weighs the arrival, counted in its
  arrival's window) never exceeds B: the pool's guarantee, store up or down;
* **entitled admitted** — an arrival is floor-entitled by the pool's count
  when its ``arrive`` record carries it (``pool_arrived`` ≤ B: the window's
  arrival weight in pool order, this one included), else by the merged
  trace's order (a replica that decided alone on its static share, or no
  pool at all). An entitled arrival rejected (or dropped before admission)
  is a violation: ``floor-lowered`` refusals made while Redis was away are
  such violations, declared by their reason.

Pure: events in, `Violation` values out. Cost O(1) per event; memory
O(live requests + tenants × windows seen).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..contract import Contract, Entitlement
from ..events import Admit, Arrive, Basis, Drop, Event, Reject
from ..verdict import Violation

__all__ = ["FleetCredits", "FleetCreditsSummary"]

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class FleetCreditsSummary:
    """What the fleet spent: the most credit admitted in one (tenant, window), and over how many."""

    max_credits: dict[str, float]
    windows: int
    pooled_arrivals: int
    entitled_by_pool: int


class _Pending:
    __slots__ = ("arrive", "entitled", "k", "units")

    def __init__(self, arrive: Arrive, k: int, units: int, entitled: bool) -> None:
        self.arrive = arrive
        self.k = k
        self.units = units
        self.entitled = entitled


class FleetCredits:
    """Feed every event of a merged trace (see module doc); collect the violations it returns.

    Args:
        contract: the contract (its floors are the fleet's, not a replica's).
        origin: the window origin (default: the contract's epoch).
    """

    def __init__(self, contract: Contract, *, origin: float | None = None) -> None:
        self.contract = contract
        self._units = contract.credit_units()
        self._entitlement = Entitlement(contract, origin=origin)
        self._origin = contract.epoch if origin is None else origin
        self._floors = {n: self._units.floors[n] for n, t in contract.tenants.items() if t.floored}
        self._pending: dict[str, _Pending] = {}
        self._spent: dict[tuple[str, int], int] = {}
        self._pooled = 0
        self._by_pool = 0

    def feed(self, ev: Event) -> list[Violation]:
        """Take one event; the violations it reveals (none for most)."""
        if isinstance(ev, Arrive):
            self._arrive(ev)
            return []
        pending = self._pending.pop(ev.rid, None)
        if pending is None:
            return []
        if isinstance(ev, Admit):
            return self._admit(ev, pending)
        if isinstance(ev, Reject | Drop) and pending.entitled:
            why = f"floor-entitled request (by {self._how(pending)}) refused: {ev.reason or ev.kind.value}"
            return [self._violation(ev, pending, why)]
        return []

    def summary(self) -> FleetCreditsSummary:
        """The most credit admitted per tenant in one window, and counts."""
        scale = self._units.scale
        most: dict[str, float] = dict.fromkeys(self._floors, 0.0)
        for (tenant, _), units in self._spent.items():
            most[tenant] = max(most[tenant], units / scale)
        return FleetCreditsSummary(most, len(self._spent), self._pooled, self._by_pool)

    def _arrive(self, ev: Arrive) -> None:
        if ev.tenant not in self._floors:
            return
        units = self.contract.weight_units(ev.prompt_tokens, ev.max_tokens, self._units)
        k, entitled, _, _ = self._entitlement.arrive(ev.tenant, ev.t, units)
        pool = _pool_arrived(ev.extra)
        if pool is not None:
            self._pooled += 1
            floor = self._floors[ev.tenant] / self._units.scale
            entitled = pool <= floor * (1.0 + _EPS) + _EPS
            self._by_pool += entitled
        self._pending[ev.rid] = _Pending(ev, k, units, entitled)

    def _admit(self, ev: Admit, pending: _Pending) -> list[Violation]:
        if ev.basis is not Basis.FLOOR:
            return []
        key = (pending.arrive.tenant, pending.k)
        spent = self._spent[key] = self._spent.get(key, 0) + pending.units
        floor = self._floors[pending.arrive.tenant]
        if spent <= floor:
            return []
        scale = self._units.scale
        why = f"fleet floor credit in window {pending.k} reached {spent / scale:g} > B = {floor / scale:g}"
        return [self._violation(ev, pending, why)]

    def _how(self, pending: _Pending) -> str:
        return "the pool's order" if _pool_arrived(pending.arrive.extra) is not None else "trace order"

    def _violation(self, ev: Event, pending: _Pending, why: str) -> Violation:
        tenant = pending.arrive.tenant
        context = {"tenant": tenant, "window": pending.k, "judged_by": self._how(pending)}
        return Violation("AF", ev.rid, ev.t, (pending.arrive, ev), why, context)


def _pool_arrived(extra: Mapping[str, object]) -> float | None:
    value = extra.get("pool_arrived")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
