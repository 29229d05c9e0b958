"""Floor entitlement (DESIGN §1): which arrivals of a tenant are within its floor B in their window.

A module of its own (re-exported by `rvguard.contract`) so that the optional compiled build
(`rvguard._compiled`) compiles it: every arrival in the decision core and the online monitor
passes through `Entitlement.arrive`, and `rvguard.contract` (pydantic models) cannot be compiled.
"""

from __future__ import annotations

from typing import Protocol

from .exact import CreditUnits, window_index

__all__ = ["Entitlement", "WindowedFloors"]


class WindowedFloors(Protocol):
    """What entitlement reads of a contract (`rvguard.contract.Contract` is one): typed as a
    protocol so that this module, below the contract, imports nothing of it."""

    @property
    def epoch(self) -> float: ...

    @property
    def window(self) -> float: ...

    def credit_units(self) -> CreditUnits: ...


class Entitlement:
    """Floor entitlement per tenant per window, in arrival order.

    A request is floor-entitled when the cumulative credit of its tenant's
    arrivals in its window, itself included, stays within the floor B. With
    count credits that is "among the first B arrivals". Entitlement depends
    only on arrivals (never on decisions), so monitors and the enforcer agree.
    Credits are summed in whole units and windows found exactly at their
    edges (`rvguard.exact`): the decimals as written decide, not float sums.

    Cost: O(1) per arrival; memory O(tenants).
    """

    __slots__ = ("_floors", "_origin", "_state", "_units", "_window")

    def __init__(self, contract: WindowedFloors, *, origin: float | None = None) -> None:
        self._origin = contract.epoch if origin is None else origin
        self._window = contract.window
        self._units = contract.credit_units()
        self._floors = self._units.floors
        self._state: dict[str, tuple[int, int, int]] = {}

    @property
    def units(self) -> CreditUnits:
        """The credit unit the weights given to `arrive` are counted in."""
        return self._units

    def arrive(self, tenant: str, t: float, units: int = 1) -> tuple[int, bool, int, float]:
        """Account one arrival that spends ``units`` (`Contract.weight_units`; 1 with count credits).

        Returns:
            ``(window, entitled, rank, used)``: the window index, whether the
            request is entitled, its 1-based rank among the tenant's arrivals
            in the window, and the credit used by the window's arrivals so far
            (itself included; the float nearest the exact sum).
        """
        k = window_index(t, self._origin, self._window)
        prev = self._state.get(tenant)
        if prev is None or prev[0] != k:
            rank, used = 1, units
        else:
            rank, used = prev[2] + 1, prev[1] + units
        self._state[tenant] = (k, used, rank)
        floor = self._floors[tenant]
        return k, floor > 0 and used <= floor, rank, used / self._units.scale
