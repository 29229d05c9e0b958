"""The online assumption watch: the guard checks its own preconditions live.

SF is conditional on a service envelope (every service ≤ its ceiling) and on
capacity (at least B credits per window, A4). Neither is the guard's to
enforce, so it measures them: a completed service above the tenant's ceiling
raises a ``service`` alert at once; an estimated capacity (C slots over the
EWMA of observed services) below the floored demand Σ B / W for ``sustain``
consecutive windows raises a ``capacity`` alert. While either is firing the
watch reports ``floor_scale`` (``degrade``, when configured) so the core can
lower the floor; a ``clear`` alert restores it. Pure: time comes in as ``now``.

Cost: O(1) per observation, O(min(elapsed windows, sustain)) per tick;
memory O(1) (the last 1024 alerts are kept).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..contract import Contract, window_index

__all__ = ["Alert", "AssumptionWatch", "WatchConfig"]


@dataclass(frozen=True, slots=True)
class Alert:
    """An assumption stopped (or started again) holding.

    Attributes:
        t: when the watch noticed.
        kind: ``service`` (a service above its ceiling), ``capacity`` (estimated
            capacity below Σ B / W for ``sustain`` windows) or ``clear``.
        detail: one sentence a person can act on.
        value: the measured figure (seconds for service, credits/s for capacity).
        limit: the figure it was compared with.
    """

    t: float
    kind: str
    detail: str
    value: float = 0.0
    limit: float = 0.0


@dataclass(frozen=True, slots=True)
class WatchConfig:
    """How the watch reacts.

    Attributes:
        on_alert: hook called with every alert (the core also keeps them).
        sustain: windows of low capacity before firing, and quiet windows before clearing.
        alpha: EWMA weight of each observed service.
        degrade: while firing, each floor is multiplied by this (``None``: never lower it).
    """

    on_alert: Callable[[Alert], None] | None = None
    sustain: int = 3
    alpha: float = 0.2
    degrade: float | None = None

    def __post_init__(self) -> None:
        if self.sustain < 1:
            raise ValueError(f"sustain must be ≥ 1, got {self.sustain!r}")
        if not 0.0 < self.alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha!r}")
        if self.degrade is not None and not 0.0 <= self.degrade <= 1.0:
            raise ValueError(f"degrade must be in [0, 1], got {self.degrade!r}")


class AssumptionWatch:
    """Service-envelope and capacity watch over observed services (see module doc)."""

    __slots__ = (
        "_breach_k",
        "_cap_alerted",
        "_config",
        "_contract",
        "_demand",
        "_k",
        "_low",
        "_origin",
        "_service",
        "_weight",
        "alerts",
        "firing",
    )

    def __init__(self, contract: Contract, config: WatchConfig, *, origin: float) -> None:
        self._contract = contract
        self._config = config
        self._origin = origin
        self._demand = sum(t.floor for t in contract.floored_tenants.values()) / contract.window
        self._k: int | None = None
        self._low = 0
        self._breach_k: int | None = None
        self._service: float | None = None
        self._weight = 1.0
        self.firing = False
        self._cap_alerted = False
        self.alerts: deque[Alert] = deque(maxlen=1024)

    @property
    def floor_scale(self) -> float:
        """Factor applied to every floor now: ``degrade`` while firing, else 1."""
        if self.firing and self._config.degrade is not None:
            return self._config.degrade
        return 1.0

    @property
    def capacity(self) -> float | None:
        """Estimated capacity in credits per second (None before any service is seen)."""
        if self._service is None or self._service <= 0.0:
            return None
        return self._contract.slots * self._weight / self._service

    def observe_service(self, tenant: str, service: float, weight: float, now: float) -> None:
        """Account one completed service of ``tenant`` lasting ``service`` seconds."""
        self.tick(now)
        a = self._config.alpha
        self._service = service if self._service is None else (1 - a) * self._service + a * service
        self._weight = (1 - a) * self._weight + a * weight
        ceiling = self._contract.ceiling(tenant)
        if service > ceiling:
            self._breach_k = self._k
            self._raise(
                Alert(now, "service", f"{tenant} service {service:.4g}s above ceiling", service, ceiling)
            )

    def tick(self, now: float) -> None:
        """Close the windows that ``now`` has left behind and update ``firing``."""
        k = window_index(now, self._origin, self._contract.window)
        if self._k is None:
            self._k = k
            return
        for _ in range(min(k - self._k, self._config.sustain + 1)):
            cap = self.capacity
            self._low = self._low + 1 if cap is not None and cap < self._demand else 0
        self._k = k
        self._update(now)

    def _update(self, now: float) -> None:
        sustain = self._config.sustain
        assert self._k is not None
        service_hot = self._breach_k is not None and self._k - self._breach_k < sustain
        capacity_low = self._low >= sustain
        if capacity_low and not self._cap_alerted:
            self._cap_alerted = True
            cap = self.capacity or 0.0
            self._raise(Alert(now, "capacity", f"capacity {cap:.4g}/s below floor demand", cap, self._demand))
        if self.firing and not (service_hot or capacity_low):
            self.firing = False
            self._cap_alerted = False
            self._emit(Alert(now, "clear", "assumptions hold again; floor restored"))

    def _raise(self, alert: Alert) -> None:
        self.firing = True
        self._emit(alert)

    def _emit(self, alert: Alert) -> None:
        self.alerts.append(alert)
        if self._config.on_alert is not None:
            self._config.on_alert(alert)
