"""One guard replica's own ledger of floor credit, for when the shared pool is away.

Theory of operation
-------------------
Several replicas spend one per-(tenant, window) pool of B credits kept in a
shared store (`rvguard.fleet.credits`). Each replica r also holds a *reserve*
R_r = its static share of B (ΣR_r ≤ B). Until r *joins* the pool in window k,
the store keeps R_r out of what others may spend; once r joins, R_r is
pooled and r spends only through the store for the rest of k. So, when the
store goes away, r may spend statically in window k only if it never joined
k, and at most R_r: the fleet's total stays ≤ B in every window, whichever
replicas can reach the store (a proof sketch is in docs/fleet.md).

This module is that rule, pure (no I/O, no clock): it takes window indices.
A call to the store *may* join, so a call in flight, or one whose answer was
lost (a time-out: the store may still run it later), counts as joined; only
an answer that says it did not touch the pool (``fenced``) leaves the window
unjoined. Static spending before joining is reported on the next call, which
adds it to the pool (idempotently) as the reserve is released.

A replica that starts knows nothing of its previous life: every window up to
its start counts as joined, so it spends nothing statically there (its old
reserve stays held by the store, covering what its previous life spent).

Cost: O(1) per call; memory O(tenants × live windows), pruned to the last
three windows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LedgerCell", "ReplicaLedger"]

_KEEP = 3  # windows kept behind the newest one seen (a call may answer a window late)


@dataclass(slots=True)
class LedgerCell:
    """This replica's facts for one (tenant, window)."""

    pending: int = 0  # calls sent, not yet answered
    joined: bool = False  # an answered (or lost) call may have released the reserve
    static_spent: float = 0.0  # credit granted from the reserve while the store was away
    static_arrived: float = 0.0  # arrival weight decided statically
    arrived: float = 0.0  # every local arrival's weight (excess vs floor-lowered when static)


class ReplicaLedger:
    """What one replica may spend on its own, per tenant and window (see module doc).

    Args:
        reserves: per floored tenant, this replica's static share of B, in credits.
        floors: per floored tenant, the contract's B.
        start_window: the window the replica starts in; it and every earlier one count as joined.
    """

    __slots__ = ("_cells", "_floors", "_newest", "_reserves", "_start")

    def __init__(
        self, reserves: Mapping[str, float], floors: Mapping[str, float], *, start_window: int
    ) -> None:
        unknown = set(reserves) ^ set(floors)
        if unknown:
            raise ValueError(f"reserves and floors name different tenants: {sorted(unknown)}")
        for tenant, r in reserves.items():
            if not 0.0 <= r <= floors[tenant]:
                raise ValueError(f"reserve of {tenant!r} must lie in [0, B={floors[tenant]}], got {r!r}")
        self._reserves = dict(reserves)
        self._floors = dict(floors)
        self._start = start_window
        self._newest = start_window
        self._cells: dict[tuple[str, int], LedgerCell] = {}

    def cell(self, tenant: str, k: int) -> LedgerCell:
        """The cell of (tenant, window k), created on first use."""
        key = (tenant, k)
        cell = self._cells.get(key)
        if cell is None:
            cell = self._cells[key] = LedgerCell(joined=k <= self._start)
            if k > self._newest:
                self._newest = k
                self._prune()
        return cell

    def arrive(self, tenant: str, k: int, weight: float) -> None:
        """Count one local arrival of ``tenant`` in window k."""
        self.cell(tenant, k).arrived += weight

    def sending(self, tenant: str, k: int) -> tuple[float, float]:
        """A call for (tenant, k) is about to go out: it may join. Returns what to report.

        Returns:
            ``(static_spent, static_arrived)`` in window k so far, for the store to add.
        """
        cell = self.cell(tenant, k)
        cell.pending += 1
        return cell.static_spent, cell.static_arrived

    def answered(self, tenant: str, k: int, *, joined: bool | None) -> None:
        """The call's outcome: ``True`` joined, ``False`` untouched (fenced), ``None`` unknown."""
        cell = self.cell(tenant, k)
        cell.pending = max(cell.pending - 1, 0)
        if joined is None or joined:
            cell.joined = True

    def may_have_joined(self, tenant: str, k: int) -> bool:
        """True when this replica's reserve for (tenant, k) may already be pooled."""
        cell = self.cell(tenant, k)
        return cell.joined or cell.pending > 0

    def allowance(self, tenant: str, k: int) -> float:
        """Credit this replica may still spend on its own in window k."""
        if self.may_have_joined(tenant, k):
            return 0.0
        return self._reserves[tenant] - self.cell(tenant, k).static_spent

    def spend_static(self, tenant: str, k: int, weight: float) -> str:
        """Decide one arrival (already counted by `arrive`) from the reserve alone.

        Returns:
            ``""`` when granted, else the refusal's reason: ``"excess"`` when
            this replica's own arrivals already pass B (not entitled in any
            order), ``"floor-lowered"`` otherwise (perhaps entitled: declared).
        """
        cell = self.cell(tenant, k)
        cell.static_arrived += weight
        if cell.arrived > self._floors[tenant]:
            return "excess"
        if weight <= self.allowance(tenant, k):
            cell.static_spent += weight
            return ""
        return "floor-lowered"

    def _prune(self) -> None:
        old = [key for key in self._cells if key[1] < self._newest - _KEEP]
        for key in old:
            del self._cells[key]

    def _check(self) -> None:
        """Assert the ledger's invariants (tests call it)."""
        for (tenant, _), cell in self._cells.items():
            assert 0.0 <= cell.static_spent <= self._reserves[tenant]
            assert cell.static_spent <= cell.static_arrived <= cell.arrived + 1e-9
            assert cell.pending >= 0
