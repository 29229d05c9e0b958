"""FR — fleet routing (DESIGN §10): no request routed on a stale view; per engine, in flight ≤ C_e.

Theory of operation
-------------------
A gateway over several engines writes a ``route`` record (rid, engine,
view_time, mode) just before each ``dispatch``, carrying the bounds it was
held to: ``staleness`` (seconds a view may age) and ``slots`` (C_e, the most
this gateway may have on that engine). FR is judged from them:

* a ``p2c`` route's view is at most ``staleness`` old at the route
  (``t − view_time ≤ staleness``); a ``siloed`` route reads no view;
* per (trace, engine), the requests dispatched there and not yet ended
  (complete, fail, drop) or evicted never exceed ``slots``: a ``dispatch``
  counts on the engine of the request's latest ``route``.

Requests are counted per trace (``source``): C_e is one replica's allowance,
so merged replicas are judged each on its own engines' counts. A route
without the bounds (another writer) is judged on what it carries.

Pure. Cost O(1) per event; memory O(routed requests in flight).
"""

from __future__ import annotations

from ..events import Complete, Dispatch, Drop, Event, Evict, Fail, Route, RouteMode
from ..verdict import Violation

__all__ = ["FleetRouting"]

_EPS = 1e-9


class FleetRouting:
    """Feed every event (with its trace's name); collect the violations returned."""

    def __init__(self) -> None:
        self._route: dict[tuple[str, str], Route] = {}  # (source, rid) -> its latest route
        self._on: dict[tuple[str, str], str] = {}  # (source, rid) -> the engine it is dispatched on
        self._flight: dict[tuple[str, str], int] = {}  # (source, engine) -> dispatched, not ended
        self.routes = 0

    def feed(self, ev: Event, source: str = "") -> list[Violation]:
        """Take one event; the violations it reveals."""
        key = (source, ev.rid)
        if isinstance(ev, Route):
            self.routes += 1
            self._route[key] = ev
            return self._stale(ev)
        if isinstance(ev, Dispatch):
            route = self._route.pop(key, None)
            return [] if route is None else self._dispatch(ev, route, source)
        if isinstance(ev, Complete | Fail | Drop | Evict):
            self._route.pop(key, None)
            on = self._on.pop(key, None)
            if on is not None:
                self._flight[(source, on)] -= 1
        return []

    def _stale(self, ev: Route) -> list[Violation]:
        staleness = _number(ev.extra.get("staleness"))
        if ev.mode is not RouteMode.P2C or staleness is None:
            return []
        if ev.view_time is None or ev.t - ev.view_time > staleness + _EPS:
            age = "no view" if ev.view_time is None else f"a view {ev.t - ev.view_time:.6g} s old"
            why = f"routed by P2C to {ev.engine!r} on {age} (staleness bound {staleness:g} s)"
            return [Violation("FR", ev.rid, ev.t, (ev,), why, {"engine": ev.engine})]
        return []

    def _dispatch(self, ev: Dispatch, route: Route, source: str) -> list[Violation]:
        slots = _number(route.extra.get("slots"))
        where = (source, route.engine)
        n = self._flight[where] = self._flight.get(where, 0) + 1
        self._on[(source, ev.rid)] = route.engine
        if slots is None or n <= slots:
            return []
        why = f"{n} requests in flight on engine {route.engine!r}, above its C_e = {slots:g}"
        return [Violation("FR", ev.rid, ev.t, (route, ev), why, {"engine": route.engine, "in_flight": n})]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
