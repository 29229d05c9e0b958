"""Prometheus metrics for the gateway: the Guard's own events (a `Sink`) and the upstream's answers.

The sink sees exactly the events that go into the trace, so ``/metrics`` and
``rvguard check`` never disagree about what happened. Events other than
``arrive`` carry no tenant, so the sink keeps rid → facts for live requests
only (memory O(live requests)); O(1) per event. Names follow Prometheus
conventions (base units, counters end in ``_total``) and vLLM's where they
overlap (``time_to_first_token_seconds``, ``prompt_tokens_total``,
``generation_tokens_total``; vLLM's ``model_name`` label is ``model`` here).

From the Guard's events (labels ``tenant``; ``basis`` floor|surplus|demoted):

* ``rvguard_admitted_total{tenant,basis}``, ``rvguard_rejected_total{tenant,reason}``,
  ``rvguard_completed_total``, ``rvguard_dropped_total``, ``rvguard_failed_total`` (service
  failures) and ``rvguard_client_errors_total`` (requests the upstream refused as the client's
  mistake: not the service's failures, counted apart), all ``{tenant,basis}``;
* ``rvguard_deadline_met_total`` / ``rvguard_deadline_missed_total{tenant,basis}``: each admitted
  request judged once at its end (a completion by its deadline is met; a late one, a drop or a
  service failure is missed; a client error is neither);
* ``rvguard_floor_entitled_total`` / ``rvguard_floor_attained_total{tenant}`` and
  ``rvguard_floor_attainment{tenant}`` (attained / entitled since start): floor-admitted requests
  that ended, and those of them on time; ``rvguard_floor_refused_total{tenant,reason}``: a floored
  tenant's requests rejected (429);
* ``rvguard_sojourn_seconds{tenant}``: arrival → completion, with a bucket at each tenant's deadline;
* ``rvguard_floor_credits{tenant}`` (B), ``rvguard_window_index``; and, read at scrape time from
  the decision core's own ledger (`watch_ledger`: the count admission and the rate-limit headers
  read), ``rvguard_floor_credits_used{tenant}`` (this window).

From the answers (`observe_answer`; label ``model`` as the upstream names it):
``rvguard_time_to_first_token_seconds{tenant,model}``, ``rvguard_upstream_latency_seconds{tenant,model}``
(dispatch → last byte, measured by the gateway), ``rvguard_prompt_tokens_total{tenant,model}``,
``rvguard_generation_tokens_total{tenant,model}``.

Node headroom (DESIGN §10), from the Guard's ``sample``, ``demote`` and ``evict`` events:
``rvguard_headroom{resource}`` (the last fresh sample's raw headroom fraction),
``rvguard_demotions_total{resource}`` (surplus requests held back by the redline, by the deciding
resource), ``rvguard_restores_total{resource}``, ``rvguard_evictions_total{reason}``; read at scrape
time, ``rvguard_headroom_sample_age_seconds{resource}`` (seconds on the Guard's clock since that
resource's last fresh sample: telemetry that stops arriving shows here),
``rvguard_redline_firing`` (1 while it fires), ``rvguard_headroom_errors_total`` (failed reads),
and the slots
``rvguard_slots`` (C), ``rvguard_reserve_slots`` (R) and ``rvguard_reserve_occupied`` (slots of the
reserve held now: in flight beyond C − R).

Read at scrape time (`watch_guard`): ``rvguard_in_flight``, ``rvguard_queue_depth``,
``rvguard_floor_scale``, and the counters ``rvguard_watch_alerts_total`` (by condition, from the
trace's ``alert`` records: ``rvguard_precondition_alerts_total{condition}``),
``rvguard_uncertain_dispatches_total``, ``rvguard_sink_errors_total``,
``rvguard_learner_timeouts_total`` (answers past ``learner_timeout``),
``rvguard_loop_stalls_total`` (event-loop stalls, each a ``stall`` trace record: `rvguard.enforce.stall`),
``rvguard_eviction_deadline_warnings_total`` (emergency-eviction plans whose k-bounded, serialized
relief cannot land before the node's deadline: `rvguard.enforce.emergency`). The gateway adds
``rvguard_unauthenticated_total``, ``rvguard_invalid_requests_total{code}`` (refused at the
edge, before admission), ``rvguard_upstream_up`` and ``rvguard_trace_failing`` (and, from
`rvguard.gateway.outlier`, ``rvguard_upstream_ejected{engine}``, ``rvguard_upstream_ejections_total``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..contract import Contract
from ..events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Demote,
    Drop,
    Event,
    Evict,
    Fail,
    Reject,
    Restore,
    Sample,
    Watch,
    is_client_error,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..clock import Clock
    from ..enforce.core import DecisionCore
    from ..enforce.dispatchers import Response
    from ..enforce.guard import Guard
    from ..enforce.watching import FloorLedger

__all__ = ["MetricsSink"]

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
#: vLLM's time-to-first-token buckets (up to 10 s) and latency buckets
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)


class _Live:
    """What the sink keeps of a live request."""

    __slots__ = ("basis", "deadline", "t", "tenant")

    def __init__(self, tenant: str, t: float, deadline: float) -> None:
        self.tenant = tenant
        self.t = t
        self.deadline = deadline
        self.basis = ""


def _counter(registry: CollectorRegistry, name: str, doc: str, labels: list[str]) -> Any:
    """A Prometheus counter (exposed as ``<name>_total``)."""
    from prometheus_client import Counter

    return Counter(name, doc, labels, registry=registry)


def _reader(ledger: FloorLedger, clock: Clock, tenant: str) -> Callable[[], float]:
    """Read ``tenant``'s floor credits used in the window holding ``clock.now()``."""
    return lambda: ledger.floor_used(tenant, clock.now())


