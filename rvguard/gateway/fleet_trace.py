"""The fleet's decisions in the gateway's trace: ``route``, ``evict``, ``relocate`` (DESIGN §10).

`FleetTrace` is the `FleetDispatcher`'s `FleetHooks`. Records, in the order the
lifecycle allows them (`rvguard.lifecycle.MOVES`):

* ``route`` (rid, engine, view_time, mode; and ``staleness``, ``slots``: the
  bounds FR judges it against when the contract has no fleet block,
  `rvguard.monitors.fr`; a p2c one also ``sampled``, the engines it compared
  and the headroom it read for each, on which FR judges the choice) — each
  request's engine, decided at its dispatch event and written just before it (the request is
  still admitted); ``view_time`` is when the view it was decided on was read
  (none when siloed). A dispatch that had to wait for a slot (only while an
  engine is out of rotation) is routed when one frees: its ``route`` record
  comes after its ``dispatch`` record (a late route, which FR judges as the
  route and the slot taking at once);
* ``evict`` (rid, state, reason) — the engine died under a request that may
  move: ``state`` its accumulated tokens (prompt + output), reason
  ``engine-down: <engine>``;
* ``relocate`` (rid, engine), then its ``route`` and a second ``dispatch`` —
  it resumes on another engine.

A request that cannot move fails once (the Guard's ``fail``), with no
``evict``. A write that fails is the trace file's to report (logged, counted,
``/readyz``); the request goes on.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

from ..clock import Clock
from ..events import Dispatch, Event, Evict, Relocate, Route, RouteMode
from ..fleet.router import Route as Decision
from .trace import TraceFile

__all__ = ["FleetTrace"]

log = logging.getLogger("rvguard.gateway")


class FleetTrace:
    """Writes the fleet's decisions to ``trace`` (and the log); see module doc."""

    def __init__(
        self, trace: TraceFile | None, clock: Clock, *, staleness: float, slots: Mapping[str, int]
    ) -> None:
        self._trace = trace
        self._clock = clock
        self._staleness = staleness
        self._slots = dict(slots)

    def _route(self, t: float, rid: str, engine: str, route: Decision) -> Route:
        # what FR judges against: the bounds, and the engines a p2c route compared
        bounds: dict[str, object] = {"staleness": self._staleness, "slots": self._slots[engine]}
        if route.sampled:
            bounds["sampled"] = dict(route.sampled)
        return Route(t, rid, engine, route.view_time, RouteMode(route.mode), extra=bounds)

    def routed(self, rid: str, engine: str, route: Decision, t: float) -> None:
        """A dispatch's engine, written before its ``dispatch`` record (after it when late)."""
        self._write(self._route(t, rid, engine, route))

    def evicted(self, rid: str, engine: str, state: int, reason: str) -> None:
        """The request lost its engine; it will move."""
        self._write(Evict(self._clock.now(), rid, state, reason))
        log.info(
            "request evicted: its engine is down",
            extra={"event": "evict", "rid": rid, "engine": engine, "state": state},
        )

    def relocated(self, rid: str, engine: str, route: Decision) -> None:
        """The request resumes on ``engine``: relocate, route, dispatch."""
        t = self._clock.now()
        self._write(Relocate(t, rid, engine))
        self._write(self._route(t, rid, engine, route))
        self._write(Dispatch(t, rid))
        log.info("request relocated", extra={"event": "relocate", "rid": rid, "engine": engine})

    def _write(self, event: Event) -> None:
        if self._trace is None:
            return
        with contextlib.suppress(OSError):  # the trace file logged and counted it; the request goes on
            self._trace(event)
