"""The engines behind one gateway: each one's client, slots, liveness and headroom view.

Theory of operation
-------------------
An `Engine` is one upstream (`UpstreamDispatcher`: one HTTP client) with its
slot count C_e (how many of this gateway's requests it may hold at once: the
contract's C unless overridden per engine), this gateway's requests on it now
(exact: the gateway made them), whether it is in rotation, and where its
headroom comes from:

* ``metrics`` — the engine exports vLLM's ``/metrics``: a `MetricsHeadroomSource`
  scraped every ``interval`` seconds feeds a `Redline` over ``kv_cache``, whose
  dominant projected headroom (``min(Ĥ, Ĥ + horizon·dĤ/dt)``) is the engine's
  headroom, further capped by its free slots; the view is as old as the
  oldest resource's last fresh sample;
* ``slots`` — it does not (``/metrics`` answers 404, or without vLLM's series):
  free slots over C_e, from this gateway's own count, always fresh;
* ``unknown`` — not scraped yet: no view (the router then routes siloed).

An engine whose ``/metrics`` reports fewer requests (running + waiting) than this gateway has on
it, at three scrapes in a row, is lying (or broken): it is logged and judged on its free slots
from then on (`Engine.liar`). Whatever a view says, the router never places more than C_e.

An engine leaves rotation when a call to it fails in transport (refused,
reset, cut mid-stream), when a readiness probe (``GET /v1/models``, or the health
path set: `rvguard.gateway.outlier.OutlierConfig`) fails, or
when ``PROBE_MISSES`` probes in a row go unanswered in time; it comes back when
a probe answers. Apart from that, its `Outlier` (on its dispatcher) ejects it after
failed requests in a row (5xx answers included: a dead vLLM engine still lists its
models): ejected, it is out of rotation (`Engine.in_rotation`) until a trial or its
health path says it serves again, whatever ``/v1/models`` answers. One slow
probe is not enough: a CPU engine busy streaming can take longer than the
probe's time-out to list its models, and taking it out then would strand the
streams that a relocation would move onto it. A scrape that fails changes
nothing but the age of the view: a view that grows older than the router's
staleness bound sends every decision siloed (`rvguard.fleet.router`).

Cost: O(1) per view; one scrape per engine per ``interval``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from ..clock import Clock
from ..enforce.headroom import RUNNING, WAITING, MetricsHeadroomSource
from ..enforce.redline import Redline, RedlineConfig, ResourceLimit
from ..errors import TelemetryError, TelemetryFormatError, TelemetryUnavailableError
from ..fleet.router import EngineView, slot_headroom
from .upstream import UpstreamDispatcher

__all__ = ["KV_LIMIT", "Engine", "EngineStatistics", "Telemetry"]

log = logging.getLogger("rvguard.gateway")

Telemetry = Literal["unknown", "metrics", "slots"]
#: the resource a router compares (its h_min only names the redline; routing reads the value)
KV_LIMIT = ResourceLimit("kv_cache", h_min=0.05)
_HORIZON_S = 1.0  # projection horizon of the routing headroom


@dataclass(frozen=True, slots=True)
class EngineStatistics:
    """One engine's state now (``/metrics`` and tests)."""

    name: str
    alive: bool  # in rotation: its probe answers and it is not ejected
    in_flight: int
    slots: int
    telemetry: Telemetry
    headroom: float
    view_time: float | None
    routed: int
    failures: int


#: probes in a row an engine may leave unanswered in time (slow, not refused) and stay in rotation
PROBE_MISSES = 3
#: scrapes in a row an engine may report fewer requests than this gateway has on it
LIE_SCRAPES = 3