class _LiveCounters:
    """Counters whose values live elsewhere (the core, the Guard), read at scrape time."""

    def __init__(self, series: Mapping[str, tuple[str, Callable[[], float]]]) -> None:
        self._series = series

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily

        for name, (doc, read) in self._series.items():
            yield CounterMetricFamily(name, doc, value=read())


class _SampleAges:
    """``rvguard_headroom_sample_age_seconds{resource}``, computed at scrape time."""

    def __init__(self, sink: MetricsSink, clock: Clock) -> None:
        self._sink = sink
        self._clock = clock

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        fam = GaugeMetricFamily(
            "rvguard_headroom_sample_age_seconds",
            "Seconds since the resource's last fresh headroom sample",
            labels=["resource"],
        )
        for resource, age in sorted(self._sink.sample_ages(self._clock.now()).items()):
            fam.add_metric([resource], age)
        yield fam


class MetricsSink:
    """A Guard sink that keeps Prometheus series (see module doc).

    Args:
        contract: tenants, floors, deadlines and windows.
        registry: where the series live (a fresh one per gateway keeps tests apart).
    """

    def __init__(self, contract: Contract, registry: CollectorRegistry) -> None:
        from prometheus_client import Gauge

        self._contract = contract
        self.registry = r = registry
        self._outcome_series()
        self._floor_series()
        self._answer_series()
        self._headroom_series()
        self.unauthenticated = _counter(
            r, "rvguard_unauthenticated", "Requests whose credentials bound no tenant or a fallback", []
        )
        self.invalid = _counter(
            r, "rvguard_invalid_requests", "Requests refused at the edge before admission", ["code"]
        )
        self.window = Gauge("rvguard_window_index", "Index of the current contract window", registry=r)
        self.upstream_up = Gauge(
            "rvguard_upstream_up", "1 when the last upstream probe succeeded", registry=r
        )
        self.trace_failing = Gauge("rvguard_trace_failing", "1 while trace writes fail", registry=r)
        self._live: dict[str, _Live] = {}
        self._k: int | None = None
        self._ended: dict[str, list[int]] = {}  # tenant → [entitled ended, attained]

    def _outcome_series(self) -> None:
        from prometheus_client import Histogram

        r, tb = self.registry, ["tenant", "basis"]
        self.admitted = _counter(r, "rvguard_admitted", "Admitted requests", tb)
        self.rejected = _counter(r, "rvguard_rejected", "Rejected requests", ["tenant", "reason"])
        self.dropped = _counter(r, "rvguard_dropped", "Requests dropped as doomed", tb)
        self.failed = _counter(r, "rvguard_failed", "Requests the service failed", tb)
        self.client_errors = _counter(
            r, "rvguard_client_errors", "Requests the upstream refused as the client's mistake", tb
        )
        self.completed = _counter(r, "rvguard_completed", "Completed requests", tb)
        self.met = _counter(r, "rvguard_deadline_met", "Admitted requests completed by their deadline", tb)
        self.missed = _counter(
            r, "rvguard_deadline_missed", "Admitted requests late, dropped or failed by the service", tb
        )
        deadlines = {t.deadline for t in self._contract.tenants.values()}
        self.sojourn = Histogram(
            "rvguard_sojourn_seconds",
            "Arrival to completion (a bucket at each tenant's deadline)",
            ["tenant"],
            buckets=sorted(set(_BUCKETS) | deadlines),
            registry=r,
        )

    def _floor_series(self) -> None:
        from prometheus_client import Gauge

        r, t = self.registry, ["tenant"]
        self.entitled = _counter(
            r, "rvguard_floor_entitled", "Floor-admitted requests that ended (client errors aside)", t
        )
        self.attained = _counter(
            r, "rvguard_floor_attained", "Floor-admitted requests completed by their deadline", t
        )
        self.attainment = Gauge(
            "rvguard_floor_attainment", "Floor attainment since start: attained / entitled", t, registry=r
        )
        self.floor_refused = _counter(
            r, "rvguard_floor_refused", "Requests of floored tenants rejected", ["tenant", "reason"]
        )
        self.credits_used = Gauge(
            "rvguard_floor_credits_used", "Floor credits used in the current window", t, registry=r
        )
        self.credits = Gauge("rvguard_floor_credits", "Floor credits per window (B)", t, registry=r)
        for name, tenant in self._contract.tenants.items():
            self.credits.labels(name).set(tenant.floor)
            self.credits_used.labels(name).set(0)  # until `watch_ledger` gives it the core's ledger

    def _answer_series(self) -> None:
        from prometheus_client import Histogram

        r, tm = self.registry, ["tenant", "model"]
        self.ttft = Histogram(
            "rvguard_time_to_first_token_seconds",
            "Dispatch to the first generated token",
            tm,
            buckets=_TTFT_BUCKETS,
            registry=r,
        )
        self.latency = Histogram(
            "rvguard_upstream_latency_seconds",
            "Dispatch to the upstream's last byte",
            tm,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.prompt_tokens = _counter(r, "rvguard_prompt_tokens", "Prompt tokens the upstream processed", tm)
        self.generation_tokens = _counter(r, "rvguard_generation_tokens", "Tokens the upstream generated", tm)

    def _headroom_series(self) -> None:
        from prometheus_client import Gauge

        r = self.registry
        self.headroom = Gauge(
            "rvguard_headroom", "Raw headroom fraction of the last fresh sample", ["resource"], registry=r
        )
        self.demotions = _counter(
            r, "rvguard_demotions", "Surplus requests held back by the redline", ["resource"]
        )
        self.restores = _counter(r, "rvguard_restores", "Demoted requests released", ["resource"])
        self.evictions = _counter(r, "rvguard_evictions", "Requests evicted", ["reason"])
        self.alerts = _counter(
            r,
            "rvguard_precondition_alerts",
            "Assumption-watch alerts, by condition (trace kind alert)",
            ["condition"],
        )
        self._sampled: dict[str, float] = {}  # resource -> the Guard time of its last fresh sample

    def sample_ages(self, now: float) -> dict[str, float]:
        """Seconds since each resource's last fresh sample at ``now`` (Guard clock)."""
        return {res: max(0.0, now - t) for res, t in self._sampled.items()}

    def _headroom_event(self, event: Sample | Demote | Restore | Evict) -> None:
        """``sample``, ``demote``, ``restore`` and ``evict`` (the kinds of DESIGN §10)."""
        if isinstance(event, Sample):
            self.headroom.labels(event.resource).set(event.value)
            self._sampled[event.resource] = event.t
        elif isinstance(event, Demote):
            self.demotions.labels(event.resource).inc()
        elif isinstance(event, Restore):
            self.restores.labels(event.resource).inc()
        else:
            self.evictions.labels(event.reason or "unknown").inc()

    def watch_core(self, core: DecisionCore) -> None:
        """Expose the core's live gauges and counters (read at scrape time, never stale)."""
        from prometheus_client import Gauge

        r = self.registry
        Gauge("rvguard_in_flight", "Requests holding a slot", registry=r).set_function(lambda: core.in_flight)
        Gauge("rvguard_queue_depth", "Admitted requests waiting", registry=r).set_function(
            lambda: core.queue_depth
        )
        Gauge("rvguard_floor_scale", "Floor scale set by the watch", registry=r).set_function(
            lambda: core.statistics().floor_scale
        )
        c = self._contract.slots
        reserve = int(getattr(self._contract, "reserve", 0) or 0)
        Gauge("rvguard_slots", "Backend slots (C)", registry=r).set(c)
        Gauge("rvguard_reserve_slots", "Slots reserved from surplus work (R)", registry=r).set(reserve)
        Gauge("rvguard_reserve_occupied", "Reserved slots held now", registry=r).set_function(
            lambda: max(0, core.in_flight - (c - reserve))
        )
        series = {
            "rvguard_watch_alerts": ("Assumption-watch alerts raised", lambda: float(len(core.alerts))),
            "rvguard_uncertain_dispatches": (
                "Dispatches the U gate could not call sure (U unknown)",
                lambda: float(core.statistics().uncertain),
            ),
        }
        r.register(_LiveCounters(series))

    def watch_ledger(self, ledger: FloorLedger, clock: Clock) -> None:
        """``rvguard_floor_credits_used{tenant}`` read at scrape time from ``ledger`` (the core's
        count of floor credit admitted in the window holding ``clock.now()``): no count of its own."""
        for name in self._contract.tenants:
            self.credits_used.labels(name).set_function(_reader(ledger, clock, name))

    def watch_guard(self, guard: Guard) -> None:
        """The core's series (`watch_core`, `watch_ledger`), the Guard's sink failures and learner
        overruns."""
        self.watch_core(guard.core)
        self.watch_ledger(guard.core, guard.clock)
        errors = (
            "Events a sink (trace file, metrics) failed to take",
            lambda: float(guard.statistics().sink_errors),
        )
        late = (
            "Learner answers past learner_timeout (each rejected the surplus it was asked about)",
            lambda: float(guard.statistics().learner_timeouts),
        )
        stalls = (
            "Event-loop stalls the watchdog recorded (stall records)",
            lambda: float(guard.stalls.stalls),
        )
        loop = guard.headroom
        warned = (
            "Emergency-eviction plans whose k-bounded relief cannot land before the node's deadline",
            lambda: 0.0 if loop is None or loop.emergency is None else float(loop.emergency.warnings),
        )
        telemetry = (
            "Headroom reads that failed (unreachable or malformed telemetry)",
            lambda: 0.0 if loop is None else float(loop.errors),
        )
        self.registry.register(
            _LiveCounters(
                {
                    "rvguard_sink_errors": errors,
                    "rvguard_learner_timeouts": late,
                    "rvguard_loop_stalls": stalls,
                    "rvguard_headroom_errors": telemetry,
                    "rvguard_eviction_deadline_warnings": warned,
                }
            )
        )
        self.registry.register(_SampleAges(self, guard.clock))
        from prometheus_client import Gauge

        redline = guard.core.redline
        Gauge(
            "rvguard_redline_firing", "1 while the physical redline fires", registry=self.registry
        ).set_function(lambda: float(redline is not None and redline.firing))

    def observe_answer(self, tenant: str, response: Response) -> None:
        """Time to first token, upstream latency and token counts of one completed answer."""
        model = str(response.raw.get("model") or "") if response.raw else ""
        if response.first_token is not None:
            self.ttft.labels(tenant, model).observe(response.first_token)
        if response.total is not None:
            self.latency.labels(tenant, model).observe(response.total)
        if response.prompt_tokens is not None:
            self.prompt_tokens.labels(tenant, model).inc(response.prompt_tokens)
        if response.output_tokens is not None:
            self.generation_tokens.labels(tenant, model).inc(response.output_tokens)

    def __call__(self, event: Event) -> None:
        """Count ``event``."""
        self._roll(event.t)
        if isinstance(event, Sample | Demote | Restore | Evict):
            self._headroom_event(event)
            return
        if isinstance(event, Watch):
            self.alerts.labels(event.condition).inc()
            return
        if isinstance(event, Arrive):
            c = self._contract
            deadline = (
                event.deadline if event.deadline is not None else event.t + c.tenants[event.tenant].deadline
            )
            self._live[event.rid] = _Live(event.tenant, event.t, deadline)
            return
        live = self._live.get(event.rid) or _Live("unknown", event.t, event.t)
        if isinstance(event, Admit):
            self._admit(live, event)
        elif isinstance(event, Reject):
            self._live.pop(event.rid, None)
            reason = event.reason or "unknown"
            self.rejected.labels(live.tenant, reason).inc()
            spec = self._contract.tenants.get(live.tenant)
            if spec is not None and spec.floored:
                self.floor_refused.labels(live.tenant, reason).inc()
        elif isinstance(event, Complete | Drop | Fail):
            self._live.pop(event.rid, None)
            self._terminal(event, live)

    def _admit(self, live: _Live, event: Admit) -> None:
        live.basis = event.basis.value
        self.admitted.labels(live.tenant, live.basis).inc()

    def _terminal(self, event: Complete | Drop | Fail, live: _Live) -> None:
        tenant, basis = live.tenant, live.basis
        if isinstance(event, Fail) and is_client_error(event.reason):
            self.client_errors.labels(tenant, basis).inc()
            return
        on_time = isinstance(event, Complete) and event.t <= live.deadline
        if isinstance(event, Complete):
            self.completed.labels(tenant, basis).inc()
            self.sojourn.labels(tenant).observe(event.t - live.t)
        elif isinstance(event, Drop):
            self.dropped.labels(tenant, basis).inc()
        else:
            self.failed.labels(tenant, basis).inc()
        if basis:  # admitted: judged against its deadline once, here
            (self.met if on_time else self.missed).labels(tenant, basis).inc()
        if basis == Basis.FLOOR.value:
            counts = self._ended.setdefault(tenant, [0, 0])
            counts[0] += 1
            counts[1] += on_time
            self.entitled.labels(tenant).inc()
            if on_time:
                self.attained.labels(tenant).inc()
            self.attainment.labels(tenant).set(counts[1] / counts[0])

    def _roll(self, t: float) -> None:
        """A new window: its index."""
        k = self._contract.window_index(t)
        if k != self._k:
            self._k = k
            self.window.set(k)
