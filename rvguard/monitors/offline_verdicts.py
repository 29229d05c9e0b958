"""Vectorised verdicts for a WF-clean trace: the offline half of AF, SF, DR and ND.

Each function selects the violating requests with array expressions that
mirror the automaton's guards (same float operations, so the same answers),
then builds the `Violation` values with the automaton's own detail and
context functions on an `Instance` holding the request's facts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ..contract import Contract
from ..events import Event
from ..io.columnar import ColumnarTrace
from ..verdict import Violation
from . import af, dr, sf
from .automaton import Instance, TimedAutomaton
from .offline import COMPLETE, DROP, FAIL, REJECT, RequestTable

__all__ = ["offline_violations"]

I64 = npt.NDArray[np.int64]
Ent = tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.float64]]


class _Rows:
    """The rows of a request: in a WF-clean trace, at most its arrive, admit, dispatch and end."""

    def __init__(self, trace: ColumnarTrace, req: RequestTable) -> None:
        self.trace = trace
        self.req = req

    def of(self, r: int) -> I64:
        req = self.req
        rows = [int(req.arrive_row[r]), int(req.admit_row[r]), int(req.dispatch_row[r]), int(req.end_row[r])]
        return np.array(sorted(i for i in rows if i >= 0), dtype=np.int64)

    def events(self, r: int, keep: Callable[..., npt.NDArray[np.bool_]] | None = None) -> tuple[Event, ...]:
        rows = self.of(r)
        if keep is not None:
            rows = rows[keep(rows)]
        return tuple(self.trace.event(int(i)) for i in rows)


def _instance(trace: ColumnarTrace, req: RequestTable, ent: Ent, r: int) -> Instance:
    inst = Instance(trace.rid_names[r], 0)
    inst.tenant = trace.tenant_names[int(req.tenant[r])]
    inst.t_arrive = float(req.t_arrive[r])
    inst.deadline = float(req.deadline[r])
    inst.lower = float(req.lower[r])
    upper = float(req.upper[r])
    inst.upper = None if np.isnan(upper) else upper
    inst.floored = bool(req.floored[r])
    inst.weight = float(req.weight[r])
    inst.window, inst.entitled, inst.rank, inst.used = (
        int(ent[0][r]),
        bool(ent[1][r]),
        int(ent[2][r]),
        float(ent[3][r]),
    )
    return inst


def _violation(
    auto: TimedAutomaton,
    inst: Instance,
    t: float,
    witness: tuple[Event, ...],
    detail: Callable[[Instance, Event | None, float], str],
    trigger: Event | None,
) -> Violation:
    ctx = auto.context(inst) if auto.context else {}
    return Violation(auto.name, inst.rid, t, witness, detail(inst, trigger, t), ctx)


def _af(trace: ColumnarTrace, req: RequestTable, ent: Ent, rows: _Rows) -> list[Violation]:
    out = []
    for r in np.flatnonzero(ent[1] & (req.end_kind == REJECT)).tolist():
        inst = _instance(trace, req, ent, r)
        witness = rows.events(r)
        out.append(_violation(af.AF, inst, float(req.t_end[r]), witness, af._detail, witness[-1]))
    return out


def _sf(trace: ColumnarTrace, req: RequestTable, ent: Ent, rows: _Rows) -> list[Violation]:
    d = req.deadline
    cand = ent[1] & ~np.isnan(req.t_admit)
    has_end = req.end_kind >= 0
    last_t = float(trace.t[-1])
    on_time = (req.end_kind == COMPLETE) & (req.t_end <= d)
    late_admit = req.t_admit > d
    timer = cand & ~on_time & ((has_end & (req.t_end > d)) | (~has_end & (last_t > d)) | late_admit)
    ended = cand & ~timer & has_end & ((req.end_kind == DROP) | (req.end_kind == FAIL))
    out = []
    for r in np.flatnonzero(timer).tolist():
        inst = _instance(trace, req, ent, r)
        if late_admit[r]:
            admit_row = int(req.admit_row[r])
            witness = rows.events(r, lambda rs, a=admit_row: rs <= a)
        else:
            witness = rows.events(r, lambda rs, dl=float(d[r]): trace.t[rs] <= dl)
        out.append(_violation(sf.SF, inst, float(d[r]), witness, sf._late, None))
    for r in np.flatnonzero(ended).tolist():
        inst = _instance(trace, req, ent, r)
        witness = rows.events(r)
        out.append(_violation(sf.SF, inst, float(req.t_end[r]), witness, sf._ended, witness[-1]))
    return out


def _dr(trace: ColumnarTrace, req: RequestTable, ent: Ent, rows: _Rows) -> list[Violation]:
    bad = (req.end_kind == DROP) & ~(req.t_end + req.lower > req.deadline)
    out = []
    for r in np.flatnonzero(bad).tolist():
        inst = _instance(trace, req, ent, r)
        witness = rows.events(r)
        out.append(_violation(dr.DR, inst, float(req.t_end[r]), witness, dr._not_doomed, witness[-1]))
    return out


def _nd(trace: ColumnarTrace, req: RequestTable, ent: Ent, rows: _Rows) -> list[Violation]:
    dispatched = ~np.isnan(req.t_dispatch)
    bad = dispatched & ~(req.t_dispatch + req.upper <= req.deadline)
    out = []
    for r in np.flatnonzero(bad).tolist():
        inst = _instance(trace, req, ent, r)
        t = float(req.t_dispatch[r])
        dispatch_row = int(req.dispatch_row[r])
        witness = rows.events(r, lambda rs, a=dispatch_row: rs <= a)
        out.append(_violation(dr.ND, inst, t, witness, dr._doomed_dispatch, witness[-1]))
    return out


_JUDGES = {"AF": _af, "SF": _sf, "DR": _dr, "ND": _nd}


def offline_violations(
    trace: ColumnarTrace,
    contract: Contract,
    req: RequestTable,
    ent: Ent,
    names: set[str],
) -> list[Violation]:
    """All violations of the named built-in properties (WF is clean on this path)."""
    if len(trace) == 0:
        return []
    rows = _Rows(trace, req)
    out: list[Violation] = []
    for name, judge in _JUDGES.items():
        if name in names:
            out.extend(judge(trace, req, ent, rows))
    return out