class Engine:
    """One upstream engine (see module doc).

    Args:
        name: its label (the URL unless named).
        dispatcher: the client of this engine.
        slots: C_e.
        clock: the gateway's clock (stamps scrapes).
        interval: seconds between two scrapes of ``/metrics``.
    """

    def __init__(
        self, name: str, dispatcher: UpstreamDispatcher, *, slots: int, clock: Clock, interval: float
    ) -> None:
        if slots < 1:
            raise ValueError(f"engine {name!r}: slots must be >= 1, got {slots}")
        self.name = name
        self.dispatcher = dispatcher
        self.slots = slots
        self.in_flight = 0
        self.alive = True
        self.telemetry: Telemetry = "unknown"
        self.interval = interval
        self.source = MetricsHeadroomSource(
            dispatcher.base_url + "/metrics",
            clock,
            min_interval=0.0,
            timeout=max(interval, 0.5),
            client=dispatcher.client,
        )
        self.redline = Redline(RedlineConfig(resources=(KV_LIMIT,), alpha=0.5, horizon=_HORIZON_S))
        self.routed = 0
        self.failures = 0
        self.probe_misses = 0  # probes in a row not answered in time
        self.scrape_error = ""
        self.lie_strikes = 0
        self.liar = False  # its /metrics was found out (`_lies`): headroom from free slots

    @property
    def in_rotation(self) -> bool:
        """Alive (its probe answers) and not ejected for failed requests."""
        outlier = self.dispatcher.outlier
        return self.alive and (outlier is None or not outlier.ejected)

    @property
    def url(self) -> str:
        """The engine's base URL."""
        return self.dispatcher.base_url

    def view(self, now: float) -> EngineView:
        """What the router sees of this engine at ``now``."""
        own = slot_headroom(self.slots, self.in_flight, 0)
        headroom = own
        seen_at: float | None = now
        v = self.redline.view() if self.telemetry == "metrics" else None
        if v is not None:
            headroom = min(max(min(v.smoothed, v.projected), 0.0), 1.0, own)
            seen_at = self.redline.last_sample_time(KV_LIMIT.name)
        elif self.telemetry != "slots":
            headroom, seen_at = 0.0, None  # not read yet: no view
        return EngineView(self.name, headroom, seen_at, self.in_flight, self.slots, self.in_rotation)

    async def scrape(self) -> None:
        """One scrape of ``/metrics`` into the redline; decides ``telemetry`` on the first answer."""
        try:
            samples = await self.source.read()
        except TelemetryUnavailableError as err:
            if self.telemetry == "unknown" and "HTTP 404" in str(err):
                self._use_slots("answers 404 on /metrics")
            else:
                self._scrape_failed(err)
            return
        except TelemetryFormatError as err:
            if self.telemetry == "unknown":
                self._use_slots(f"exports no vLLM series ({err})")
            else:
                self._scrape_failed(err)
            return
        if self._lies():
            return
        for sample in samples:
            self.redline.observe(sample)
        if self.telemetry == "unknown":
            log.info(
                "engine %s: headroom from its /metrics",
                self.name,
                extra={"event": "engine_telemetry", "engine": self.name, "telemetry": "metrics"},
            )
        self.telemetry = "metrics"
        if self.scrape_error:
            log.info("engine %s: /metrics answers again", self.name, extra={"event": "engine_telemetry"})
        self.scrape_error = ""

    def _lies(self) -> bool:
        """Is the engine's ``/metrics`` found out? Every request this gateway has on it is at the
        engine, running or waiting: reporting fewer at ``LIE_SCRAPES`` scrapes in a row (one
        could race a request's start or end by a few milliseconds) is a lie, and the engine is
        judged on its free slots from then on (its ``/metrics`` is no longer read into the view:
        the safe view, since placement is capped by the gateway's own count either way)."""
        reported = self.source.reported
        if RUNNING not in reported:
            return False
        at_engine = reported[RUNNING] + reported.get(WAITING, 0.0)
        self.lie_strikes = self.lie_strikes + 1 if at_engine < self.in_flight else 0
        if self.lie_strikes < LIE_SCRAPES:
            return False
        self.liar = True
        self._use_slots(
            f"reports {at_engine:g} requests on its /metrics while this gateway has {self.in_flight} on it"
        )
        return True

    def _use_slots(self, why: str) -> None:
        self.telemetry = "slots"
        log.info(
            "engine %s %s: headroom from free slots",
            self.name,
            why,
            extra={"event": "engine_telemetry", "engine": self.name, "telemetry": "slots"},
        )

    def _scrape_failed(self, err: TelemetryError) -> None:
        if not self.scrape_error:
            log.warning(
                "engine %s: /metrics scrape failed: %s (its view ages)",
                self.name,
                err,
                extra={"event": "engine_telemetry_failed", "engine": self.name},
            )
        self.scrape_error = str(err)

    def down(self, why: str) -> None:
        """Out of rotation (a transport failure or a failed probe)."""
        self.failures += 1
        if self.alive:
            log.warning(
                "engine %s out of rotation: %s",
                self.name,
                why,
                extra={"event": "engine_down", "engine": self.name, "reason": why},
            )
        self.alive = False

    def probe_missed(self, why: str) -> None:
        """A probe went unanswered in time: out of rotation at the ``PROBE_MISSES``-th in a row."""
        self.probe_misses += 1
        if self.probe_misses >= PROBE_MISSES:
            self.down(f"{why} ({self.probe_misses} probes in a row)")

    def up(self) -> None:
        """Back in rotation (a probe answered)."""
        self.probe_misses = 0
        if not self.alive:
            log.info(
                "engine %s back in rotation", self.name, extra={"event": "engine_up", "engine": self.name}
            )
        self.alive = True

    def statistics(self, now: float) -> EngineStatistics:
        """The engine's state now."""
        v = self.view(now)
        return EngineStatistics(
            self.name,
            self.in_rotation,
            self.in_flight,
            self.slots,
            self.telemetry,
            v.headroom,
            v.view_time,
            self.routed,
            self.failures,
        )
