"""Vectorised verdicts for a WF-clean trace: the offline half of AF, SF, DR, ND, RB, CAP and PR.

Each function selects the violating requests with array expressions that
mirror the automaton's guards (same float operations, so the same answers),
then builds the `Violation` values with the automaton's own detail and
context functions on an `Instance` holding the request's facts.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ..columnar import BASIS_CODES, ColumnarTrace
from ..contract import Contract
from ..events import Basis, Event, is_client_error
from ..lifecycle import COMPLETE, DROP, FAIL, REJECT
from ..verdict import Violation
from . import af, cap, dr, pr, rb, sf
from .automaton import Instance, TimedAutomaton
from .columns import RequestTable

__all__ = ["offline_violations"]

I64 = npt.NDArray[np.int64]
Ent = tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.float64]]


class _Requests:
    """The facts and witness rows of selected requests, read from the columns in bulk."""

    def __init__(self, trace: ColumnarTrace, req: RequestTable, ent: Ent, now: float) -> None:
        self.trace = trace
        self.req = req
        self.ent = ent
        self.now = now  # the time the trace has reached: deadlines before it are judged

    def instances(self, rs: I64) -> list[Instance]:
        req, ent, trace = self.req, self.ent, self.trace
        tenants = trace.tenant_names
        cols = zip(
            rs.tolist(),
            req.tenant[rs].tolist(),
            req.t_arrive[rs].tolist(),
            req.deadline[rs].tolist(),
            req.lower[rs].tolist(),
            req.upper[rs].tolist(),
            req.floored[rs].tolist(),
            req.weight[rs].tolist(),
            ent[0][rs].tolist(),
            ent[1][rs].tolist(),
            ent[2][rs].tolist(),
            ent[3][rs].tolist(),
            strict=True,
        )
        return [
            Instance(trace.rid_names[r], tenants[te], ta, d, lo, None if math.isnan(up) else up, *facts)
            for r, te, ta, d, lo, up, *facts in cols
        ]

    def rows(self, rs: I64) -> list[list[int]]:
        """Each request's rows in trace order (in a WF-clean trace: arrive, admit, dispatch, end)."""
        req = self.req
        cols = (req.arrive_row[rs], req.admit_row[rs], req.dispatch_row[rs], req.end_row[rs])
        return [[i for i in four if i >= 0] for four in np.stack(cols, axis=1).tolist()]

    def events(self, rows: list[list[int]]) -> list[tuple[Event, ...]]:
        """The events of each row list, built in one pass over the columns."""
        flat = self.trace.events_at([i for rs in rows for i in rs])
        out, at = [], 0
        for rs in rows:
            out.append(tuple(flat[at : at + len(rs)]))
            at += len(rs)
        return out


def _violations(
    auto: TimedAutomaton,
    insts: list[Instance],
    times: list[float],
    witnesses: list[tuple[Event, ...]],
    detail: Callable[[Instance, Event | None, float], str],
    *,
    triggered: bool,
) -> list[Violation]:
    """One violation per instance; ``triggered``: the witness's last event is the bad one."""
    context = auto.context
    return [
        Violation(
            auto.name,
            inst.rid,
            t,
            w,
            detail(inst, w[-1] if triggered else None, t),
            context(inst) if context else {},
        )
        for inst, t, w in zip(insts, times, witnesses, strict=True)
    ]


def _af(reqs: _Requests) -> list[Violation]:
    req, ent, trace = reqs.req, reqs.ent, reqs.trace
    rs = np.flatnonzero(ent[1] & (req.end_kind == REJECT))
    witnesses = reqs.events(reqs.rows(rs))
    out = _violations(
        af.AF, reqs.instances(rs), req.t_end[rs].tolist(), witnesses, af._detail, triggered=True
    )
    admitted = ent[1] & (req.admit_row >= 0)
    basis = np.full(len(admitted), -1, dtype=np.int64)
    basis[admitted] = trace.basis[req.admit_row[admitted]]
    off = np.flatnonzero(admitted & (basis == BASIS_CODES[Basis.DEMOTED]))  # entitled, demoted
    rows = req.admit_row[off]
    witnesses = reqs.events([[int(a), int(b)] for a, b in zip(req.arrive_row[off], rows, strict=True)])
    times = trace.t[rows].tolist()
    return out + _violations(af.AF, reqs.instances(off), times, witnesses, af._detail, triggered=True)


