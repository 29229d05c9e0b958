"""The offline checker: whole-trace verdicts and metrics from columns.

For a trace whose protocol (WF) is clean, the built-in properties are
judged with numpy over per-request columns: O(n log n) for the grouping
sorts, no Python loop per event. A trace that breaks WF, or a set of
properties with a user-defined automaton, is judged by replaying the rows
through the online `Monitor` (with no horizon on finished rids), so both
paths give the same verdicts on every trace; tests check the difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..contract import Contract, CreditMode, Entitlement
from ..errors import TraceOrderError, UnknownTenantError
from ..events import EventKind
from ..io.columnar import ColumnarTrace
from ..verdict import Violation
from . import wf
from .automaton import TimedAutomaton
from .metrics import Metrics
from .monitor import BUILTIN, DEFAULT_PROPERTIES, Monitor, resolve_properties
from .offline_metrics import offline_metrics

__all__ = ["OfflineResult", "RequestTable", "check_offline", "entitlement_columns", "request_table"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B1 = npt.NDArray[np.bool_]

ARRIVE, ADMIT, REJECT, DISPATCH, COMPLETE, DROP, FAIL = range(7)
# protocol state after an event of each kind: NEW=0, ARRIVED=1, ADMITTED=2, DISPATCHED=3, DONE=4
_STATE_AFTER = np.array([1, 2, 4, 3, 4, 4, 4], dtype=np.int8)
_LEGAL = np.zeros((5, 7), dtype=bool)
for (_loc, _kind), _edges in wf.TRANSITIONS.items():
    _LEGAL[list(wf.Loc).index(wf.Loc(_loc)), list(EventKind).index(_kind)] = True


@dataclass(frozen=True)
class OfflineResult:
    """Verdicts and metrics of a whole trace; ``vectorised`` says which path ran."""

    violations: list[Violation]
    metrics: Metrics
    vectorised: bool


@dataclass(frozen=True)
class RequestTable:
    """One row per request (indexed by rid code): its facts and event times (nan = none)."""

    arrive_row: I64
    tenant: I64
    t_arrive: F64
    deadline: F64
    lower: F64
    upper: F64
    weight: F64
    floored: B1
    t_admit: F64
    t_dispatch: F64
    t_end: F64
    end_kind: I64
    end_row: I64
    admit_row: I64
    dispatch_row: I64


def _check_order(trace: ColumnarTrace, path: str) -> None:
    if len(trace) > 1:
        back = np.flatnonzero(np.diff(trace.t) < 0)
        if back.size:
            i = int(back[0]) + 1
            raise TraceOrderError(
                f"time {trace.t[i]!r} is before the previous event's {trace.t[i - 1]!r}",
                path=path,
                line=int(trace.line[i]),
                field="t",
            )


def _check_tenants(trace: ColumnarTrace, contract: Contract, path: str) -> None:
    for code, name in enumerate(trace.tenant_names):
        if name not in contract.tenants:
            row = int(np.flatnonzero(trace.tenant == code)[0])
            raise UnknownTenantError(
                f"tenant {name!r} is not in the contract ({', '.join(contract.tenants)})",
                path=path,
                line=int(trace.line[row]),
                field="tenant",
            )


def rid_order(trace: ColumnarTrace) -> I64:
    """Row indices grouped by rid, trace order within a rid (a stable sort, done once)."""
    return np.argsort(trace.rid, kind="stable")


def protocol_is_clean(trace: ColumnarTrace, order: I64 | None = None) -> bool:
    """True when every row is legal under WF (vectorised: previous kind of the same rid)."""
    n = len(trace)
    if n == 0:
        return True
    if order is None:
        order = rid_order(trace)
    rid_sorted = trace.rid[order]
    kind_sorted = trace.kind[order].astype(np.int64)
    prev_state = np.zeros(n, dtype=np.int64)
    same = np.empty(n, dtype=bool)
    same[0] = False
    same[1:] = rid_sorted[1:] == rid_sorted[:-1]
    prev_state[1:] = np.where(same[1:], _STATE_AFTER[kind_sorted[:-1]], 0)
    return bool(_LEGAL[prev_state, kind_sorted].all())


def request_table(trace: ColumnarTrace, contract: Contract) -> RequestTable:
    """Per-request columns of a WF-clean trace (every rid's first row is its arrive)."""
    r = len(trace.rid_names)
    arrive = np.flatnonzero(trace.kind == ARRIVE)
    rid_a = trace.rid[arrive]
    names = trace.tenant_names
    floors = np.array([contract.tenants[n].floor for n in names], dtype=np.float64)
    rel = np.array([contract.tenants[n].deadline for n in names], dtype=np.float64)
    tenant = np.full(r, -1, dtype=np.int64)
    tenant[rid_a] = trace.tenant[arrive]
    t_arrive = np.full(r, np.nan)
    t_arrive[rid_a] = trace.t[arrive]
    explicit = trace.deadline[arrive]
    deadline = np.full(r, np.nan)
    deadline[rid_a] = np.where(np.isnan(explicit), trace.t[arrive] + rel[trace.tenant[arrive]], explicit)
    maxtok = trace.max_tokens[arrive]
    capped = np.where(maxtok < 0, contract.output_cap, np.minimum(maxtok, contract.output_cap))
    svc = contract.service
    lower = np.full(r, np.nan)
    lower[rid_a] = svc.lower.base + svc.lower.per_token * capped.astype(np.float64)
    upper = np.full(r, np.nan)
    if svc.upper is not None:
        upper[rid_a] = svc.upper.base + svc.upper.per_token * capped.astype(np.float64)
    weight = np.ones(r)
    if contract.credit is CreditMode.TOKENS:
        prompt = np.maximum(trace.prompt_tokens[arrive], 0).astype(np.float64)
        w = contract.token_weights
        weight[rid_a] = w.prompt * prompt + w.output * capped.astype(np.float64)
    times = {k: np.full(r, np.nan) for k in (ADMIT, DISPATCH)}
    rows = {k: np.full(r, -1, dtype=np.int64) for k in (ADMIT, DISPATCH)}
    for k in (ADMIT, DISPATCH):
        idx = np.flatnonzero(trace.kind == k)
        times[k][trace.rid[idx]] = trace.t[idx]
        rows[k][trace.rid[idx]] = idx
    end = np.flatnonzero((trace.kind >= REJECT) & (trace.kind != DISPATCH))
    t_end = np.full(r, np.nan)
    t_end[trace.rid[end]] = trace.t[end]
    end_kind = np.full(r, -1, dtype=np.int64)
    end_kind[trace.rid[end]] = trace.kind[end]
    end_row = np.full(r, -1, dtype=np.int64)
    end_row[trace.rid[end]] = end
    arrive_row = np.full(r, -1, dtype=np.int64)
    arrive_row[rid_a] = arrive
    return RequestTable(
        arrive_row=arrive_row,
        tenant=tenant,
        t_arrive=t_arrive,
        deadline=deadline,
        lower=lower,
        upper=upper,
        weight=weight,
        floored=floors[np.maximum(tenant, 0)] > 0,
        t_admit=times[ADMIT],
        t_dispatch=times[DISPATCH],
        t_end=t_end,
        end_kind=end_kind,
        end_row=end_row,
        admit_row=rows[ADMIT],
        dispatch_row=rows[DISPATCH],
    )


def window_indices(t: F64, origin: float, window: float) -> I64:
    """Vectorised `rvguard.contract.window_index`, exact at boundaries in the same way."""
    k = np.floor((t - origin) / window).astype(np.int64)
    k = np.where(origin + (k + 1) * window <= t, k + 1, k)
    return np.where(origin + k * window > t, k - 1, k)


def entitlement_columns(
    req: RequestTable, trace: ColumnarTrace, contract: Contract, *, origin: float | None = None
) -> tuple[I64, B1, I64, F64]:
    """Per request: window, entitled, rank, credit used (same prefix rule as `Entitlement`)."""
    o = contract.epoch if origin is None else origin
    r = req.tenant.shape[0]
    win = np.zeros(r, dtype=np.int64)
    entitled = np.zeros(r, dtype=bool)
    rank = np.zeros(r, dtype=np.int64)
    used = np.zeros(r)
    rids = trace.rid[req.arrive_row[req.arrive_row >= 0]]
    rids = rids[np.argsort(req.arrive_row[rids], kind="stable")]
    if rids.size == 0:
        return win, entitled, rank, used
    weights = req.weight[rids]
    if not np.all(weights == np.round(weights)):
        return _entitlement_loop(req, trace, contract, rids, o)
    names = trace.tenant_names
    floors = np.array([contract.tenants[n].floor for n in names], dtype=np.float64)
    k = window_indices(req.t_arrive[rids], o, contract.window)
    ten = req.tenant[rids]
    order = np.lexsort((np.arange(rids.size), k, ten))
    ks, ts, ws = k[order], ten[order], weights[order]
    start = np.ones(rids.size, dtype=bool)
    start[1:] = (ks[1:] != ks[:-1]) | (ts[1:] != ts[:-1])
    group = np.cumsum(start) - 1
    pos = np.arange(rids.size)
    first = pos[start][group]
    cs = np.cumsum(ws)
    base = np.concatenate(([0.0], cs))[first]
    used_s = cs - base
    rank_s = pos - first + 1
    out = rids[order]
    win[out] = ks
    rank[out] = rank_s
    used[out] = used_s
    fl = floors[ts]
    entitled[out] = (fl > 0) & (used_s <= fl)
    return win, entitled, rank, used


def _entitlement_loop(
    req: RequestTable, trace: ColumnarTrace, contract: Contract, rids: I64, origin: float
) -> tuple[I64, B1, I64, F64]:
    """Fractional token weights: sum in arrival order exactly as the online path does."""
    r = req.tenant.shape[0]
    win = np.zeros(r, dtype=np.int64)
    entitled = np.zeros(r, dtype=bool)
    rank = np.zeros(r, dtype=np.int64)
    used = np.zeros(r)
    ent = Entitlement(contract, origin=origin)
    for rid in rids.tolist():
        name = trace.tenant_names[int(req.tenant[rid])]
        win[rid], entitled[rid], rank[rid], used[rid] = ent.arrive(
            name, float(req.t_arrive[rid]), float(req.weight[rid])
        )
    return win, entitled, rank, used


def check_offline(
    trace: ColumnarTrace,
    contract: Contract,
    properties: Sequence[str | TimedAutomaton] = DEFAULT_PROPERTIES,
    *,
    path: str = "<memory>",
) -> OfflineResult:
    """Judge a whole trace; vectorised when its protocol is clean and properties are built-in.

    Raises:
        TraceOrderError: a timestamp goes backwards (with its line).
        UnknownTenantError: an arrive names a tenant outside the contract.
        SpecError: unknown properties, or ND without U.
    """
    autos = resolve_properties(contract, properties)
    _check_order(trace, path)
    _check_tenants(trace, contract, path)
    builtin = all(BUILTIN.get(a.name) is a for a in autos)
    order = rid_order(trace)
    if not builtin or not protocol_is_clean(trace, order):
        return _replay(trace, contract, properties)
    from .offline_verdicts import offline_violations

    req = request_table(trace, contract)
    ent = entitlement_columns(req, trace, contract)
    names = {a.name for a in autos}
    violations = offline_violations(trace, contract, req, ent, names, order=order)
    metrics = offline_metrics(trace, contract, req, ent)
    return OfflineResult(sorted(violations, key=lambda v: v.key), metrics, vectorised=True)


def _replay(
    trace: ColumnarTrace, contract: Contract, properties: Sequence[str | TimedAutomaton]
) -> OfflineResult:
    monitor = Monitor(contract, properties, retain_finished=max(len(trace), 1))
    for ev in trace.events():
        monitor.feed(ev)
    return OfflineResult(monitor.violations(), monitor.summary(), vectorised=False)
