"""Vectorised metrics for a WF-clean trace: the offline twin of `MetricsAccumulator`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..columnar import ColumnarTrace
from ..contract import Contract
from ..lifecycle import COMPLETE, REJECT
from .columns import RequestTable
from .metrics import Metrics, ServiceStats, WindowRow
from .p95 import sojourn_p95

__all__ = ["Tally", "offline_metrics", "request_tally", "window_rows"]

Ent = tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.float64]]


def _services(
    req: RequestTable, done: npt.NDArray[np.int64], ceiling_of: npt.NDArray[np.float64]
) -> ServiceStats:
    """Observed services (complete - dispatch) of the ``done`` requests, against L and the ceiling."""
    if done.size == 0:
        return ServiceStats(0, None, None, 0, 0)
    s = req.t_end[done] - req.t_dispatch[done]
    below = int(np.count_nonzero(s < req.lower[done]))
    above = int(np.count_nonzero(s > ceiling_of[req.tenant[done]]))
    return ServiceStats(int(s.size), float(s.min()), float(s.max()), below, above)


def _busy(
    req: RequestTable, dispatched: npt.NDArray[np.bool_], has_end: npt.NDArray[np.bool_], now: float | None
) -> float:
    """Slot-seconds: each dispatched request from its dispatch to its end (or to ``now``).

    Summed as the online accumulator sums it, so that both give the same float: the ended
    requests' terms left to right in the order of their terminal rows, then the open ones' to
    ``now`` in arrival order (`numpy.add.accumulate` adds strictly left to right; ``numpy.sum``
    would pair the terms and round differently).
    """
    ended = np.flatnonzero(dispatched & has_end)
    ended = ended[np.argsort(req.end_row[ended], kind="stable")]
    terms = [np.zeros(1), req.t_end[ended] - req.t_dispatch[ended]]
    if now is not None:
        live = np.flatnonzero(dispatched & ~has_end)
        live = live[np.argsort(req.arrive_row[live], kind="stable")]
        terms.append(now - req.t_dispatch[live])
    return float(np.add.accumulate(np.concatenate(terms))[-1])


def _backlog(req: RequestTable) -> int:
    """Max assured backlog: +1 at each admit of a floored request, -1 at its end (by row)."""
    adm = req.floored & (req.admit_row >= 0)
    ends = req.end_row[adm & (req.end_row >= 0)]
    rows = np.concatenate((req.admit_row[adm], ends))
    step = np.concatenate((np.ones(int(adm.sum()), dtype=np.int64), np.full(ends.size, -1, dtype=np.int64)))
    return int(max(0, np.cumsum(step[np.argsort(rows, kind="stable")]).max(initial=0)))


def _window_keys(flat: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """(keys, index of each element's key, number of keys): dense when the key range is small."""
    span = int(flat.max()) + 1 if flat.size else 0
    if span <= 4 * flat.size + 1024:
        return np.arange(span, dtype=np.int64), flat, span
    keys, inverse = np.unique(flat, return_inverse=True)
    return keys, inverse.reshape(-1), int(keys.size)


#: which window columns (offered, entitled, admitted, rejected, on_time, missed) each
#: 5-bit request pattern (entitled, admitted, rejected, on_time, missed) counts in
_PATTERN_COLUMNS = np.array([[1, *((p >> b) & 1 for b in range(5))] for p in range(32)], dtype=np.int64)


def _windows(
    trace: ColumnarTrace, contract: Contract, req: RequestTable, ent: Ent, on_time: npt.NDArray[np.bool_]
) -> dict[tuple[str, int], list[int]]:
    """Per (tenant, window) counts: one bincount over (key, the request's 5-bit pattern)."""
    arrived = req.arrive_row >= 0
    every = bool(arrived.all())
    win = ent[0] if every else ent[0][arrived]
    ten = req.tenant if every else req.tenant[arrived]
    end_kind = req.end_kind if every else req.end_kind[arrived]
    on = on_time if every else on_time[arrived]
    pattern = (
        (ent[1] if every else ent[1][arrived]).astype(np.int64)
        | (~np.isnan(req.t_admit if every else req.t_admit[arrived])) << 1
        | (end_kind == REJECT) << 2
        | on << 3
        | ((end_kind >= 0) & ~on) << 4
    )
    names = trace.tenant_names
    n_ten = max(len(names), 1)
    lo = int(win.min()) if win.size else 0
    keys, inverse, m = _window_keys((win - lo) * n_ten + ten)
    by_pattern = np.bincount(inverse * 32 + pattern, minlength=m * 32).reshape(m, 32)
    sums = by_pattern @ _PATTERN_COLUMNS
    present = np.flatnonzero(sums[:, 0])
    key = keys[present]
    return {
        (names[te], k): c
        for k, te, c in zip(
            (key // n_ten + lo).tolist(), (key % n_ten).tolist(), sums[present].tolist(), strict=True
        )
    }


def count(mask: npt.NDArray[np.bool_]) -> int:
    """Number of True values (``count_nonzero``: faster than ``sum`` on booleans)."""
    return int(np.count_nonzero(mask))


@dataclass(frozen=True)
class Tally:
    """The metrics that are sums over requests: what the requests of any subset add up to.

    A partitioned check (`rvguard.monitors.fold`) tallies disjoint sets of requests
    apart and merges them; `offline_metrics` tallies every request at once.
    ``windows`` maps (tenant, window) to the `WindowRow` counts; ``p95_windows`` and
    ``p95_sojourns`` are the P95 sample (order does not matter to `sojourn_p95`).
    """

    requests: int
    entitled: int
    entitled_attained: int
    admitted_judged: int
    admitted_missed: int
    offered_judged: int
    offered_unmet_count: int
    open_requests: int
    service_assured: ServiceStats
    service_opportunistic: ServiceStats
    windows: dict[tuple[str, int], list[int]]
    p95_windows: npt.NDArray[np.int64]
    p95_sojourns: npt.NDArray[np.float64]


def request_tally(
    trace: ColumnarTrace, contract: Contract, req: RequestTable, ent: Ent, now: float | None
) -> Tally:
    """The request sums of the requests that arrive in ``trace``, judged at time ``now``."""
    arrived = req.arrive_row >= 0
    d = req.deadline
    has_end = req.end_kind >= 0
    on_time = (req.end_kind == COMPLETE) & (req.t_end <= d)
    admitted = ~np.isnan(req.t_admit)
    judged = arrived & (has_end | ((now is not None) & (d < (now if now is not None else 0.0))))
    fl = req.floored & arrived
    dispatched = ~np.isnan(req.t_dispatch)
    done = dispatched & (req.end_kind == COMPLETE)
    ceiling_of = np.array([contract.ceiling(t) for t in trace.tenant_names] or [0.0])
    fl_judged = fl & judged
    sample = fl_judged & admitted
    completed = req.end_kind[sample] == COMPLETE
    entitled = ent[1] & arrived  # a subset's table (partitions) also has rows for others' rids
    return Tally(
        requests=count(arrived),
        entitled=count(entitled),
        entitled_attained=count(entitled & admitted & on_time),
        admitted_judged=count(sample),
        admitted_missed=count(sample & ~on_time),
        offered_judged=count(fl_judged),
        offered_unmet_count=count(fl_judged & ~on_time),
        open_requests=count(arrived & ~judged),
        service_assured=_services(req, np.flatnonzero(done & req.floored), ceiling_of),
        service_opportunistic=_services(req, np.flatnonzero(done & ~req.floored), ceiling_of),
        windows=_windows(trace, contract, req, ent, on_time) if len(trace) else {},
        p95_windows=ent[0][sample],
        p95_sojourns=np.where(completed, req.t_end[sample] - req.t_arrive[sample], np.inf),
    )


def window_rows(windows: dict[tuple[str, int], list[int]], contract: Contract) -> tuple[WindowRow, ...]:
    """The ``windows`` metric: one row per (tenant, window) counted, by window then tenant."""
    epoch, width = contract.epoch, contract.window
    return tuple(
        WindowRow(tenant, k, epoch + k * width, *counts)
        for (tenant, k), counts in sorted(windows.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    )


def offline_metrics(trace: ColumnarTrace, contract: Contract, req: RequestTable, ent: Ent) -> Metrics:
    """DESIGN §3 metrics from columns; equal to the online snapshot at the trace's end."""
    n = len(trace)
    now = float(trace.t[-1]) if n else None
    tally = request_tally(trace, contract, req, ent, now)
    dispatched = ~np.isnan(req.t_dispatch)
    busy = _busy(req, dispatched, req.end_kind >= 0, now)
    span = None if now is None else now - float(trace.t[0])
    return Metrics(
        events=n,
        requests=tally.requests,
        first_t=float(trace.t[0]) if n else None,
        last_t=now,
        entitled=tally.entitled,
        entitled_attained=tally.entitled_attained,
        admitted_judged=tally.admitted_judged,
        admitted_missed=tally.admitted_missed,
        offered_judged=tally.offered_judged,
        offered_unmet_count=tally.offered_unmet_count,
        max_assured_backlog=_backlog(req) if n else 0,
        open_requests=tally.open_requests,
        utilisation=None if not span else busy / (contract.slots * span),
        service_assured=tally.service_assured,
        service_opportunistic=tally.service_opportunistic,
        assured_sojourn_p95=sojourn_p95(tally.p95_windows, tally.p95_sojourns),
        windows=window_rows(tally.windows, contract),
    )