def _af_upper(reqs: _Requests, contract: Contract) -> list[Violation]:
    """AF's upper side: floor credit admitted per (tenant, window), a prefix sum per group in admit
    order; an admit that takes its group past B is reported (exact units, as the monitor counts)."""
    req, ent, trace = reqs.req, reqs.ent, reqs.trace
    admitted = np.flatnonzero(req.admit_row >= 0)
    rs = admitted[trace.basis[req.admit_row[admitted]] == BASIS_CODES[Basis.FLOOR]]
    if not len(rs):
        return []
    rs = rs[np.lexsort((req.admit_row[rs], ent[0][rs], req.tenant[rs]))]  # by group, then admit row
    units = contract.credit_units()
    weights = req.weight_units[rs]
    spent = np.cumsum(weights)
    group = np.flatnonzero(
        np.r_[True, (np.diff(req.tenant[rs]) != 0) | (np.diff(ent[0][rs]) != 0)]
    )  # each group's first position
    starts = np.repeat(group, np.diff(np.r_[group, len(rs)]))
    spent = spent - spent[starts] + weights[starts]  # the group's prefix sum, this admit included
    names = trace.tenant_names
    floors = np.array([units.floors[names[int(te)]] for te in req.tenant[rs].tolist()], dtype=object)
    over = np.flatnonzero(np.array(spent > floors, dtype=bool))
    if not len(over):
        return []
    vs = rs[over]
    insts = reqs.instances(vs)
    for inst, used in zip(insts, spent[over].tolist(), strict=True):
        upper = {"floor_admitted": int(used) / units.scale, "floor": units.floors[inst.tenant] / units.scale}
        inst.vars["af_upper"] = upper
    rows = [
        [i for i in r_rows if i <= a_row]
        for r_rows, a_row in zip(reqs.rows(vs), req.admit_row[vs].tolist(), strict=True)
    ]
    times = req.t_admit[vs].tolist()
    return _violations(af.AF, insts, times, reqs.events(rows), af._over, triggered=True)


def _client_errors(reqs: _Requests) -> npt.NDArray[np.bool_]:
    """Per request: it ended with a ``fail`` whose reason blames the client (SF exempts it)."""
    req, trace = reqs.req, reqs.trace
    ended = req.end_kind == FAIL
    out = np.zeros(len(req.end_kind), dtype=bool)
    rows = req.end_row[ended]
    out[ended] = [is_client_error(trace.reason[i]) for i in rows.tolist()]
    return out


def _sf(reqs: _Requests) -> list[Violation]:
    req, ent, trace = reqs.req, reqs.ent, reqs.trace
    d = req.deadline
    cand = ent[1] & ~np.isnan(req.t_admit)
    has_end = req.end_kind >= 0
    last_t = reqs.now
    on_time = (req.end_kind == COMPLETE) & (req.t_end <= d)
    late_admit = req.t_admit > d
    timer = cand & ~on_time & ((has_end & (req.t_end > d)) | (~has_end & (last_t > d)) | late_admit)
    failed = (req.end_kind == FAIL) & ~_client_errors(reqs)
    ended = cand & ~timer & has_end & ((req.end_kind == DROP) | failed)
    rs = np.flatnonzero(timer)
    deadlines = d[rs].tolist()
    rows = []
    for r_rows, late, admit_row, dl in zip(
        reqs.rows(rs), late_admit[rs].tolist(), req.admit_row[rs].tolist(), deadlines, strict=True
    ):
        # the bad prefix: the events up to the deadline (up to the admit when that came after it)
        times = trace.t[r_rows].tolist()
        rows.append(
            [i for i, ti in zip(r_rows, times, strict=True) if (i <= admit_row if late else ti <= dl)]
        )
    out = _violations(sf.SF, reqs.instances(rs), deadlines, reqs.events(rows), sf._late, triggered=False)
    rs = np.flatnonzero(ended)
    witnesses = reqs.events(reqs.rows(rs))
    out += _violations(
        sf.SF, reqs.instances(rs), req.t_end[rs].tolist(), witnesses, sf._ended, triggered=True
    )
    return out


