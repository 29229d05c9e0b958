"""The assumption watch's half of the decision core: alerts as trace records, the floor it lowers.

`rvguard.enforce.core.DecisionCore` owns one `AssumptionWatch` when it is given a `WatchConfig`
(the `Guard`, the gateway and the simulator give it one by default). This mixin is what the core
does with it:

* `drain_alerts` hands over the alerts raised since the last call as ``alert`` trace records
  (`rvguard.watch_events.Watch`); the runtime writes them after the events of the same step, so
  a trace says, at the time, which precondition broke (DESIGN §12);
* ``_floor_room`` judges a floor admission against the floor in force: the contract's, or, while
  the watch fires with ``degrade``, the lowered one — recorded as the alert's ``floor_scale``;
* ``_backlog`` keeps Q_A (admitted work of floored tenants, not yet ended) for the watch;
* `floor_used` reads the one ledger of floor credit admitted per tenant and window (written by the
  core's floor admissions and `resume`): the gateway's rate-limit headers and its
  ``rvguard_floor_credits_used`` gauge read it (`FloorLedger`), so no one keeps a second count.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol

from ..contract import Contract, Entitlement
from ..exact import window_index
from ..facts import FactsCache
from ..watch_events import FLOOR_REFUSED, Watch
from .relief import ReliefMixin
from .watch import Alert, AssumptionWatch

__all__ = ["FLOOR_REFUSED", "FloorLedger", "PriorArrival", "WatchMixin", "floor_refusal"]

#: A pool's own lowering (its store away, other replicas' reserves held) traced apart from the
#: watch's declared lowering, which ``floor-lowered`` alone names in ``floor_refused`` (attribution).
_POOL_WHY: dict[str, str] = {"floor-lowered": "pool-lowered"}


def floor_refusal(pool: str | None) -> str:
    """Why an entitled request's floor was refused (its ``floor_refused``): the pool's reason (a
    pool's own lowering as ``pool-lowered``), else the watch's declared lowering, ``floor-lowered``."""
    return _POOL_WHY.get(pool, pool) if pool else "floor-lowered"


#: a previous run's arrival, for `WatchMixin.resume`: tenant, t, prompt and max tokens, on the floor
PriorArrival = tuple[str, float, int | None, int | None, bool]


class FloorLedger(Protocol):
    """What a reader of the floor credits used may ask (`DecisionCore` is one): read-only."""

    def floor_used(self, tenant: str, now: float) -> float:
        """Floor credits ``tenant`` was admitted on in the window holding ``now``."""
        ...


class _Core(Protocol):
    """The core as the mixin sees it."""

    contract: Contract
    _watch: AssumptionWatch | None
    _entitlement: Entitlement
    _floor_used: dict[str, tuple[int, int]]
    _origin: float
    facts: FactsCache

    def _floor_scale(self) -> float: ...

    def _spent_on_floor(self, tenant: str, k: int) -> int: ...

    def _spend_floor(self, tenant: str, k: int, units: int) -> None: ...


class WatchMixin(ReliefMixin):
    """The watch half of `DecisionCore` (module doc)."""

    _watch: AssumptionWatch | None

    @property
    def alerts(self: _Core) -> tuple[Alert, ...]:
        """Alerts the assumption watch has raised (the last 1024)."""
        return () if self._watch is None else tuple(self._watch.alerts)

    def drain_alerts(self: _Core) -> list[Watch]:
        """The ``alert`` records raised since the last call, oldest first (none without a watch)."""
        return [] if self._watch is None else self._watch.drain()

    def resume(self: _Core, now: float, arrivals: Iterable[PriorArrival]) -> int:
        """Count a previous run's arrivals that fall in ``now``'s window, in their order, as if this
        core had seen them: a guard restarted inside a window must not grant that window's floor a
        second time (entitlement and the floor admitted so far both go on). Returns how many it counted.

        Each arrival is ``(tenant, t, prompt_tokens, max_tokens, admitted on the floor)``; tenants the
        contract no longer names are skipped.
        """
        k = window_index(now, self._origin, self.contract.window)
        counted = 0
        for tenant, t, prompt, most, on_floor in arrivals:
            if (
                tenant not in self.contract.tenants
                or window_index(t, self._origin, self.contract.window) != k
            ):
                continue
            units = self.facts(tenant, prompt, most).weight_units
            self._entitlement.arrive(tenant, t, units)
            if on_floor:
                self._spend_floor(tenant, k, units)
            counted += 1
        return counted

    def floor_used(self: _Core, tenant: str, now: float) -> float:
        """Floor credits ``tenant`` was admitted on in the window holding ``now`` (0 in a window it
        has not spent in yet): the core's own ledger, the float nearest its exact sum of units."""
        used = self._spent_on_floor(tenant, window_index(now, self._origin, self.contract.window))
        return self._entitlement.units.credits(used)

    def _spent_on_floor(self: _Core, tenant: str, k: int) -> int:
        """Floor credit units ``tenant`` was admitted on in window ``k``: the one ledger, read
        (admission, the rate-limit headers and the metrics all read it here)."""
        prev = self._floor_used.get(tenant)
        return 0 if prev is None or prev[0] != k else prev[1]

    def _spend_floor(self: _Core, tenant: str, k: int, units: int) -> None:
        """Count ``units`` more floor credit for ``tenant`` in window ``k``: the one ledger, written
        (a floor admission, and `resume`'s prior admissions)."""
        self._floor_used[tenant] = (k, self._spent_on_floor(tenant, k) + units)

    def observe_arrival_gap(self: _Core, gap: float, now: float) -> None:
        """The runtime saw a request ``gap`` seconds after its first byte (the watch judges it)."""
        if self._watch is not None:
            self._watch.arrival_gap(gap, now)

    def _backlog(self: _Core, floored: bool, delta: int, now: float) -> None:
        """Q_A moved by ``delta`` (admitted or ended work of a floored tenant)."""
        if floored and self._watch is not None:
            self._watch.backlog(delta, now)

    def _floor_scale(self: _Core) -> float:
        return 1.0 if self._watch is None else self._watch.floor_scale

    def _floor_room(self: _Core, tenant: str, k: int, units: int) -> bool:
        """Whether ``units`` more credit fits the floor (lowered while the watch degrades it)."""
        floor = float(self._entitlement.units.floors[tenant])  # a float throughout (mypyc: one type)
        scale = self._floor_scale()
        if scale != 1.0:
            floor = floor * scale
            if self.contract.credit.value == "count":
                floor = float(math.floor(floor))
        return self._spent_on_floor(tenant, k) + units <= floor
