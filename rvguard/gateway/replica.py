"""One gateway as a replica of several: the shared floor-credit pool as the Guard sees it, and its series.

`GatewayPool` adapts `rvguard.fleet.credits.SharedCredits` to the Guard's
`CreditPool`: each arrival of a floored tenant spends there (one Redis script
run; the replica's static share while Redis is away), and the pool's answer
is written on the request's ``arrive`` record (``credit``: shared | static;
``pool_arrived``: the window's arrival weight in the pool's order) so the
merged traces are judged in the order the pool decided (`rvguard.fleet.judge`).

`register_fleet_series` exposes, read at scrape time:

* ``rvguard_route_siloed`` (1 while routing is siloed), ``rvguard_routes_total{mode}``
  (p2c | siloed | unroutable), ``rvguard_route_siloed_reasons_total{reason}``;
* per engine: ``rvguard_engine_up``, ``rvguard_engine_in_flight``, ``rvguard_engine_slots``,
  ``rvguard_engine_headroom``, ``rvguard_engine_routed_total``, ``rvguard_engine_failures_total``;
* ``rvguard_relocations_total``, ``rvguard_relocations_refused_total`` (no slot of k free),
  ``rvguard_relocating``;
* with a pool: ``rvguard_credit_store_up``, ``rvguard_credit_grants_total{mode}`` (shared | static),
  ``rvguard_credit_refusals_total{reason}`` (excess | floor-lowered), ``rvguard_credit_store_errors_total``,
  ``rvguard_credit_outages_total``, ``rvguard_credit_fenced_total``, ``rvguard_credit_invalid_total``
  (the pool held impossible values: forged or corrupt), ``rvguard_credit_pooling`` (0 while the
  replica refuses to pool: a store that may evict, a clock off the store's, a duplicate name).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..fleet.credits import SharedCredits
from .trace import TraceFile

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from .engines import EngineStatistics
    from .fleet import FleetDispatcher

__all__ = ["GatewayPool", "register_fleet_series"]


class GatewayPool:
    """The Guard's `CreditPool` over a `SharedCredits` (see module doc)."""

    def __init__(self, credits: SharedCredits, trace: TraceFile | None) -> None:
        self.credits = credits
        self._trace = trace

    def window(self, t: float) -> int:
        """The contract window holding ``t`` (the pool's origin)."""
        return self.credits.window(t)

    async def spend(self, rid: str, tenant: str, weight: float, now: float) -> tuple[int, str]:
        """Spend in the pool; note its answer on ``rid``'s arrive record."""
        decision = await self.credits.spend(tenant, weight, now)
        if self._trace is not None:
            self._trace.annotate(rid, decision.trace_fields())
        return decision.window, decision.reason


class _Series:
    """A Prometheus collector reading the fleet's state at scrape time."""

    def __init__(self, fleet: FleetDispatcher | None, credits: SharedCredits | None) -> None:
        self._fleet = fleet
        self._credits = credits

    def collect(self) -> Iterator[Any]:
        if self._fleet is not None:
            yield from self._routing(self._fleet)
        if self._credits is not None:
            yield from self._pool(self._credits)

    def _routing(self, fleet: FleetDispatcher) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        s = fleet.statistics()
        yield GaugeMetricFamily(
            "rvguard_route_siloed", "1 while routing is siloed", value=float(fleet.siloed)
        )
        routes = CounterMetricFamily("rvguard_routes", "Routing decisions by mode", labels=["mode"])
        for mode, n in (("p2c", s.p2c), ("siloed", s.siloed), ("unroutable", s.unroutable)):
            routes.add_metric([mode], float(n))
        yield routes
        why = CounterMetricFamily(
            "rvguard_route_siloed_reasons", "Siloed decisions by reason", labels=["reason"]
        )
        for reason, n in sorted(s.siloed_reasons.items()):
            why.add_metric([reason], float(n))
        yield why
        yield from self._engines(fleet)
        yield CounterMetricFamily(
            "rvguard_relocations", "Requests moved to another engine", value=s.relocated
        )
        yield CounterMetricFamily(
            "rvguard_relocations_refused",
            "Moves refused: k relocations under way",
            value=s.relocation_refused,
        )
        yield GaugeMetricFamily("rvguard_relocating", "Relocations under way", value=float(s.relocating))

    def _engines(self, fleet: FleetDispatcher) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        now = fleet.clock.now()
        stats = [e.statistics(now) for e in fleet.engines]
        gauges: dict[str, tuple[str, Callable[[EngineStatistics], float]]] = {
            "up": ("1 while the engine is in rotation", lambda e: float(e.alive)),
            "in_flight": ("This gateway's requests on the engine", lambda e: float(e.in_flight)),
            "slots": ("C_e: the most this gateway sends the engine at once", lambda e: float(e.slots)),
            "headroom": ("The engine's headroom as the router reads it", lambda e: e.headroom),
        }
        for name, (doc, read) in gauges.items():
            g = GaugeMetricFamily(f"rvguard_engine_{name}", doc, labels=["engine"])
            for e in stats:
                g.add_metric([e.name], read(e))
            yield g
        counters: dict[str, tuple[str, Callable[[EngineStatistics], float]]] = {
            "routed": ("Requests routed to the engine", lambda e: float(e.routed)),
            "failures": ("Transport failures and failed probes", lambda e: float(e.failures)),
        }
        for name, (doc, read) in counters.items():
            c = CounterMetricFamily(f"rvguard_engine_{name}", doc, labels=["engine"])
            for e in stats:
                c.add_metric([e.name], read(e))
            yield c

    def _pool(self, credits: SharedCredits) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        s = credits.statistics()
        yield GaugeMetricFamily(
            "rvguard_credit_store_up", "1 while floor credits are spent in the shared pool", value=float(s.up)
        )
        yield GaugeMetricFamily(
            "rvguard_credit_pooling", "0 while this replica refuses to pool", value=float(not s.refusal)
        )
        grants = CounterMetricFamily("rvguard_credit_grants", "Floor credits granted", labels=["mode"])
        grants.add_metric(["shared"], float(s.shared_grants))
        grants.add_metric(["static"], float(s.static_grants))
        yield grants
        refused = CounterMetricFamily("rvguard_credit_refusals", "Floor credit refused", labels=["reason"])
        refused.add_metric(["excess"], float(s.refused_excess))
        refused.add_metric(["floor-lowered"], float(s.refused_lowered))
        yield refused
        for name, doc, n in (
            ("store_errors", "Calls to the store that failed or timed out", s.store_errors),
            ("outages", "Times the replica fell back to its static share", s.outages),
            ("fenced", "Calls fenced by a store that lost its state", s.fenced),
            ("invalid", "Calls refused: the pool held impossible values", s.invalid),
        ):
            yield CounterMetricFamily(f"rvguard_credit_{name}", doc, value=float(n))


def register_fleet_series(
    registry: CollectorRegistry, fleet: FleetDispatcher | None, credits: SharedCredits | None
) -> None:
    """Expose the fleet's series (module doc) in ``registry``, when there is a fleet or a pool."""
    if fleet is not None or credits is not None:
        registry.register(_Series(fleet, credits))