def _dr(reqs: _Requests) -> list[Violation]:
    req = reqs.req
    rs = np.flatnonzero((req.end_kind == DROP) & ~(req.t_end + req.lower > req.deadline))
    witnesses = reqs.events(reqs.rows(rs))
    return _violations(
        dr.DR, reqs.instances(rs), req.t_end[rs].tolist(), witnesses, dr._not_doomed, triggered=True
    )


def _nd(reqs: _Requests) -> list[Violation]:
    req = reqs.req
    dispatched = ~np.isnan(req.t_dispatch)
    rs = np.flatnonzero(dispatched & ~(req.t_dispatch + req.upper <= req.deadline))
    rows = [
        [i for i in r_rows if i <= d_row]
        for r_rows, d_row in zip(reqs.rows(rs), req.dispatch_row[rs].tolist(), strict=True)
    ]
    times = req.t_dispatch[rs].tolist()
    return _violations(
        dr.ND, reqs.instances(rs), times, reqs.events(rows), dr._doomed_dispatch, triggered=True
    )


def _rb(reqs: _Requests, limit: int) -> list[Violation]:
    """RB: the running count of surplus requests in flight, a cumulative sum over the rows."""
    req, trace = reqs.req, reqs.trace
    admitted = req.admit_row >= 0
    basis = np.full(len(admitted), -1, dtype=np.int64)
    basis[admitted] = trace.basis[req.admit_row[admitted]]
    rs = np.flatnonzero(admitted & (basis != BASIS_CODES[Basis.FLOOR]) & (req.dispatch_row >= 0))
    return _in_flight(reqs, rs, limit, rb.RB, _rb_facts, rb._detail)


def _cap(reqs: _Requests, limit: int) -> list[Violation]:
    """CAP's total (its per-engine clause needs ``route`` rows, which this path never sees): the
    running count of every request in flight, a cumulative sum over the rows."""
    dispatched = np.flatnonzero(reqs.req.dispatch_row >= 0)
    return _in_flight(reqs, dispatched, limit, cap.CAP, _cap_facts, cap._detail)


def _rb_facts(inst: Instance, limit: int, count: int, shown: tuple[str, ...]) -> None:
    inst.vars.update(limit=limit, in_flight=count, holders=shown)


def _cap_facts(inst: Instance, limit: int, count: int, shown: tuple[str, ...]) -> None:
    inst.vars.update(cap_clause="C", cap_limit=limit, cap_in_flight=count, cap_others=shown)


def _in_flight(
    reqs: _Requests,
    rs: I64,
    limit: int,
    auto: TimedAutomaton,
    facts: Callable[[Instance, int, int, tuple[str, ...]], None],
    detail: Callable[[Instance, Event | None, float], str],
) -> list[Violation]:
    """The dispatches of requests ``rs`` that find ``limit`` of them already holding a slot."""
    req, trace = reqs.req, reqs.trace
    starts, ends = req.dispatch_row[rs], req.end_row[rs]
    n = len(trace)
    count = np.cumsum(np.bincount(starts, minlength=n) - np.bincount(ends[ends >= 0], minlength=n))
    over = count[starts] > limit  # with itself, more than the limit hold a slot
    vs = rs[over]
    if not len(vs):
        return []
    insts = reqs.instances(vs)
    shown = _holders(trace, rs, starts, ends, set(starts[over].tolist()))
    for inst, row in zip(insts, starts[over].tolist(), strict=True):
        facts(inst, limit, int(count[row]), shown[row])
    rows = [
        [i for i in r_rows if i <= d_row]
        for r_rows, d_row in zip(reqs.rows(vs), req.dispatch_row[vs].tolist(), strict=True)
    ]
    times = req.t_dispatch[vs].tolist()
    return _violations(auto, insts, times, reqs.events(rows), detail, triggered=True)


