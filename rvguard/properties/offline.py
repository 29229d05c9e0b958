"""The offline checker compiled from property tables: a whole trace judged over numpy columns.

Theory of operation
-------------------
The trace becomes columns (one row per event): its request, the row's
position among its request's events (its *step*), kind code, time, the
event facts and, per request, the facts of its arrival. A table is then
judged in two passes:

1. **Counters other than the request's** (tenant, tenant-window, shared)
   by prefix sums, when the table is *separable*: every such update is an
   increment (``+=``/``-=``) whose value reads no counter, and the edges of
   one (location, kind) agree on those updates and lead to locations that
   behave alike for them. Then the increments depend only on each request's
   kinds, not on any guard: a coarsest partition of the locations (Moore's
   refinement) gives each request's path of classes, each row its
   increment, and a grouped exclusive cumsum the counter's value *before*
   each row, as the online monitor reads it. A table that is not separable
   (an assignment like ``last = t`` to a tenant counter, a guard-chosen
   increment) is replayed on the online engine instead (`Offline.paths`
   says which).
2. **Locations by steps**: for step j = 0, 1, …, the rows that are their
   request's j-th event are judged at once: each edge's guard is evaluated
   as a numpy expression over those rows (`rvguard.properties.guards.evaluate`),
   the first edge that holds is taken, request counters are updated as arrays.

The lifecycle table WF runs first, the same way, and the events it refuses
are removed before the other tables are judged, as online. The violations
equal the online monitor's (tests/properties/test_offline.py holds them to
it on random traces): same property, request, time, witness and detail.

Cost: O(n log n) for n events plus O(steps × edges) numpy passes per table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..contract import Contract
from ..errors import TraceOrderError
from ..events import Admit, Arrive, Basis, Event, Fail
from ..facts import FactsCache
from ..lifecycle import CODE, NODE_CODES
from ..verdict import Violation
from .bound import floor_refused
from .engine import facts_of
from .guards import evaluate
from .skeleton import ClassMove, Skeleton, skeleton
from .table import EVENT_NAMES, FACT_NAMES, GUARD_ENDS, Edge, PropertyTable, Scope

__all__ = ["Offline", "check_columns", "separable"]


@dataclass
class Offline:
    """The offline verdicts: violations sorted by (time, property, rid) and, per table, the path
    that judged it (``vectorised`` or ``replay``)."""

    violations: list[Violation] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)


class _Columns:
    """The trace as columns; ``rows`` selects the events still judged (WF's refusals removed)."""

    def __init__(self, contract: Contract, events: Sequence[Event], rows: np.ndarray) -> None:
        self.events = events
        self.rows = rows
        evs = [events[i] for i in rows]
        rids = [e.rid for e in evs]
        uniq, self.req = np.unique(np.array(rids, dtype=object), return_inverse=True)
        self.rids = list(uniq)
        self.n_req = len(uniq)
        self.code = np.array([e.code for e in evs], dtype=np.int64)
        self.t = np.array([e.t for e in evs], dtype=np.float64)
        order = np.argsort(self.req, kind="stable")
        step = np.empty(len(evs), dtype=np.int64)
        counts = np.bincount(self.req, minlength=self.n_req)
        starts = np.cumsum(counts) - counts
        step[order] = np.arange(len(evs)) - np.repeat(starts, counts)
        self.step = step
        self.event = {n: np.array([_event_fact(n, e) for e in evs], dtype=np.float64) for n in EVENT_NAMES}
        self._request_facts(contract, evs)

    def _request_facts(self, contract: Contract, evs: list[Event]) -> None:
        cache = FactsCache(contract)
        facts: dict[int, dict[str, float]] = {}
        tenant: dict[int, str] = {}
        window: dict[int, int] = {}
        for r, e in zip(self.req.tolist(), evs, strict=True):
            if isinstance(e, Arrive) and r not in facts:
                facts[r] = facts_of(contract, cache, e)
                tenant[r], window[r] = e.tenant, contract.window_index(e.t)
        self.fact = {
            n: np.array([facts.get(r, {}).get(n, np.nan) for r in range(self.n_req)]) for n in FACT_NAMES
        }
        tenants = sorted(set(tenant.values()))
        self.tenant = np.array([tenants.index(tenant[r]) if r in tenant else -1 for r in range(self.n_req)])
        self.window = np.array([window.get(r, 0) for r in range(self.n_req)], dtype=np.int64)
        self.event["floor_credit"] = self.event["floor_basis"] * self.fact["weight"][self.req]


def _event_fact(name: str, e: Event) -> float:
    if name == "t":
        return e.t
    if name == "preempted":
        return 1.0 if isinstance(e, Fail) and e.reason in GUARD_ENDS else 0.0
    if name == "floor_credit":
        return 0.0  # filled from the request's weight once the facts are known
    if name == "floor_refused":
        return floor_refused(e)
    basis = Basis(name.removesuffix("_basis"))
    return 1.0 if isinstance(e, Admit) and e.basis is basis else 0.0


def separable(table: PropertyTable) -> bool:
    """Whether the table's non-request counters are judged by prefix sums (`skeleton`)."""
    return skeleton(table) is not None


Env = Callable[[str], Any]


class _Judge:
    """One table judged over the columns (pass 1 then pass 2 of the module docstring)."""

    def __init__(self, table: PropertyTable, contract: Contract, cols: _Columns, sk: Skeleton | None) -> None:
        self.table = table
        self.refuse = table.protocol
        self.cols = cols
        self.index = {loc: i for i, loc in enumerate(table.locations)}
        self.consts = {"slots": contract.slots, "reserve": contract.reserve, "window": contract.window}
        self.consts |= {k: float(v) for k, v in table.params.items()}
        self.before: dict[str, np.ndarray] = {}
        self.before = {} if sk is None else self._prefix_sums(sk)

    def _env(self, rows: np.ndarray, req: np.ndarray, vars_: dict[str, np.ndarray]) -> Env:
        cols = self.cols

        def env(name: str) -> Any:
            if name in cols.event:
                return cols.event[name][rows]
            if name in self.consts:
                return self.consts[name]
            if name in vars_:
                return vars_[name][req]
            if name in self.before:
                return self.before[name][rows]
            return cols.fact[name][req]

        return env

    def _prefix_sums(self, sk: Skeleton) -> dict[str, np.ndarray]:
        cols, table = self.cols, self.table
        keyed = [c for c in table.counters if c.scope is not Scope.REQUEST]
        if not keyed:
            return {}
        inc = {c.name: np.zeros(len(cols.code)) for c in keyed}
        path = np.full(cols.n_req, sk.initial)
        for rows in _by_step(cols.step):
            req = cols.req[rows]
            here, code = path[req], cols.code[rows]
            for (c_from, kind), move in sk.moves.items():
                m = (here == c_from) & (code == kind)
                if m.any():
                    self._move(move, rows[m], req[m], path, inc)
        return {c.name: c.initial + _exclusive_cumsum(inc[c.name], self._group(c.scope)) for c in keyed}

    def _move(
        self, move: ClassMove, rows: np.ndarray, req: np.ndarray, path: np.ndarray, inc: dict[str, np.ndarray]
    ) -> None:
        """One class move on the rows taking it: target classes, and each edge's increments."""
        env = self._env(rows, req, {})
        left = np.ones(len(rows), dtype=bool)
        for guard, target, updates in move.edges:
            m = left.copy() if guard is None else left & np.broadcast_to(evaluate(guard, env), left.shape)
            left &= ~m
            path[req[m]] = target
            for u in updates:
                value = np.broadcast_to(evaluate(u.value, env), m.shape)[m]
                inc[u.name][rows[m]] += value if u.op == "+=" else -value
            if move.dynamic:
                return
        path[req[left]] = move.stay

    def _group(self, scope: Scope) -> np.ndarray:
        cols = self.cols
        req = cols.req
        if scope is Scope.SHARED:
            return np.zeros(len(req), dtype=np.int64)
        if scope is Scope.TENANT:
            return cols.tenant[req]
        span = int(cols.window.max() - cols.window.min() + 1) if cols.n_req else 1
        return cols.tenant[req] * span + (cols.window[req] - (cols.window.min() if cols.n_req else 0))

    def judge(self) -> list[tuple[int, Edge]]:
        """Pass 2: the (row, edge) pairs of edges into bad, in row order."""
        cols, table, index = self.cols, self.table, self.index
        loc = np.full(cols.n_req, index[table.initial])
        vars_ = {c.name: np.full(cols.n_req, c.initial) for c in table.counters if c.scope is Scope.REQUEST}
        bad: list[tuple[int, Edge]] = []
        for rows in _by_step(cols.step):
            req = cols.req[rows]
            here = loc[req]
            taken = np.zeros(len(rows), dtype=bool)
            env = self._env(rows, req, vars_)
            sets: list[tuple[np.ndarray, str, str, np.ndarray]] = []
            for e in table.edges:
                m = ~taken & (here == index[e.source]) & (cols.code[rows] == CODE[e.kind])
                if not m.any():
                    continue
                m &= np.broadcast_to(evaluate(e.guard, env), m.shape)
                taken |= m
                if not (self.refuse and e.target == table.bad):
                    loc[req[m]] = index[e.target]
                sets += [
                    (req[m], u.name, u.op, np.broadcast_to(evaluate(u.value, env), m.shape)[m])
                    for u in e.updates
                    if u.name in vars_
                ]
                if e.target == table.bad:
                    bad += [(int(r), e) for r in rows[m]]
            for r, name, op, value in sets:
                vars_[name][r] = value if op == "=" else vars_[name][r] + (value if op == "+=" else -value)
        return sorted(bad, key=lambda pair: pair[0])


def _by_step(step: np.ndarray) -> list[np.ndarray]:
    order = np.argsort(step, kind="stable")
    bounds = np.searchsorted(step[order], np.arange(int(step.max()) + 2 if len(step) else 1))
    return [order[bounds[j] : bounds[j + 1]] for j in range(len(bounds) - 1)]


def _exclusive_cumsum(inc: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per row, the sum of ``inc`` over the earlier rows of its group (rows in trace order)."""
    order = np.argsort(group, kind="stable")
    g, v = group[order], inc[order]
    cs = np.cumsum(v)
    start = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, dtype=bool)
    base = (
        np.maximum.accumulate(np.where(start, np.arange(len(g)), 0))
        if len(g)
        else np.zeros(0, dtype=np.int64)
    )
    out = np.empty_like(inc)
    out[order] = cs - v - (cs[base] - v[base])
    return out


def check_columns(contract: Contract, tables: Sequence[PropertyTable], events: Sequence[Event]) -> Offline:
    """Judge a whole trace against the tables (WF's refusals applied first, reported if asked).

    Raises:
        TraceOrderError: a time earlier than the previous event's.
        UnknownTenantError: an arrival names a tenant the contract lacks.
    """
    from .builtin import WF
    from .monitor import TableMonitor

    evs = [e for e in events if e.code not in NODE_CODES]
    _check_order(events)
    protocol = next((t for t in tables if t.protocol), WF)
    out = Offline()
    if not evs:
        return out
    cols = _Columns(contract, evs, np.arange(len(evs)))
    refused = _Judge(protocol, contract, cols, None).judge()
    found: list[Violation] = []
    gone = {row for row, _ in refused}
    if protocol in tables:
        found += [_wf_violation(protocol, evs, cols, row, e, gone) for row, e in refused]
        out.paths[protocol.name] = "vectorised"
    kept = np.array([i for i in range(len(evs)) if i not in gone], dtype=np.int64)
    kept_events = [evs[i] for i in kept]
    cols = _Columns(contract, evs, kept)
    for table in tables:
        if table is protocol:
            continue
        sk = skeleton(table)
        if sk is None:
            mon = TableMonitor(contract, [protocol, table])
            found += [v for v in mon.feed_all(kept_events) if v.property == table.name]
            out.paths[table.name] = "replay"
            continue
        out.paths[table.name] = "vectorised"
        witnesses = _Witnesses(cols)
        for row, e in _Judge(table, contract, cols, sk).judge():
            found.append(_violation(table, e, evs[int(kept[row])], witnesses(row)))
    out.violations = sorted(found, key=lambda v: v.key)
    return out


class _Witnesses:
    """A request's judged events up to a row (the witness)."""

    def __init__(self, cols: _Columns) -> None:
        order = np.argsort(cols.req, kind="stable")
        counts = np.bincount(cols.req, minlength=cols.n_req)
        self.starts = np.cumsum(counts) - counts
        self.order = order
        self.cols = cols

    def __call__(self, row: int) -> tuple[Event, ...]:
        r, s = int(self.cols.req[row]), int(self.cols.step[row])
        idx = self.order[self.starts[r] : self.starts[r] + s + 1]
        return tuple(self.cols.events[int(self.cols.rows[i])] for i in idx)


def _violation(table: PropertyTable, e: Edge, ev: Event, witness: tuple[Event, ...]) -> Violation:
    detail = f"{ev.kind.value} from {e.source} with [{e.guard_text}] reaches {e.target} ({e.where})"
    context = {"edge": str(e), "guard": e.guard_text, "source": e.source, "where": e.where}
    return Violation(table.name, ev.rid, ev.t, witness, detail, context)


def _wf_violation(
    table: PropertyTable, evs: list[Event], cols: _Columns, row: int, e: Edge, gone: set[int]
) -> Violation:
    """A refused event's violation: the request's accepted events and it, or it alone when the
    request is not live (never arrived, or already ended), as online."""
    ev = evs[row]
    if e.source in (table.initial, "DONE"):
        return _violation(table, e, ev, (ev,))
    r, step = cols.req[row], cols.step[row]
    same = np.flatnonzero((cols.req == r) & (cols.step < step))
    return _violation(table, e, ev, (*(evs[int(i)] for i in same if int(i) not in gone), ev))


def _check_order(events: Sequence[Event]) -> None:
    t = np.array([e.t for e in events], dtype=np.float64)
    back = np.flatnonzero(np.diff(t) < 0) if len(t) > 1 else np.zeros(0, dtype=np.int64)
    if len(back):
        i = int(back[0]) + 1
        raise TraceOrderError(f"time {t[i]!r} is before the previous event's {t[i - 1]!r}", field="t")
