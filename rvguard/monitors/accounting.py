"""Online metrics (DESIGN §3): the monitor accounts each accepted event here, in memory bounded by
live requests.

The records and their definitions are `rvguard.monitors.metrics`; the offline checker computes the
same numbers from columns, and tests hold the two to exact agreement (the utilisation included: a
float sum, added in the same order). The assured P95 sojourn (`rvguard.monitors.p95`, numpy:
imported when a summary is taken) needs the sample itself: the accumulator keeps one (window,
sojourn) pair per judged admitted assured request in two compact arrays (16 bytes a request), the
one part of its memory that grows with the trace rather than with live requests. Compiled in the
optional build (`rvguard._compiled`).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable

from ..events import Event
from ..lifecycle import ADMIT, ARRIVE, COMPLETE, DISPATCH, EVICT, N_KINDS, REJECT, TERMINAL_CODES
from .automaton import Instance
from .metrics import Metrics, ServiceStats, WindowRow

__all__ = ["MetricsAccumulator"]

# per-window counter columns, in the order of `metrics.WINDOW_COLUMNS`
OFFERED, ENTITLED, ADMITTED, REJECTED, ON_TIME, MISSED = range(6)


class _ServiceAcc:
    __slots__ = ("above", "below", "count", "hi", "lo")

    def __init__(self) -> None:
        self.count = 0
        self.lo = math.inf
        self.hi = -math.inf
        self.below = 0
        self.above = 0

    def add(self, s: float, lower: float, ceiling: float) -> None:
        self.count += 1
        if s < self.lo:
            self.lo = s
        if s > self.hi:
            self.hi = s
        if s < lower:
            self.below += 1
        if s > ceiling:
            self.above += 1

    def stats(self) -> ServiceStats:
        if self.count == 0:
            return ServiceStats(0, None, None, 0, 0)
        return ServiceStats(self.count, self.lo, self.hi, self.below, self.above)


class MetricsAccumulator:
    """Online metrics; the monitor calls it after each accepted event.

    Cost: O(1) per event; memory O(live requests + windows × tenants) plus
    16 bytes per judged admitted assured request (the P95 sample).
    """

    def __init__(self, *, slots: int, ceilings: dict[str, float], window: float, origin: float) -> None:
        self._slots = slots
        self._ceilings = ceilings
        self._window = window
        self._origin = origin
        self.events = 0
        self.requests = 0
        self.first_t: float | None = None
        self.last_t: float | None = None
        self.entitled = 0
        self.entitled_attained = 0
        self.admitted_judged = 0
        self.admitted_missed = 0
        self.offered_judged = 0
        self.offered_unmet = 0
        self.backlog = 0
        self.max_backlog = 0
        self.busy = 0.0
        self.windows: dict[tuple[str, int], list[int]] = {}
        self.services = {True: _ServiceAcc(), False: _ServiceAcc()}
        self.p95_windows = array("q")
        self.p95_sojourns = array("d")

        #: ``handlers[code](inst, ev, code)`` accounts one accepted event of that kind
        self.handlers: tuple[Callable[[Instance, Event, int], None], ...] = tuple(
            self._handler(code) for code in range(N_KINDS)
        )

    def _handler(self, code: int) -> Callable[[Instance, Event, int], None]:
        """The accounting of one kind: terminal kinds judge the request, others count the event."""
        if code in TERMINAL_CODES:
            return self._terminal
        handlers = {ARRIVE: self._arrive, ADMIT: self._admit, DISPATCH: self._dispatch, EVICT: self._evict}
        return handlers.get(code, self._count)

    def _count(self, inst: Instance, ev: Event, code: int) -> None:
        self.events += 1
        self.last_t = ev.t

    def on_node(self, ev: Event) -> None:
        """Account one node event (a ``sample``: no request)."""
        self.events += 1
        self.last_t = ev.t
        if self.first_t is None:
            self.first_t = ev.t

    def _evict(self, inst: Instance, ev: Event, code: int) -> None:
        """An eviction ends the request's time on a slot (a relocated one is dispatched again)."""
        self.events += 1
        self.last_t = t = ev.t
        if inst.t_dispatch is not None:
            self.busy += t - inst.t_dispatch
            inst.t_dispatch = None

    def _arrive(self, inst: Instance, ev: Event, code: int) -> None:
        self.events += 1
        self.last_t = ev.t
        if self.first_t is None:  # the first accepted event is an arrive or a node event (WF)
            self.first_t = ev.t
        self.requests += 1
        key = (inst.tenant, inst.window)
        row = self.windows.get(key)
        if row is None:
            row = self.windows[key] = [0, 0, 0, 0, 0, 0]
        inst.row = row
        row[OFFERED] += 1
        if inst.entitled:
            self.entitled += 1
            row[ENTITLED] += 1

    def _admit(self, inst: Instance, ev: Event, code: int) -> None:
        self.events += 1
        self.last_t = ev.t
        inst.admitted = True
        inst.row[ADMITTED] += 1  # type: ignore[index]
        if inst.floored:
            self.backlog += 1
            if self.backlog > self.max_backlog:
                self.max_backlog = self.backlog

    def _dispatch(self, inst: Instance, ev: Event, code: int) -> None:
        self.events += 1
        self.last_t = inst.t_dispatch = ev.t

    def _terminal(self, inst: Instance, ev: Event, code: int) -> None:
        self.events += 1
        self.last_t = t = ev.t
        on_time = code == COMPLETE and t <= inst.deadline
        admitted = inst.admitted
        row = inst.row
        assert row is not None
        if code == REJECT:
            row[REJECTED] += 1
        row[ON_TIME if on_time else MISSED] += 1
        t_dispatch = inst.t_dispatch
        if t_dispatch is not None:
            self.busy += t - t_dispatch
            if code == COMPLETE:
                self.services[inst.floored].add(t - t_dispatch, inst.lower, self._ceilings[inst.tenant])
        if on_time and admitted and inst.entitled:
            self.entitled_attained += 1
        if inst.floored:
            self.offered_judged += 1
            self.offered_unmet += not on_time
            if admitted:
                self.backlog -= 1
                self.admitted_judged += 1
                self.admitted_missed += not on_time
                self.p95_windows.append(inst.window)
                self.p95_sojourns.append(t - inst.t_arrive if code == COMPLETE else math.inf)

    def snapshot(self, live: list[Instance], now: float | None) -> Metrics:
        """The metrics now; live requests whose deadline has passed count as missed."""
        from . import p95  # numpy: loaded by the first summary, not by ``import rvguard``

        adm_j, adm_m = self.admitted_judged, self.admitted_missed
        off_j, off_m = self.offered_judged, self.offered_unmet
        busy = self.busy
        open_requests = 0
        late_windows: list[int] = []
        for inst in live:
            t_dispatch = inst.t_dispatch
            if t_dispatch is not None and now is not None:
                busy += now - t_dispatch
            if now is None or inst.deadline >= now:
                open_requests += 1
                continue
            if inst.floored:
                off_j += 1
                off_m += 1
                if inst.admitted:
                    adm_j += 1
                    adm_m += 1
                    late_windows.append(inst.window)
        span = None if self.first_t is None or self.last_t is None else self.last_t - self.first_t
        rows = tuple(
            WindowRow(tenant, k, self._origin + k * self._window, *counts)
            for (tenant, k), counts in sorted(self.windows.items(), key=lambda kv: (kv[0][1], kv[0][0]))
        )
        return Metrics(
            events=self.events,
            requests=self.requests,
            first_t=self.first_t,
            last_t=self.last_t,
            entitled=self.entitled,
            entitled_attained=self.entitled_attained,
            admitted_judged=adm_j,
            admitted_missed=adm_m,
            offered_judged=off_j,
            offered_unmet_count=off_m,
            max_assured_backlog=self.max_backlog,
            open_requests=open_requests,
            utilisation=None if not span else busy / (self._slots * span),
            service_assured=self.services[True].stats(),
            service_opportunistic=self.services[False].stats(),
            assured_sojourn_p95=p95.sojourn_p95(
                [*self.p95_windows, *late_windows], [*self.p95_sojourns, *[math.inf] * len(late_windows)]
            ),
            windows=rows,
        )
