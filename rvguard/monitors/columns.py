"""The per-request columns of a trace: where each request's events are, its facts, its entitlement.

The offline checker's ground floor. `row_index` finds each request's rows
and whether the trace is WF-clean (its layout generated from
`rvguard.lifecycle`), `request_table` gathers each request's facts and event
times (`rvguard.facts.fact_columns`), and `entitlement_columns` applies the
prefix rule of `rvguard.contract.Entitlement` to whole columns. The
vectorised verdicts (`offline_verdicts`), metrics (`offline_metrics`), the
phase sweep and `offline.check_offline` all read these tables; none of them
is imported here.

Cost: O(n) for the row index, O(n log n) for the entitlement's grouping
sort; memory O(n).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..columnar import ColumnarTrace
from ..contract import Contract, CreditMode
from ..exact import near_edge, window_index
from ..fact_columns import fact_columns
from ..lifecycle import (
    ADMIT,
    ARRIVE,
    DISPATCH,
    INITIAL,
    KINDS,
    MOVES,
    N_KINDS,
    NEXT,
    NODE_KINDS,
    STAGES,
    TERMINAL_KINDS,
    EventKind,
)
from ..lifecycle import CODE as KIND_CODE

__all__ = [
    "VECTORISED_KINDS",
    "RequestTable",
    "RowIndex",
    "admission_rows",
    "entitlement_columns",
    "protocol_is_clean",
    "request_table",
    "row_index",
    "window_indices",
]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B1 = npt.NDArray[np.bool_]


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
    weight_units: npt.NDArray[Any]  # exact credit units (int64, or Python ints when large)
    floored: B1
    t_admit: F64
    t_dispatch: F64
    t_end: F64
    end_kind: I64
    end_row: I64
    admit_row: I64
    dispatch_row: I64
    arrivals: I64  # rid codes in arrival order


@dataclass(frozen=True)
class RowIndex:
    """Where each request's events are: one row per rid and kind (-1 = none).

    Built in O(n) with no sort by rid: each row is scattered into its rid's
    column for its kind (the terminal kinds share one column). ``clean``
    says whether every rid's rows spell a word of the lifecycle (WF) and all
    are of `VECTORISED_KINDS`; the per-rid rows are meaningful only when it
    is True (when False the offline checker replays the trace online).
    """

    arrive: I64
    admit: I64
    dispatch: I64
    end: I64
    end_kind: I64  # kind code of the end row, -1 = none
    arrivals: I64  # arrive rows in trace order
    clean: bool


def _row_columns(kinds: frozenset[EventKind] | None = None) -> tuple[tuple[int, ...], int] | None:
    """The per-request row table's layout for the lifecycle's moves by ``kinds`` (None: all).

    Returns ``(column of each kind code, number of columns)``: each
    non-terminal kind has its own column, ordered by how far from the initial
    stage it first occurs, and the terminal kinds share the last one (a
    request ends once); a kind outside ``kinds`` has column -1. Along every
    legal move the columns must increase, so that a request's rows in trace
    order fill its columns in order; None when they cannot (a kind that may
    occur twice in one request's life, a cycle).
    """
    moves = {m: n for m, n in MOVES.items() if kinds is None or m[1] in kinds}
    dist = {INITIAL: 0}
    frontier = [INITIAL]
    while frontier:  # breadth-first distance of each stage from the initial one
        d = dist[frontier[0]] + 1
        frontier = list({n: None for (s, _), n in moves.items() if s in frontier and n not in dist})
        dist.update((n, d) for n in frontier)
    far = len(STAGES)  # an unreachable stage sorts last (lifecycle._check refuses one anyway)
    inner = {
        k: min(dist.get(s, far) for (s, kk) in moves if kk is k)
        for (_, k) in moves
        if k not in TERMINAL_KINDS
    }
    order = sorted(inner, key=lambda k: (inner[k], KIND_CODE[k]))
    used = {k for (_, k) in moves}
    column = {k: order.index(k) if k in inner else len(order) if k in used else -1 for k in KINDS}
    for (_, k), nxt in moves.items():
        if any(column[k2] <= column[k] for (s2, k2) in moves if s2 is nxt):
            return None
    return tuple(column[k] for k in KINDS), len(order) + 1


def _vectorised_kinds() -> frozenset[EventKind]:
    """The longest prefix of the request kinds (in code order) whose words fit one row table.

    DESIGN §2's seven kinds do; ``route`` (a self-loop) and the relocation
    cycle do not, so a trace with rows of later kinds (or of a node kind, which
    has no rid) is judged by replay through the online monitor instead.
    """
    request_kinds = [k for k in KINDS if k not in NODE_KINDS]
    best: frozenset[EventKind] = frozenset()
    for n in range(1, len(request_kinds) + 1):
        kinds = frozenset(request_kinds[:n])
        if _row_columns(kinds) is None:
            break
        best = kinds
    return best


#: the kinds whose rows the vectorised path reads; any other row sends a trace to replay
VECTORISED_KINDS = _vectorised_kinds()
_LAYOUT = _row_columns(VECTORISED_KINDS)
#: whether the per-request row table can hold the lifecycle's words (else: replay, never vectorise)
_VECTORISED = _LAYOUT is not None and EventKind.ARRIVE in VECTORISED_KINDS
_COLUMN = np.array(_LAYOUT[0] if _LAYOUT else [-1] * N_KINDS, dtype=np.int64)
_N_COLUMNS = _LAYOUT[1] if _LAYOUT else 1
#: the lifecycle's moves as a flat int array (stage index * N_KINDS + code -> next stage index, -1 illegal)
_NEXT = np.array(NEXT, dtype=np.int64)
_TERMINAL = min(KIND_CODE[k] for k in TERMINAL_KINDS)  # any terminal kind: they share one column
_PLAIN_CODES = np.array(sorted(KIND_CODE[k] for k in VECTORISED_KINDS), dtype=np.int64)


def _protocol_holds(columns: I64, kind: npt.NDArray[np.int8]) -> bool:
    """Per rid, with at most one row per column: its rows spell a path of the lifecycle.

    Walks every rid through `lifecycle.NEXT` at once, column by column: the
    rows must come in column order (the order of every legal word) and each
    must be a legal move from the stage the previous ones reached; a missing
    column is skipped (the walk then fails at the next row if it was needed).
    """
    stage = np.full(columns.shape[1], STAGES.index(INITIAL), dtype=np.int64)
    last = np.full(columns.shape[1], -1, dtype=np.int64)
    for rows in columns:
        has = np.flatnonzero(rows >= 0)
        at = rows[has]
        if not bool((at > last[has]).all()):
            return False
        nxt = _NEXT[stage[has] * N_KINDS + kind[at]]
        if bool((nxt < 0).any()):
            return False
        stage[has] = nxt
        last[has] = at
    return True


def row_index(trace: ColumnarTrace) -> RowIndex:
    """Per-rid rows of each kind, and whether the trace is WF-clean (O(n)).

    A rid's rows form a word of the lifecycle (WF) exactly when no column of
    the row table (`_row_columns`) is written twice and the rows spell a path
    of its moves (`_protocol_holds`). tests/monitors check this against the
    automaton on arbitrary kind sequences, and tests/test_lifecycle.py
    against the table on every short word.
    """
    r, n = len(trace.rid_names), len(trace)
    kind = trace.kind
    columns = np.full((_N_COLUMNS, r), -1, dtype=np.int64)
    unique = _VECTORISED and (n == 0 or (int(kind.min()) >= 0 and int(kind.max()) < N_KINDS))
    # a row of a kind outside the row table (a node kind, a DESIGN §10 kind): replay instead
    unique = unique and (n == 0 or bool((_COLUMN[kind] >= 0).all()))
    if unique and n:
        key = _COLUMN[kind]
        key *= r
        key += trace.rid
        columns.reshape(-1)[key] = np.arange(n)
        del key
        # a (rid, column) written twice keeps one row: fewer filled cells than rows
        unique = int(np.count_nonzero(columns >= 0)) == n
    arrive, admit, dispatch, end = (columns[int(_COLUMN[c])] for c in (ARRIVE, ADMIT, DISPATCH, _TERMINAL))
    end_kind = np.full(r, -1, dtype=np.int64)
    has_end = end >= 0
    end_kind[has_end] = kind[end[has_end]]
    clean = unique and _protocol_holds(columns, kind)
    return RowIndex(arrive, admit, dispatch, end, end_kind, np.flatnonzero(kind == ARRIVE), clean)


def admission_rows(trace: ColumnarTrace) -> ColumnarTrace:
    """The trace without its DESIGN §10 rows and without any request's second ``dispatch``.

    What a request's admission and outcome are does not depend on its route, demotions,
    evictions or relocations: this projection keeps each request's arrive, admit, first
    dispatch and end, a word of DESIGN §2 for every WF-clean trace, so the vectorised
    admission judgements (the phase sweep) run on traces with every kind.
    """
    if bool(np.isin(trace.kind, _PLAIN_CODES).all()):
        return trace
    plain = np.isin(trace.kind, _PLAIN_CODES)
    dispatch = np.flatnonzero(trace.kind == DISPATCH)
    first = np.zeros(len(trace), dtype=bool)
    _, at = np.unique(trace.rid[dispatch], return_index=True)
    first[dispatch[at]] = True
    return trace.take(np.flatnonzero(plain & ((trace.kind != DISPATCH) | first)))


def protocol_is_clean(trace: ColumnarTrace, rows: RowIndex | None = None) -> bool:
    """True when every row is legal under WF (see `row_index`)."""
    if len(trace) == 0:
        return True
    return (rows or row_index(trace)).clean


def request_table(trace: ColumnarTrace, contract: Contract, rows: RowIndex | None = None) -> RequestTable:
    """Per-request columns of a WF-clean trace (every rid's first row is its arrive)."""
    rows = rows or row_index(trace)
    r = len(trace.rid_names)
    arrive = rows.arrivals
    rid_a = trace.rid[arrive]
    # rid codes are usually given in arrival order (ColumnarTrace.from_events does): then a
    # per-arrival column is already the per-rid column, with no scatter
    in_order = rid_a.size == r and bool(np.array_equal(rid_a, np.arange(r)))

    def spread(values: npt.NDArray[Any], fill: float) -> npt.NDArray[Any]:
        if in_order:
            return values
        out = np.full(r, fill, dtype=values.dtype)
        out[rid_a] = values
        return out

    tenant_a = trace.tenant[arrive]
    t_a = trace.t[arrive]
    facts = fact_columns(
        contract,
        trace.tenant_names,
        tenant_a,
        t_a,
        trace.deadline[arrive],
        trace.prompt_tokens[arrive],
        trace.max_tokens[arrive],
    )
    return RequestTable(
        arrive_row=rows.arrive,
        tenant=spread(tenant_a, -1),
        t_arrive=spread(t_a, np.nan),
        deadline=spread(facts.deadline, np.nan),
        lower=spread(facts.lower, np.nan),
        upper=spread(facts.upper, np.nan),
        weight=spread(facts.weight, 1.0),
        weight_units=spread(facts.weight_units, 1),
        floored=spread(facts.floored, False),
        t_admit=_times(trace, rows.admit),
        t_dispatch=_times(trace, rows.dispatch),
        t_end=_times(trace, rows.end),
        end_kind=rows.end_kind,
        end_row=rows.end,
        admit_row=rows.admit,
        dispatch_row=rows.dispatch,
        arrivals=rid_a,
    )


def _times(trace: ColumnarTrace, rows: I64) -> F64:
    """The time of each row, nan where the row is -1."""
    if len(trace) == 0:
        return np.full(rows.shape, np.nan)
    return np.where(rows >= 0, trace.t[np.maximum(rows, 0)], np.nan)


def window_indices(t: F64, origin: float, window: float) -> I64:
    """Vectorised `rvguard.exact.window_index`: the float estimate, and its exact rule near an edge."""
    k = np.floor((t - origin) / window).astype(np.int64)
    for i in np.flatnonzero(near_edge(t, origin, window)).tolist():
        k[i] = window_index(float(t[i]), origin, window)
    return k


def entitlement_columns(
    req: RequestTable, trace: ColumnarTrace, contract: Contract, *, origin: float | None = None
) -> tuple[I64, B1, I64, F64]:
    """Per request: window, entitled, rank, credit used (same prefix rule as `Entitlement`, exact)."""
    o = contract.epoch if origin is None else origin
    r = req.tenant.shape[0]
    rids = req.arrivals
    win = np.zeros(r, dtype=np.int64)
    entitled = np.zeros(r, dtype=bool)
    rank = np.zeros(r, dtype=np.int64)
    used = np.zeros(r)
    if rids.size == 0:
        return win, entitled, rank, used
    k = window_indices(req.t_arrive[rids], o, contract.window)
    ten = req.tenant[rids]
    order = _by_tenant_then_window(ten, k)
    out = rids[order]
    ks = k[order]
    del k
    win[out] = ks
    ts = ten[order]
    del ten
    start = np.empty(rids.size, dtype=bool)
    start[0] = True
    np.not_equal(ks[1:], ks[:-1], out=start[1:])
    del ks
    start[1:] |= ts[1:] != ts[:-1]
    group = np.cumsum(start)
    group -= 1
    rank_s = np.flatnonzero(start)[group]  # the group's first position
    del group
    np.subtract(np.arange(1, rids.size + 1), rank_s, out=rank_s)
    rank[out] = rank_s
    used_units = _used_units(req.weight_units[rids][order], rank_s, contract.credit is CreditMode.COUNT)
    del rank_s
    units = contract.credit_units()
    used[out] = used_units / units.scale
    big = max(units.floors.values(), default=0) >= 2**62
    floors = np.array([units.floors[n] for n in trace.tenant_names], dtype=object if big else np.int64)
    fl = floors[ts]
    entitled[out] = (fl > 0) & (used_units <= fl)
    return win, entitled, rank, used


def _used_units(weights: npt.NDArray[Any], rank: I64, counted: bool) -> npt.NDArray[Any]:
    """Credit units used by each arrival's window so far, itself included (arrivals grouped in order)."""
    if counted:  # every weight is one unit: the credit used is the rank
        return rank
    cs = np.cumsum(weights)
    before = np.concatenate((np.zeros(1, dtype=cs.dtype), cs))
    used: npt.NDArray[Any] = cs - before[np.arange(weights.size) - rank + 1]
    return used


def _by_tenant_then_window(ten: I64, k: I64) -> I64:
    """Arrivals ordered by (tenant, window, arrival).

    In arrival order the window index never decreases (times do not), so a
    stable sort by tenant alone gives that order: a radix sort on a small
    int type instead of a three-key lexsort.
    """
    if ten.size > 1 and not bool(np.all(k[1:] >= k[:-1])):  # pragma: no cover - monotone by construction
        return np.lexsort((np.arange(ten.size), k, ten))
    small = np.int16 if int(ten.max()) < np.iinfo(np.int16).max else np.int64
    return np.argsort(ten.astype(small), kind="stable")
