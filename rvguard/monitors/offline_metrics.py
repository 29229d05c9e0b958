"""Vectorised metrics for a WF-clean trace: the offline twin of `MetricsAccumulator`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..contract import Contract
from ..io.columnar import ColumnarTrace
from .metrics import Metrics, ServiceStats, WindowRow, ratio
from .p95 import sojourn_p95

if TYPE_CHECKING:
    from .offline import RequestTable

__all__ = ["offline_metrics"]

Ent = tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.float64]]
_REJECT, _DISPATCH, _COMPLETE = 2, 3, 4


def _services(
    s: npt.NDArray[np.float64], lower: npt.NDArray[np.float64], ceiling: npt.NDArray[np.float64]
) -> ServiceStats:
    if s.size == 0:
        return ServiceStats(0, None, None, 0, 0)
    return ServiceStats(
        int(s.size), float(s.min()), float(s.max()), int((s < lower).sum()), int((s > ceiling).sum())
    )


def _backlog(trace: ColumnarTrace, req: RequestTable) -> int:
    rid = trace.rid
    assured = req.floored[rid]
    admitted = ~np.isnan(req.t_admit[rid])
    is_end = (trace.kind >= _REJECT) & (trace.kind != _DISPATCH)
    step = np.where(assured & (trace.kind == 1), 1, 0) - np.where(assured & admitted & is_end, 1, 0)
    return int(max(0, np.cumsum(step).max(initial=0)))


def _windows(
    trace: ColumnarTrace, contract: Contract, req: RequestTable, ent: Ent, on_time: npt.NDArray[np.bool_]
) -> tuple[WindowRow, ...]:
    arrived = req.arrive_row >= 0
    win = ent[0][arrived]
    ten = req.tenant[arrived]
    cols = np.stack(
        [
            np.ones(win.size, dtype=np.int64),
            ent[1][arrived],
            ~np.isnan(req.t_admit[arrived]),
            req.end_kind[arrived] == _REJECT,
            on_time[arrived],
            (req.end_kind[arrived] >= 0) & ~on_time[arrived],
        ],
        axis=1,
    ).astype(np.int64)
    n_ten = max(len(trace.tenant_names), 1)
    lo = int(win.min()) if win.size else 0
    flat = (win - lo) * n_ten + ten
    keys, inverse = np.unique(flat, return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = np.stack([np.bincount(inverse, weights=cols[:, j], minlength=keys.size) for j in range(6)], axis=1)
    sums = sums.astype(np.int64)
    keys = np.stack([keys // n_ten + lo, keys % n_ten], axis=1)
    rows = [
        WindowRow(
            trace.tenant_names[int(te)],
            int(k),
            contract.epoch + int(k) * contract.window,
            *(int(x) for x in sums[i]),
        )
        for i, (k, te) in enumerate(keys)
    ]
    return tuple(sorted(rows, key=lambda w: (w.window, w.tenant)))


def offline_metrics(trace: ColumnarTrace, contract: Contract, req: RequestTable, ent: Ent) -> Metrics:
    """DESIGN §3 metrics from columns; equal to the online snapshot at the trace's end."""
    n = len(trace)
    arrived = req.arrive_row >= 0
    now = float(trace.t[-1]) if n else None
    d = req.deadline
    has_end = req.end_kind >= 0
    on_time = (req.end_kind == _COMPLETE) & (req.t_end <= d)
    admitted = ~np.isnan(req.t_admit)
    judged = arrived & (has_end | ((now is not None) & (d < (now if now is not None else 0.0))))
    fl = req.floored & arrived
    dispatched = ~np.isnan(req.t_dispatch)
    end_or_now = np.where(has_end, req.t_end, now if now is not None else np.nan)
    busy = float(np.sum(end_or_now[dispatched] - req.t_dispatch[dispatched]))
    done = dispatched & (req.end_kind == _COMPLETE)
    s = req.t_end - req.t_dispatch
    ceilings = np.array([contract.ceiling(t) for t in trace.tenant_names] or [0.0])[np.maximum(req.tenant, 0)]
    span = None if now is None else now - float(trace.t[0])
    entitled = int(ent[1].sum())
    attained = int((ent[1] & admitted & on_time).sum())
    adm_j = int((fl & admitted & judged).sum())
    adm_m = int((fl & admitted & judged & ~on_time).sum())
    off_j = int((fl & judged).sum())
    off_m = int((fl & judged & ~on_time).sum())
    sample = fl & admitted & judged
    completed = req.end_kind[sample] == _COMPLETE
    sojourn = np.where(completed, req.t_end[sample] - req.t_arrive[sample], np.inf)
    return Metrics(
        events=n,
        requests=int(arrived.sum()),
        first_t=float(trace.t[0]) if n else None,
        last_t=now,
        entitled=entitled,
        entitled_attained=attained,
        floor_attainment=ratio(attained, entitled),
        admitted_judged=adm_j,
        admitted_missed=adm_m,
        admitted_miss=ratio(adm_m, adm_j),
        offered_judged=off_j,
        offered_unmet_count=off_m,
        offered_unmet=ratio(off_m, off_j),
        max_assured_backlog=_backlog(trace, req) if n else 0,
        open_requests=int((arrived & ~judged).sum()),
        utilisation=None if not span else busy / (contract.slots * span),
        service_assured=_services(
            s[done & req.floored], req.lower[done & req.floored], ceilings[done & req.floored]
        ),
        service_opportunistic=_services(
            s[done & ~req.floored], req.lower[done & ~req.floored], ceilings[done & ~req.floored]
        ),
        assured_sojourn_p95=sojourn_p95(ent[0][sample], sojourn),
        windows=_windows(trace, contract, req, ent, on_time) if n else (),
    )
