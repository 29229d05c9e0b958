"""The fold: partition summaries, in trace order, to exactly the single-process check's report.

Theory of operation
-------------------
A partitioned trace is the concatenation of its partitions; the reference
is `rvguard check` on that concatenation (the online `Monitor`, strict). The
workers reduce each partition independently (`rvguard.monitors.partition`);
this sequential fold over their summaries, in trace order, gives the same
verdicts and metrics — the same values, floats included — on every trace the
reference accepts, and on any other trace says it cannot (``unproven``), so
the caller returns the reference's own answer. The argument:

1. *Which traces.* The fold proves the whole trace WF-clean, in time order,
   with known tenants: each partition is so by itself (worker), its first
   time is not before the previous last (fold), every row of a request that
   arrived earlier continues that request's lifecycle from its stage
   (`lifecycle.NEXT`, walked here), and no rid arrives twice (each arriving
   rid's 64-bit hash is checked against every earlier one; a collision
   only sends the trace to the reference, never changes an answer). On such
   a trace the online monitor refuses nothing, so its verdicts are the
   offline checker's (the differential tests of `rvguard.monitors.offline`)
   and depend, per request, only on the request's own rows, its facts, its
   entitlement, and — for a request with no end — the trace's last time.
2. *Entitlement.* A request's entitlement is its rank and credit among its
   (tenant, window)'s arrivals. Only the window of a partition's first row
   can hold earlier partitions' arrivals (their times are all ≤ that row's).
   So every other arrival's entitlement is final in its worker; for the first
   window's, the fold adds the credit carried from earlier partitions (kept
   per tenant for the last window seen), exactly as `Entitlement` counts.
3. *Verdicts.* A settled request (arrives, ends, and arrives after the first
   window, in one partition) is judged by its worker; every other request's
   rows come here and it is judged once it ends, or at the end with the
   trace's last time, by the same offline functions with the entitlement of
   (2). Each request is judged exactly once, so the union of the verdicts is
   the reference's; witnesses are the record-path events (extras kept).
4. *Metrics.* Counts, per-window rows, the service envelope (counts, min,
   max) and the P95 sample are sums over requests (`Tally`): merged. The
   assured backlog is a running sum in row order: each partition sends its
   steps between the rows of earlier requests as (total, max prefix)
   segments, and the fold inserts those rows' steps, whose facts only it
   knows. The busy time is a float sum in terminal-row order: each partition
   sends its terms in order (an earlier request's term filled in here), and
   the fold adds them left to right (`numpy.add.accumulate`), then the open
   requests' in arrival order — the monitor's own order, so the same float.
5. *RB* and *CAP*, whose state is shared by requests (surplus requests in
   flight ≤ C − R; all requests in flight ≤ C), are running counts like the
   backlog: the fold proves their maxima never exceed their limits, so both
   hold and report nothing, as the monitor would. A trace where one does
   exceed is ``unproven``: the single-process check names each violating
   dispatch and its holders. (CAP's per-engine clause needs ``route`` rows,
   which send a partition to the single-process check anyway.)
6. *AF's upper side* (floor credit admitted per tenant and window ≤ B): a
   prefix sum per (tenant, window) exceeds B at some admit exactly when the
   window's total does. Each worker sends the totals its requests admitted,
   the fold adds the orphans' floor admissions (their credit is in their
   `Deferred`), and proves every total within B, so the upper side holds and
   the workers' judges (on subsets: smaller sums) report nothing, as the
   monitor would. A total beyond B makes the trace ``unproven``.

Cost: O(summary) per partition plus O(log P) searches a rid; memory: the
open requests' rows, and 8 bytes per rid seen (the hashes).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from ..columnar import ColumnarTrace
from ..contract import Contract
from ..events import Basis, Event
from ..lifecycle import ADMIT, DISPATCH, FINAL, INITIAL, N_KINDS, NEXT, STAGES, TERMINAL_CODES
from ..verdict import Violation
from .columns import request_table, row_index
from .metrics import Metrics, ServiceStats
from .offline_metrics import Tally, request_tally, window_rows
from .offline_verdicts import offline_violations
from .p95 import sojourn_p95
from .partition import Deferred, PartitionSummary

__all__ = ["Fold"]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
_START = STAGES.index(INITIAL)
_FINAL = frozenset(STAGES.index(s) for s in FINAL)


@dataclass(slots=True)
class _Open:
    """A request whose verdict waits for rows still to come."""

    info: Deferred  # entitlement final (the first window's carry added)
    events: list[tuple[int, int, Event]] = field(default_factory=list)  # (partition, position, event)
    stage: int = _START
    admitted: bool = False
    surplus: bool = False  # admitted on a basis other than floor (RB counts it once dispatched)
    t_dispatch: float | None = None


class _Seen:
    """Hashes of every rid that arrived, as sorted runs merged by size (a log-structured set)."""

    def __init__(self) -> None:
        self.runs: list[U64] = []

    def add(self, hashes: U64) -> bool:
        """Add sorted hashes; False when one repeats (within them or with an earlier one)."""
        if hashes.size == 0:
            return True
        if bool((hashes[1:] == hashes[:-1]).any()):
            return False
        for run in self.runs:
            at = np.minimum(np.searchsorted(run, hashes), run.size - 1)
            if bool((run[at] == hashes).any()):
                return False
        self.runs.append(hashes)
        while len(self.runs) > 1 and self.runs[-2].size <= 2 * self.runs[-1].size:
            merged = np.concatenate((self.runs.pop(), self.runs.pop()))
            merged.sort()
            self.runs.append(merged)
        return True


def _merge_services(a: ServiceStats, b: ServiceStats) -> ServiceStats:
    """Two classes' service stats as one (a count of 0 has no min or max)."""
    if a.count == 0 or b.count == 0:
        return a if b.count == 0 else b
    lo = min(x for x in (a.min, b.min) if x is not None)
    hi = max(x for x in (a.max, b.max) if x is not None)
    return ServiceStats(
        a.count + b.count, lo, hi, a.below_lower + b.below_lower, a.above_ceiling + b.above_ceiling
    )


