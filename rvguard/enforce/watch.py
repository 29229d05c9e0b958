"""The online assumption watch: the guard checks its own preconditions live (DESIGN §12).

SF is conditional on a service envelope (every service ≤ its ceiling), on
capacity (at least B credits per window, A4) and on the assured backlog not
piling up (Q_A ≤ Σ B, and within what the deadline covers). None is the
guard's to enforce, so it measures them: a completed service above the
tenant's ceiling raises a ``service`` alert at once; an estimated capacity
(C slots over the EWMA of observed services) below the floored demand
Σ B / W for ``sustain`` consecutive windows raises a ``capacity`` alert;
admitted assured work past Σ B, or past what the deadline covers
(`Contract.backlog_bound`), raises ``backlog``. A service below its lower
bound L(R) (DR's assumption, not SF's) raises ``service-low`` without
firing. While a condition of SF fires the watch reports ``floor_scale``
(``degrade``, when configured) so the core can lower the floor; a ``clear``
alert restores it. Each alert is also kept as a trace record
(`rvguard.watch_events.Watch`) until the core drains it into its
output. Pure: time comes in as ``now``.

Cost: O(1) per observation, O(min(elapsed windows, sustain)) per tick;
memory O(1) (the last 1024 alerts are kept).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..contract import Contract, window_index
from ..exact import EDGE_TOLERANCE
from ..watch_events import ARRIVAL_GAP, BACKLOG, CAPACITY, CLEAR, SERVICE, SERVICE_LOW, Watch

__all__ = ["DEFAULT_WATCH", "Alert", "AssumptionWatch", "WatchConfig"]


@dataclass(frozen=True, slots=True)
class Alert:
    """An assumption stopped (or started again) holding.

    Attributes:
        t: when the watch noticed.
        kind: the condition (`rvguard.watch_events.CONDITIONS`): ``service`` (a service above
            its ceiling), ``service-low`` (below L), ``capacity`` (estimated capacity below
            Σ B / W for ``sustain`` windows), ``backlog`` (Q_A > `Contract.backlog_bound`), or ``clear``.
        detail: one sentence a person can act on.
        value: the measured figure (seconds for service, credits/s for capacity, requests for backlog).
        limit: the figure it was compared with.
        since: when the condition began (``None``: at ``t``).
    """

    t: float
    kind: str
    detail: str
    value: float = 0.0
    limit: float = 0.0
    since: float | None = None

    def record(self, floor_scale: float | None = None) -> Watch:
        """The alert as its trace record (``floor_scale``: the floor factor it sets, when any)."""
        since = self.t if self.since is None else min(self.since, self.t)
        return Watch(self.t, self.kind, self.value, self.limit, since, floor_scale)


@dataclass(frozen=True, slots=True)
class WatchConfig:
    """How the watch reacts.

    Attributes:
        on_alert: hook called with every alert (the core also keeps them).
        sustain: windows of low capacity before firing, and quiet windows before clearing.
        alpha: EWMA weight of each observed service.
        arrival_gap: seconds a request may wait between its first byte and the gateway's handler
            before an ``arrival-gap`` alert (a starved event loop, a full accept queue).
        degrade: while firing, each floor is multiplied by this (``None``: the contract's
            ``degrade``, and when that is ``None`` too the floor is never lowered).
    """

    on_alert: Callable[[Alert], None] | None = None
    sustain: int = 3
    alpha: float = 0.2
    degrade: float | None = None
    arrival_gap: float = 0.05

    def __post_init__(self) -> None:
        if self.sustain < 1:
            raise ValueError(f"sustain must be ≥ 1, got {self.sustain!r}")
        if not 0.0 < self.alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha!r}")
        if self.degrade is not None and not 0.0 <= self.degrade <= 1.0:
            raise ValueError(f"degrade must be in [0, 1], got {self.degrade!r}")


#: the watch the Guard, the gateway and the simulator run unless told otherwise (``watch=None``):
#: alerts only, the floor never lowered (lowering it is the operator's declared choice, ``degrade``)
DEFAULT_WATCH = WatchConfig()


class AssumptionWatch:
    """Service-envelope and capacity watch over observed services (see module doc)."""

    __slots__ = (
        "_backlog",
        "_backlog_alerted",
        "_bound",
        "_breach_k",
        "_cap_alerted",
        "_ceilings",
        "_config",
        "_contract",
        "_degrade",
        "_demand",
        "_fired_at",
        "_inside",
        "_k",
        "_low",
        "_low_k",
        "_low_since",
        "_origin",
        "_service",
        "_weight",
        "alerts",
        "firing",
        "records",
    )

    def __init__(self, contract: Contract, config: WatchConfig, *, origin: float) -> None:
        self._contract = contract
        self._config = config
        self._origin = origin
        #: the floor factor while firing: the config's, else the contract's declared ``degrade``
        self._degrade = config.degrade if config.degrade is not None else contract.degrade
        self._demand = sum(t.floor for t in contract.floored_tenants.values()) / contract.window
        self._bound = contract.backlog_bound()
        self._ceilings = {name: contract.ceiling(name) for name in contract.tenants}  # read every completion
        self._backlog = 0
        self._backlog_alerted = False
        self._low_since: float | None = None
        self._low_k: int | None = None
        self._fired_at = 0.0
        self._k: int | None = None
        #: times surely inside window ``_k``, away from its edges (`_interior`): a tick there changes nothing
        self._inside = (float("inf"), float("-inf"))
        self._low = 0
        self._breach_k: int | None = None
        self._service: float | None = None
        self._weight = 1.0
        self.firing = False
        self._cap_alerted = False
        self.alerts: deque[Alert] = deque(maxlen=1024)
        #: the alerts as trace records, until the core drains them (`drain`)
        self.records: list[Watch] = []

    @property
    def floor_scale(self) -> float:
        """Factor applied to every floor now: ``degrade`` while firing, else 1."""
        if self.firing and self._degrade is not None:
            return self._degrade
        return 1.0

    @property
    def capacity(self) -> float | None:
        """Estimated capacity in credits per second (None before any service is seen)."""
        if self._service is None or self._service <= 0.0:
            return None
        return self._contract.slots * self._weight / self._service

    def drain(self) -> list[Watch]:
        """The trace records of the alerts raised since the last drain (the core emits them)."""
        out, self.records = self.records, []
        return out

    def observe_service(
        self, tenant: str, service: float, weight: float, now: float, lower: float = 0.0
    ) -> None:
        """Account one completed service of ``tenant`` lasting ``service`` seconds (L(R) = ``lower``)."""
        self.tick(now)
        a = self._config.alpha
        self._service = service if self._service is None else (1 - a) * self._service + a * service
        self._weight = (1 - a) * self._weight + a * weight
        ceiling = self._ceilings[tenant]
        start = now - service
        if service > ceiling:
            self._breach_k = self._k
            detail = f"{tenant} service {service:.4g}s above ceiling"
            self._raise(Alert(now, SERVICE, detail, service, ceiling, start + ceiling))
        elif service < lower and self._low_k != self._k:  # said once a window: DR's, not SF's
            self._low_k = self._k
            detail = f"{tenant} service {service:.4g}s below its lower bound L"
            self._emit(Alert(now, SERVICE_LOW, detail, service, lower, start))

    def arrival_gap(self, gap: float, now: float) -> None:
        """A request waited ``gap`` seconds before the gateway handled it (above the bound: alert)."""
        self.tick(now)
        bound = self._config.arrival_gap
        if gap > bound:
            self._breach_k = self._k
            detail = f"a request waited {gap:.4g}s before the gateway handled it"
            self._raise(Alert(now, ARRIVAL_GAP, detail, gap, bound, now - gap))

    def backlog(self, delta: int, now: float) -> None:
        """Admitted assured work (Q_A) changed by ``delta``; above the bound raises a ``backlog`` alert."""
        self._backlog += delta
        if self._backlog > self._bound and not self._backlog_alerted:
            self._backlog_alerted = True
            detail = (
                f"assured backlog {self._backlog} above {self._bound:g} (Σ B, or what the deadline covers)"
            )
            self._raise(Alert(now, BACKLOG, detail, float(self._backlog), float(self._bound)))
        elif self._backlog <= self._bound and self._backlog_alerted:
            self._backlog_alerted = False
            self._update(now)

    def tick(self, now: float) -> None:
        """Close the windows that ``now`` has left behind and update ``firing`` (nothing to do while
        ``now`` stays inside the window of the last tick: what `_update` reads changes with the window
        only, or is updated where it changes; the core ticks on every step)."""
        lo, hi = self._inside
        if lo <= now <= hi:
            return
        k = window_index(now, self._origin, self._contract.window)
        self._inside = _interior(k, self._origin, self._contract.window)
        if self._k is None:
            self._k = k
            return
        if k == self._k:
            return
        for i in range(min(k - self._k, self._config.sustain + 1)):
            cap = self.capacity
            self._low = self._low + 1 if cap is not None and cap < self._demand else 0
            if self._low == 1:
                self._low_since = self._origin + (self._k + i) * self._contract.window
        self._k = k
        self._update(now)

    def _update(self, now: float) -> None:
        sustain = self._config.sustain
        k = self._k if self._k is not None else window_index(now, self._origin, self._contract.window)
        service_hot = self._breach_k is not None and k - self._breach_k < sustain
        capacity_low = self._low >= sustain
        if capacity_low and not self._cap_alerted:
            self._cap_alerted = True
            cap = self.capacity or 0.0
            detail = f"capacity {cap:.4g}/s below floor demand"
            self._raise(Alert(now, CAPACITY, detail, cap, self._demand, self._low_since))
        if self.firing and not (service_hot or capacity_low or self._backlog_alerted):
            self.firing = False
            self._cap_alerted = False
            self._emit(Alert(now, CLEAR, "assumptions hold again; floor restored", since=self._fired_at))

    def _raise(self, alert: Alert) -> None:
        if not self.firing:
            self._fired_at = alert.t if alert.since is None else min(alert.since, alert.t)
        self.firing = True
        self._emit(alert)

    def _emit(self, alert: Alert) -> None:
        self.alerts.append(alert)
        degrade = self._config.degrade
        scale = (
            None
            if degrade is None or alert.kind == SERVICE_LOW
            else (1.0 if alert.kind == CLEAR else degrade)
        )
        self.records.append(alert.record(scale))
        if self._config.on_alert is not None:
            self._config.on_alert(alert)


def _interior(k: int, origin: float, window: float) -> tuple[float, float]:
    """Times that `window_index` surely puts in window k: its span less a margin at each edge, 16
    times the width within which `window_index` decides exactly (so a float here is never a time
    that an exact decision would put in another window)."""
    start, end = origin + k * window, origin + (k + 1) * window
    margin = 16 * EDGE_TOLERANCE * (window + abs(start) + abs(end) + abs(origin))
    return start + margin, end - margin
