"""Prometheus metrics for the gateway, fed by the Guard's own events (a `Sink`).

The sink sees exactly the events that go into the trace, so ``/metrics`` and
``rvguard check`` never disagree about what happened. Events other than
``arrive`` carry no tenant, so the sink keeps rid → (tenant, basis) for live
requests only (memory O(live requests)); O(1) per event.

Series (all under one `CollectorRegistry` per gateway):

* ``rvguard_admitted_total{tenant,basis}``, ``rvguard_rejected_total{tenant,reason}``,
  ``rvguard_dropped_total{tenant,basis}``, ``rvguard_failed_total{tenant,basis}``,
  ``rvguard_completed_total{tenant,basis}``;
* ``rvguard_floor_credits_used{tenant}`` (in the current window) and
  ``rvguard_floor_credits{tenant}`` (B), ``rvguard_window_index``;
* ``rvguard_in_flight``, ``rvguard_queue_depth``, ``rvguard_floor_scale``,
  ``rvguard_watch_alerts`` (read from the core at scrape time);
* ``rvguard_sojourn_seconds{tenant}``: arrival → completion of floored tenants' requests;
* ``rvguard_unauthenticated_total``: credentials that bound to no tenant or a fallback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..contract import Contract
from ..events import Admit, Arrive, Basis, Complete, Drop, Event, Fail, Reject

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..enforce.core import DecisionCore
    from ..enforce.guard import Guard

__all__ = ["MetricsSink"]

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)


class MetricsSink:
    """A Guard sink that keeps Prometheus series (see module doc).

    Args:
        contract: tenants, floors and windows.
        registry: where the series live (a fresh one per gateway keeps tests apart).
    """

    def __init__(self, contract: Contract, registry: CollectorRegistry) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self._contract = contract
        self.registry = registry
        r = registry
        self.admitted = Counter("rvguard_admitted", "Admitted requests", ["tenant", "basis"], registry=r)
        self.rejected = Counter("rvguard_rejected", "Rejected requests", ["tenant", "reason"], registry=r)
        self.dropped = Counter("rvguard_dropped", "Doomed drops", ["tenant", "basis"], registry=r)
        self.failed = Counter("rvguard_failed", "Failed requests", ["tenant", "basis"], registry=r)
        self.completed = Counter("rvguard_completed", "Completed requests", ["tenant", "basis"], registry=r)
        self.unauthenticated = Counter(
            "rvguard_unauthenticated", "Requests whose credentials bound no floored tenant", registry=r
        )
        self.credits_used = Gauge(
            "rvguard_floor_credits_used", "Floor credits used in the current window", ["tenant"], registry=r
        )
        self.credits = Gauge("rvguard_floor_credits", "Floor credits per window (B)", ["tenant"], registry=r)
        self.window = Gauge("rvguard_window_index", "Index of the current contract window", registry=r)
        self.sojourn = Histogram(
            "rvguard_sojourn_seconds",
            "Arrival to completion of floored tenants' requests",
            ["tenant"],
            buckets=_BUCKETS,
            registry=r,
        )
        for name, tenant in contract.tenants.items():
            self.credits.labels(name).set(tenant.floor)
            self.credits_used.labels(name).set(0)
        self._live: dict[str, tuple[str, float, str, float]] = {}  # rid → (tenant, t, basis, weight)
        self._used: dict[str, float] = {}
        self._k: int | None = None

    def watch_core(self, core: DecisionCore) -> None:
        """Expose the core's live gauges (read at scrape time, never stale)."""
        from prometheus_client import Gauge

        r = self.registry
        Gauge("rvguard_in_flight", "Requests holding a slot", registry=r).set_function(lambda: core.in_flight)
        Gauge("rvguard_queue_depth", "Admitted requests waiting", registry=r).set_function(
            lambda: core.queue_depth
        )
        Gauge("rvguard_floor_scale", "Floor scale set by the watch", registry=r).set_function(
            lambda: core.statistics().floor_scale
        )
        Gauge("rvguard_watch_alerts", "Assumption-watch alerts raised", registry=r).set_function(
            lambda: len(core.alerts)
        )
        Gauge(
            "rvguard_uncertain_dispatches",
            "Dispatches the U gate could not call sure (U unknown)",
            registry=r,
        ).set_function(lambda: core.statistics().uncertain)

    def watch_guard(self, guard: Guard) -> None:
        """The core's gauges (`watch_core`) and the Guard's sink failures."""
        from prometheus_client import Gauge

        self.watch_core(guard.core)
        Gauge(
            "rvguard_sink_errors",
            "Events a sink (trace file, metrics) failed to take",
            registry=self.registry,
        ).set_function(lambda: guard.statistics().sink_errors)

    def __call__(self, event: Event) -> None:
        """Count ``event``."""
        self._roll(event.t)
        if isinstance(event, Arrive):
            w = self._contract.weight(event.prompt_tokens, event.max_tokens)
            self._live[event.rid] = (event.tenant, event.t, "", w)
            return
        tenant, t0, basis, w = self._live.get(event.rid, ("unknown", event.t, "", 0.0))
        if isinstance(event, Admit):
            self._live[event.rid] = (tenant, t0, event.basis.value, w)
            self.admitted.labels(tenant, event.basis.value).inc()
            if event.basis is Basis.FLOOR:
                self._used[tenant] = self._used.get(tenant, 0.0) + w
                self.credits_used.labels(tenant).set(self._used[tenant])
        elif isinstance(event, Reject):
            self._live.pop(event.rid, None)
            self.rejected.labels(tenant, event.reason or "unknown").inc()
        elif isinstance(event, Complete | Drop | Fail):
            self._live.pop(event.rid, None)
            self._terminal(event, tenant, basis, event.t - t0)

    def _terminal(self, event: Complete | Drop | Fail, tenant: str, basis: str, sojourn: float) -> None:
        if isinstance(event, Complete):
            self.completed.labels(tenant, basis).inc()
            if tenant in self._contract.tenants and self._contract.tenants[tenant].floored:
                self.sojourn.labels(tenant).observe(sojourn)
        elif isinstance(event, Drop):
            self.dropped.labels(tenant, basis).inc()
        else:
            self.failed.labels(tenant, basis).inc()

    def _roll(self, t: float) -> None:
        """A new window: every tenant's used credits start again from 0."""
        k = self._contract.window_index(t)
        if k == self._k:
            return
        self._k = k
        self.window.set(k)
        self._used.clear()
        for name in self._contract.tenants:
            self.credits_used.labels(name).set(0)