class Fold:
    """Folds `PartitionSummary` values, in trace order, into the report (module docstring).

    ``unproven`` is set (with the reason) as soon as the trace is not shown
    clean: the caller then runs the single-process check instead.
    """

    def __init__(self, contract: Contract, names: Collection[str]) -> None:
        self.contract = contract
        self.names = set(names) - {"RB", "CAP"}  # running counts, proven never over their limits
        self._af = "AF" in names
        self.unproven = ""
        self.index = -1
        units = contract.credit_units()
        self._floors = units.floors
        self._scale = units.scale
        self._seen = _Seen()
        self._open: dict[str, _Open] = {}  # arrival order: the order the monitor keeps its live requests
        self._carry_window: int | None = None
        self._carry: dict[str, tuple[int, int]] = {}
        self._violations: list[Violation] = []
        self._tallies: list[Tally] = []
        self._events = 0
        self._first_t: float | None = None
        self._last_t: float | None = None
        self._backlog = 0
        self._max_backlog = 0
        self._rb_limit = contract.slots - contract.reserve if "RB" in names else None
        self._rb = 0
        self._max_rb = 0
        self._cap_limit = contract.slots if "CAP" in names else None
        self._cap = 0
        self._max_cap = 0
        self._busy = 0.0
        self._floor_spent: dict[tuple[str, int], int] = {}  # AF's upper side, per (tenant, window)
        self.client_errors = 0  # fail rows blaming the client: the caller attributes them, violation or not

    def add(self, s: PartitionSummary) -> bool:
        """Fold the next partition; False (and ``unproven`` set) when the trace is not shown clean."""
        if s.index != self.index + 1:
            raise ValueError(f"partition {s.index} folded after {self.index}: summaries go in trace order")
        self.index = s.index
        if self.unproven:
            return False
        if s.problem:
            return self._give_up(f"{s.path}: {s.problem}")
        if s.events == 0:
            return True
        if self._last_t is not None and s.first_t < self._last_t:
            return self._give_up(f"{s.path}: its first event is earlier than the previous partition's last")
        if not self._seen.add(s.arrived):
            return self._give_up(f"{s.path}: a rid may arrive a second time")
        self._events += s.events
        self._first_t = s.first_t if self._first_t is None else self._first_t
        self._last_t = s.last_t
        self._arrivals(s)
        if self._af and not self._within(s.floor_spent):
            return self._give_up(f"{s.path}: AF's upper side is violated (floor credit beyond B)")
        if not self._rows(s):
            return False
        over = self._over_limit()
        if over:
            why = "the single-process check names the dispatches"
            return self._give_up(f"{s.path}: {over} is violated ({why})")
        assert s.settled is not None
        self._tallies.append(s.settled)
        self._violations += s.violations
        self.client_errors += s.client_errors
        return True

    def _over_limit(self) -> str:
        """The running count that has exceeded its limit so far ("RB", "CAP"), or ""."""
        if self._rb_limit is not None and self._max_rb > self._rb_limit:
            return "RB"
        if self._cap_limit is not None and self._max_cap > self._cap_limit:
            return "CAP"
        return ""

    def _give_up(self, reason: str) -> bool:
        self.unproven = reason
        return False

    def _arrivals(self, s: PartitionSummary) -> None:
        """Open the partition's deferred requests, their first window's carried credit added."""
        carried = self._carry if self._carry_window == s.first_window else {}
        for d in s.deferred:
            if d.first_window:
                n, u = carried.get(d.tenant, (0, 0))
                units = u + d.units
                floor = self._floors[d.tenant]
                d = replace(
                    d,
                    rank=n + d.rank,
                    units=units,
                    entitled=floor > 0 and units <= floor,
                    used=units / self._scale,
                )
            self._open[d.rid] = _Open(d)
        if s.last_window == s.first_window:
            first = dict(carried)
            for tenant, (n, u) in s.credit_first.items():
                n0, u0 = first.get(tenant, (0, 0))
                first[tenant] = (n0 + n, u0 + u)
            self._carry = first
        else:
            self._carry = dict(s.credit_last)
        self._carry_window = s.last_window

    def _rows(self, s: PartitionSummary) -> bool:
        """Walk the rows of open requests: lifecycle, running counts, busy terms; judge the ended."""
        self._segment(s.counts, 0)
        busy = s.busy.copy()
        holes = iter(np.flatnonzero(np.isnan(busy)).tolist())
        ended: list[_Open] = []
        segment = 1
        for pos, (ev, orphan) in enumerate(zip(s.rows, s.orphan, strict=True)):
            req = self._open.get(ev.rid)
            if req is None:
                return self._give_up(f"{s.path}: a {ev.kind.value} for {ev.rid!r}, not an open request")
            nxt = NEXT[req.stage * N_KINDS + ev.code]
            if nxt < 0:
                return self._give_up(f"{s.path}: {ev.kind.value} of {ev.rid!r} breaks the protocol")
            req.stage = nxt
            req.events.append((s.index, pos, ev))
            if orphan and self._af and not self._spend(req.info, ev):
                return self._give_up(f"{s.path}: AF's upper side is violated (floor credit beyond B)")
            steps = self._steps(req, ev)
            if orphan and ev.code in TERMINAL_CODES:
                busy[next(holes)] = 0.0 if req.t_dispatch is None else ev.t - req.t_dispatch
            if nxt in _FINAL:
                ended.append(self._open.pop(ev.rid))
            if orphan:
                self._step(steps)
                self._segment(s.counts, segment)
                segment += 1
        self._busy = float(np.add.accumulate(np.concatenate(([self._busy], busy)))[-1])
        self._judge(ended, None)
        return True

    def _spend(self, info: Deferred, ev: Event) -> bool:
        """Add an orphan's floor admission to its (tenant, window); False when the total exceeds B."""
        if ev.code != ADMIT or getattr(ev, "basis", None) is not Basis.FLOOR:
            return True
        return self._within({(info.tenant, info.window): info.weight})

    def _within(self, spent: dict[tuple[str, int], int]) -> bool:
        """Add floor credit per (tenant, window); False when a total exceeds its tenant's B."""
        ok = True
        for key, units in spent.items():
            total = self._floor_spent[key] = self._floor_spent.get(key, 0) + units
            ok = ok and total <= self._floors[key[0]]
        return ok

    @staticmethod
    def _steps(req: _Open, ev: Event) -> tuple[int, int, int]:
        """Update the request's facts by its event; its steps of the backlog, RB's and CAP's counts."""
        code = ev.code
        if code == ADMIT:
            req.admitted = True
            req.surplus = getattr(ev, "basis", None) is not Basis.FLOOR
            return (1 if req.info.floored else 0), 0, 0
        if code == DISPATCH:
            req.t_dispatch = ev.t
            return 0, (1 if req.surplus else 0), 1
        if code in TERMINAL_CODES:
            backlog = -1 if req.info.floored and req.admitted else 0
            running = -1 if req.t_dispatch is not None else 0
            return backlog, (running if req.surplus else 0), running
        return 0, 0, 0

    def _step(self, steps: tuple[int, int, int]) -> None:
        """One orphan row's steps of the three running counts."""
        b, r, c = steps
        self._add(b, max(b, 0), r, max(r, 0), c, max(c, 0))

    def _segment(self, counts: tuple[tuple[I64, I64], ...], i: int) -> None:
        """Segment ``i`` of a partition's running counts (`partition.PartitionSummary.counts`)."""
        (bt, bh), (rt, rh), (ct, ch) = counts
        self._add(int(bt[i]), int(bh[i]), int(rt[i]), int(rh[i]), int(ct[i]), int(ch[i]))

    def _add(self, b_total: int, b_high: int, r_total: int, r_high: int, c_total: int, c_high: int) -> None:
        self._max_backlog = max(self._max_backlog, self._backlog + b_high)
        self._backlog += b_total
        self._max_rb = max(self._max_rb, self._rb + r_high)
        self._rb += r_total
        self._max_cap = max(self._max_cap, self._cap + c_high)
        self._cap += c_total

    def _judge(self, requests: list[_Open], now: float | None) -> None:
        """Judge requests whose rows are all here by the offline checker, with the fold's entitlement."""
        if not requests:
            return
        events = [ev for _, _, ev in sorted(e for r in requests for e in r.events)]
        trace = ColumnarTrace.from_events(events)
        idx = row_index(trace)
        assert idx.clean, "the fold walked every request through the lifecycle"
        req = request_table(trace, self.contract, idx)
        info = {r.info.rid: r.info for r in requests}
        ds = [info[rid] for rid in trace.rid_names]
        ent = (
            np.array([d.window for d in ds], dtype=np.int64),
            np.array([d.entitled for d in ds], dtype=bool),
            np.array([d.rank for d in ds], dtype=np.int64),
            np.array([d.used for d in ds], dtype=np.float64),
        )
        found = offline_violations(trace, self.contract, req, ent, self.names, now=now)
        original = {(ev.rid, ev.code): ev for ev in events}
        self._violations += [
            replace(v, witness=tuple(original[(ev.rid, ev.code)] for ev in v.witness)) for v in found
        ]
        self._tallies.append(request_tally(trace, self.contract, req, ent, now))

    def result(self) -> tuple[list[Violation], Metrics]:
        """The verdicts (sorted) and metrics of the whole trace, once every partition is folded."""
        if self.unproven:
            raise ValueError(f"no result: {self.unproven}")
        now = self._last_t
        busy = self._busy
        for req in self._open.values():
            if req.t_dispatch is not None and now is not None:
                busy += now - req.t_dispatch
        self._judge(list(self._open.values()), now)
        self._open.clear()
        return sorted(self._violations, key=lambda v: v.key), self._metrics(busy)

    def _metrics(self, busy: float) -> Metrics:
        tallies = self._tallies
        windows: dict[tuple[str, int], list[int]] = {}
        for t in tallies:
            for key, counts in t.windows.items():
                row = windows.setdefault(key, [0] * len(counts))
                row[:] = [a + b for a, b in zip(row, counts, strict=True)]
        assured, opportunistic = ServiceStats(0, None, None, 0, 0), ServiceStats(0, None, None, 0, 0)
        for t in tallies:
            assured = _merge_services(assured, t.service_assured)
            opportunistic = _merge_services(opportunistic, t.service_opportunistic)
        first, last = self._first_t, self._last_t
        span = None if first is None or last is None else last - first
        return Metrics(
            events=self._events,
            requests=sum(t.requests for t in tallies),
            first_t=first,
            last_t=last,
            entitled=sum(t.entitled for t in tallies),
            entitled_attained=sum(t.entitled_attained for t in tallies),
            admitted_judged=sum(t.admitted_judged for t in tallies),
            admitted_missed=sum(t.admitted_missed for t in tallies),
            offered_judged=sum(t.offered_judged for t in tallies),
            offered_unmet_count=sum(t.offered_unmet_count for t in tallies),
            max_assured_backlog=self._max_backlog,
            open_requests=sum(t.open_requests for t in tallies),
            utilisation=None if not span else busy / (self.contract.slots * span),
            service_assured=assured,
            service_opportunistic=opportunistic,
            assured_sojourn_p95=sojourn_p95(
                np.concatenate([t.p95_windows for t in tallies] or [np.zeros(0, dtype=np.int64)]),
                np.concatenate([t.p95_sojourns for t in tallies] or [np.zeros(0)]),
            ),
            windows=window_rows(windows, self.contract),
        )