def _holders(
    trace: ColumnarTrace, rs: I64, starts: I64, ends: I64, at: set[int]
) -> dict[int, tuple[str, ...]]:
    """The holders among ``rs`` just before each dispatch row in ``at`` (as `rb.holders` names them):
    one sweep over their dispatch and end rows, run only when RB or CAP is violated."""
    moves = sorted(
        [(s, r, True) for s, r in zip(starts.tolist(), rs.tolist(), strict=True)]
        + [(e, r, False) for e, r in zip(ends.tolist(), rs.tolist(), strict=True) if e >= 0]
    )
    holding: dict[str, None] = {}
    out: dict[int, tuple[str, ...]] = {}
    for row, r, start in moves:
        rid = trace.rid_names[r]
        if not start:
            del holding[rid]
            continue
        if row in at:
            out[row] = rb.holders(holding)
        holding[rid] = None
    return out


def _pr(reqs: _Requests) -> list[Violation]:
    """PR on a trace of DESIGN §2's kinds alone: a protected request that the guard failed."""
    req, ent, trace = reqs.req, reqs.ent, reqs.trace
    admitted = req.admit_row >= 0
    floor = np.zeros(len(admitted), dtype=bool)
    floor[admitted] = trace.basis[req.admit_row[admitted]] == BASIS_CODES[Basis.FLOOR]
    failed = np.flatnonzero((req.end_kind == FAIL) & (ent[1] | floor))
    rs = np.array(
        [r for r in failed.tolist() if pr.guard_caused(trace.reason[int(req.end_row[r])])], dtype=np.int64
    )
    witnesses = reqs.events(reqs.rows(rs))
    return _violations(
        pr.PR, reqs.instances(rs), req.t_end[rs].tolist(), witnesses, pr._failed, triggered=True
    )


def _none(reqs: _Requests) -> list[Violation]:
    """RL, EV, ER, FR on a trace of DESIGN §2's kinds alone: with no demote, evict or route, nothing to judge
    (a trace with any DESIGN §10 row is judged by replay, `rvguard.monitors.columns.VECTORISED_KINDS`)."""
    return []


_JUDGES = {
    "AF": _af,
    "SF": _sf,
    "DR": _dr,
    "ND": _nd,
    "PR": _pr,
    "RL": _none,
    "EV": _none,
    "ER": _none,
    "FR": _none,
}


def offline_violations(
    trace: ColumnarTrace,
    contract: Contract,
    req: RequestTable,
    ent: Ent,
    names: set[str],
    *,
    now: float | None = None,
) -> list[Violation]:
    """All violations of the named built-in properties (WF is clean on this path).

    ``now`` is the time the trace has reached (default: its last event's): a
    partitioned check judges a subset of the requests at the whole trace's end.
    """
    if len(trace) == 0:
        return []
    reqs = _Requests(trace, req, ent, float(trace.t[-1]) if now is None else now)
    out: list[Violation] = []
    for name, judge in _JUDGES.items():
        if name in names:
            out.extend(judge(reqs))
    if "AF" in names:
        out.extend(_af_upper(reqs, contract))
    if "RB" in names:
        out.extend(_rb(reqs, contract.slots - contract.reserve))
    if "CAP" in names:
        out.extend(_cap(reqs, contract.slots))
    return out
