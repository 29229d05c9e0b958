"""One guard replica's own ledger of floor credit, for when the shared pool is away.

Theory of operation
-------------------
Several replicas spend one per-(tenant, window) pool of B credits kept in a
shared store (`rvguard.fleet.credits`). Each replica r also holds a *reserve*
R_r = its static share of B (ΣR_r ≤ B). The store keeps R_r out of what the
others may spend until r *confirms* window k: a call that says "I have had
an answer from this pool in k, so I spend nothing alone in k any more, and
here is all I spent alone". So r may spend alone in window k, up to R_r, as
long as it has had no answer from the pool in k: a call whose answer is lost
(a time-out: the store may still run it later, when a paused Redis resumes)
releases nothing. The fleet's total stays ≤ B in every window, whichever
replicas can reach the store (the proof is in docs/fleet.md).

This module is that rule, pure (no I/O, no clock): it takes window indices.

A replica spends alone only in windows its name lease covers (renewed at
each heartbeat): once it lapsed the others get its reserve; when it claims
the name again it *rejoins*, and the window it rejoins in counts as a start
window (below).

A replica that starts knows nothing of its previous life, which may have
spent its reserve alone in the window the new life starts in, and may have
confirmed the next one (the heartbeat confirms a window just before it
opens). So the new life spends nothing alone in its start window and the
next, and confirms nothing in its start window (its old reserve stays held
by the store, covering what its previous life spent).

Cost: O(1) per call; memory O(tenants × live windows), pruned to the last
three windows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LedgerCell", "ReplicaLedger"]

_KEEP = 3  # windows kept behind the newest one seen (a call may answer a window late)


@dataclass(slots=True)
class LedgerCell:
    """This replica's facts for one (tenant, window)."""

    known: bool = False  # an answer from the pool came back: nothing alone from now on
    confirmed: bool = False  # a confirming call was answered: the reserve is pooled
    static_spent: float = 0.0  # credit granted from the reserve while the store was away
    static_arrived: float = 0.0  # arrival weight decided statically
    arrived: float = 0.0  # every local arrival's weight (excess vs floor-lowered when static)


class ReplicaLedger:
    """What one replica may spend on its own, per tenant and window (see module doc).

    Args:
        reserves: per floored tenant, this replica's static share of B, in credits.
        floors: per floored tenant, the contract's B.
        start_window: the window the replica starts in: nothing alone there or in the next,
            nothing confirmed there or earlier.
    """

    __slots__ = ("_cells", "_floors", "_lease_last", "_newest", "_reserves", "_start")

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
        self._lease_last: float = math.inf  # no lease kept (a store without leases): no bound
        self._cells: dict[tuple[str, int], LedgerCell] = {}

    def cell(self, tenant: str, k: int) -> LedgerCell:
        """The cell of (tenant, window k), created on first use."""
        key = (tenant, k)
        cell = self._cells.get(key)
        if cell is None:
            cell = self._cells[key] = LedgerCell()
            if k > self._newest:
                self._newest = k
                self._prune()
        return cell

    def arrive(self, tenant: str, k: int, weight: float) -> float:
        """Count one local arrival of ``tenant`` in window k; its position (weight so far, it included)."""
        cell = self.cell(tenant, k)
        cell.arrived += weight
        return cell.arrived

    def sending(self, tenant: str, k: int) -> tuple[float, float, bool]:
        """A call for (tenant, k) is about to go out. Returns what it reports.

        Returns:
            ``(static_spent, static_arrived, confirm)``: what this replica spent
            and decided alone in window k so far (final once it confirms), and
            whether the call may confirm (release the reserve).
        """
        cell = self.cell(tenant, k)
        return cell.static_spent, cell.static_arrived, cell.known and k > self._start

    def answered(self, tenant: str, k: int, *, pooled: bool, confirmed: bool = False) -> None:
        """An answer came back: ``pooled`` when the pool decided (not fenced or refused as invalid)."""
        cell = self.cell(tenant, k)
        if pooled:
            cell.known = True
            cell.confirmed = cell.confirmed or confirmed

    def confirmed(self, tenant: str, k: int) -> bool:
        """True once a confirming call for (tenant, k) was answered: the reserve is pooled."""
        return self.cell(tenant, k).confirmed

    def leased(self, last: float) -> None:
        """The lease (as last renewed) covers windows up to ``last``: nothing alone after it."""
        self._lease_last = last

    def rejoined(self, k: int) -> None:
        """The name lease had lapsed and was claimed again in window k: k is a start window again."""
        self._start = max(self._start, k)

    def may_spend_alone(self, tenant: str, k: int) -> bool:
        """False once the pool answered in window k, in the start window and the next, past the lease."""
        return not self.cell(tenant, k).known and self._start + 1 < k <= self._lease_last

    def allowance(self, tenant: str, k: int) -> float:
        """Credit this replica may still spend on its own in window k."""
        if not self.may_spend_alone(tenant, k):
            return 0.0
        return self._reserves[tenant] - self.cell(tenant, k).static_spent

    def spend_static(self, tenant: str, k: int, weight: float, position: float | None = None) -> str:
        """Decide one arrival (already counted by `arrive`) from the reserve alone.

        Args:
            position: what `arrive` returned for it (default: every arrival so far): the
                arrivals decided concurrently are judged each at its own place.

        Returns:
            ``""`` when granted, else the refusal's reason: ``"excess"`` when
            this replica's own arrivals up to this one pass B (not entitled in
            any order), ``"floor-lowered"`` otherwise (perhaps entitled: declared).
        """
        cell = self.cell(tenant, k)
        cell.static_arrived += weight
        if (cell.arrived if position is None else position) > self._floors[tenant] + 1e-9:
            return "excess"
        if weight <= self.allowance(tenant, k) + 1e-9:
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
            assert cell.known or not cell.confirmed
