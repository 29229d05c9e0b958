"""Vectorised metrics for a WF-clean trace: the offline twin of `MetricsAccumulator`."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..columnar import ColumnarTrace
from ..contract import Contract
from ..lifecycle import COMPLETE, REJECT
from .columns import RequestTable
from .metrics import Metrics, ServiceStats, WindowRow
from .p95 import sojourn_p95

__all__ = ["offline_metrics"]

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
    """Slot-seconds: each dispatched request from its dispatch to its end (or to ``now``)."""
    rows = np.flatnonzero(dispatched)
    end_or_now = np.where(has_end[rows], req.t_end[rows], now if now is not None else np.nan)
    end_or_now -= req.t_dispatch[rows]
    return float(np.sum(end_or_now))


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
) -> tuple[WindowRow, ...]:
    """Per (window, tenant) counts: one bincount over (key, the request's 5-bit pattern)."""
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
    # tenants ranked by name, so that key order is the rows' order: (window, tenant)
    names = sorted(trace.tenant_names)
    by_name = np.array([names.index(t) for t in trace.tenant_names] or [0], dtype=np.int64)
    n_ten = max(len(names), 1)
    lo = int(win.min()) if win.size else 0
    keys, inverse, m = _window_keys((win - lo) * n_ten + by_name[ten])
    by_pattern = np.bincount(inverse * 32 + pattern, minlength=m * 32).reshape(m, 32)
    sums = by_pattern @ _PATTERN_COLUMNS
    present = np.flatnonzero(sums[:, 0])
    counts = sums[present].tolist()
    key = keys[present]
    epoch, width = contract.epoch, contract.window
    return tuple(
        WindowRow(names[te], k, epoch + k * width, *c)
        for k, te, c in zip((key // n_ten + lo).tolist(), (key % n_ten).tolist(), counts, strict=True)
    )


def count(mask: npt.NDArray[np.bool_]) -> int:
    """Number of True values (``count_nonzero``: faster than ``sum`` on booleans)."""
    return int(np.count_nonzero(mask))


def offline_metrics(trace: ColumnarTrace, contract: Contract, req: RequestTable, ent: Ent) -> Metrics:
    """DESIGN §3 metrics from columns; equal to the online snapshot at the trace's end."""
    n = len(trace)
    arrived = req.arrive_row >= 0
    now = float(trace.t[-1]) if n else None
    d = req.deadline
    has_end = req.end_kind >= 0
    on_time = (req.end_kind == COMPLETE) & (req.t_end <= d)
    admitted = ~np.isnan(req.t_admit)
    judged = arrived & (has_end | ((now is not None) & (d < (now if now is not None else 0.0))))
    fl = req.floored & arrived
    dispatched = ~np.isnan(req.t_dispatch)
    busy = _busy(req, dispatched, has_end, now)
    done = dispatched & (req.end_kind == COMPLETE)
    ceiling_of = np.array([contract.ceiling(t) for t in trace.tenant_names] or [0.0])
    span = None if now is None else now - float(trace.t[0])
    entitled = count(ent[1])
    attained = count(ent[1] & admitted & on_time)
    fl_judged = fl & judged
    sample = fl_judged & admitted
    adm_j = count(sample)
    adm_m = count(sample & ~on_time)
    off_j = count(fl_judged)
    off_m = count(fl_judged & ~on_time)
    completed = req.end_kind[sample] == COMPLETE
    sojourn = np.where(completed, req.t_end[sample] - req.t_arrive[sample], np.inf)
    done_a = np.flatnonzero(done & req.floored)
    done_o = np.flatnonzero(done & ~req.floored)
    return Metrics(
        events=n,
        requests=count(arrived),
        first_t=float(trace.t[0]) if n else None,
        last_t=now,
        entitled=entitled,
        entitled_attained=attained,
        admitted_judged=adm_j,
        admitted_missed=adm_m,
        offered_judged=off_j,
        offered_unmet_count=off_m,
        max_assured_backlog=_backlog(req) if n else 0,
        open_requests=count(arrived & ~judged),
        utilisation=None if not span else busy / (contract.slots * span),
        service_assured=_services(req, done_a, ceiling_of),
        service_opportunistic=_services(req, done_o, ceiling_of),
        assured_sojourn_p95=sojourn_p95(ent[0][sample], sojourn),
        windows=_windows(trace, contract, req, ent, on_time) if n else (),
    )
