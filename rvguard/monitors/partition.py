"""One partition of a partitioned trace, reduced to what the fold needs (`rvguard.monitors.fold`).

A partition is a time slice of a trace (its rows are a contiguous run of the
whole trace's). Without knowing any other partition, a worker splits the
requests it sees into two sets:

* **settled**: the request arrives here, ends here, and arrives in a later
  window than the partition's first row. Nothing outside the partition can
  change its verdicts: its rows are all here, its entitlement counts only
  arrivals of its (tenant, window), and every such earlier arrival is here
  too (an earlier partition's rows are all earlier than this one's first, so
  in earlier windows). It is judged here by the offline checker
  (`offline_violations`, `request_tally`) and sent as violations and sums.
* **deferred**: every other request with a row here — it arrived in an
  earlier partition (an *orphan* row), it is still open at the partition's
  end, or it arrives in the first window (whose credit may have been spent
  before). Its rows go to the fold, which judges it once its context is known.

Besides those, the fold gets what only it can put in order: the credit each
tenant spent in the first and last windows, the steps of the three running
counts (the assured backlog, RB's surplus requests in flight, CAP's requests
in flight) between the orphan rows, the floor credit admitted per (tenant, window) (AF's upper side), the
service time each terminal row adds to the busy
sum (in row order: that float sum is the single-process check's, term by
term), the hashes of the rids that arrive here (for WF across partitions), and
how many ``fail`` rows blame the client (the caller then attributes them: a
client fault is counted even in a trace with no violation).
A partition that is not WF-clean by itself, out of order, or names an unknown
tenant is marked ``problem``: the caller then falls back to the
single-process check, which reports it exactly.

Cost: that of the offline checker on the partition, O(n log n); memory O(n).
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ..columnar import BASIS_CODES, ColumnarTrace
from ..contract import Contract
from ..events import Basis, Event, event_from_dict, event_to_dict, is_client_error
from ..exact import window_index
from ..lifecycle import ADMIT, ARRIVE, DISPATCH, FAIL, N_KINDS, TERMINAL_CODES
from ..verdict import Violation
from .columns import RequestTable, entitlement_columns, request_table, row_index
from .offline_metrics import Tally, request_tally
from .offline_verdicts import offline_violations

__all__ = ["Deferred", "PartitionSummary", "Records", "rid_hashes", "summarise", "take"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]
#: the record-path events of some partition rows (0-based row numbers), extras included
Records = Callable[[Sequence[int]], list[Event]]
_ZERO = np.zeros(1, dtype=np.int64)
_WIDE = 64  # the longest rid hashed by numpy (a longer one: BLAKE2b)


@dataclass(frozen=True, slots=True)
class Deferred:
    """A request that arrives in this partition but is judged by the fold.

    ``rank``, ``entitled`` and ``used`` are its entitlement among this
    partition's arrivals of its (tenant, window), final unless ``first_window``
    (that window is the partition's first): then earlier partitions' arrivals
    add to ``rank`` and to ``units``, its exact credit used (itself included).
    """

    rid: str
    tenant: str
    floored: bool
    window: int
    rank: int
    entitled: bool
    used: float
    units: int
    first_window: bool
    weight: int = 1  # its own credit, in units (AF's upper side, when the fold sees its floor admit)


@dataclass(frozen=True)
class PartitionSummary:
    """What one partition sends to the fold (see the module docstring)."""

    index: int
    path: str
    problem: str = ""  # why the fold cannot use this partition ("" = it can)
    events: int = 0
    first_t: float = 0.0
    last_t: float = 0.0
    first_window: int = 0
    last_window: int = 0
    credit_first: dict[str, tuple[int, int]] = field(default_factory=dict)  # tenant -> (arrivals, units)
    credit_last: dict[str, tuple[int, int]] = field(default_factory=dict)
    arrived: U64 = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))  # sorted rid hashes
    settled: Tally | None = None
    violations: list[Violation] = field(default_factory=list)
    deferred: list[Deferred] = field(default_factory=list)  # in arrival order
    rows: list[Event] = field(default_factory=list)  # every row of a deferred or orphan request, in order
    orphan: list[bool] = field(default_factory=list)  # per item of ``rows``: its request arrived before
    #: the assured backlog's, RB's and CAP's running counts between orphan rows (totals, max prefixes)
    counts: tuple[tuple[I64, I64], ...] = ((_ZERO, _ZERO), (_ZERO, _ZERO), (_ZERO, _ZERO))
    busy: F64 = field(default_factory=lambda: np.zeros(0))  # nan: an orphan's end (the fold fills it)
    #: floor credit (units) admitted in this partition per (tenant, window) by requests arriving here
    floor_spent: dict[tuple[str, int], int] = field(default_factory=dict)
    client_errors: int = 0  # fail rows whose reason blames the client (SF exempts them; counted apart)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with events as records: an event's ``extra`` (a mappingproxy) defeats the C
        pickler, and Dask's fallback, cloudpickle, is slow on the rest (many small objects)."""
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        state["rows"] = [event_to_dict(ev) for ev in self.rows]
        state["violations"] = [
            (replace(v, witness=()), [event_to_dict(ev) for ev in v.witness]) for v in self.violations
        ]
        return _unpickle, (state,)


def _unpickle(state: dict[str, Any]) -> PartitionSummary:
    state["rows"] = [event_from_dict(rec) for rec in state["rows"]]
    state["violations"] = [
        replace(v, witness=tuple(event_from_dict(rec) for rec in w)) for v, w in state["violations"]
    ]
    return PartitionSummary(**state)


#: random odd multipliers, one per character position, from a fixed seed (the same in every process)
_MULTIPLIERS = np.random.default_rng(20261201).integers(0, 2**63, _WIDE, dtype=np.uint64) * 2 + 1


def rid_hashes(rids: Sequence[str]) -> U64:
    """Stable 64-bit hashes of rids, sorted: equal rids hash equal in every process.

    Σ code point × a fixed random odd multiplier per position, modulo 2⁶⁴ (numpy,
    no Python loop); rids longer than `_WIDE` characters use BLAKE2b instead. Two
    different rids collide with probability about 2⁻⁶⁰, and a collision only makes
    the fold give the trace to the single-process check.
    """
    if not rids:
        return np.zeros(0, dtype=np.uint64)
    text = np.array(rids, dtype=np.str_)
    width = text.dtype.itemsize // 4
    if width > _WIDE:
        digest = hashlib.blake2b
        out = np.fromiter(
            (
                int.from_bytes(digest(r.encode("utf-8", "surrogatepass"), digest_size=8).digest())
                for r in rids
            ),
            dtype=np.uint64,
            count=len(rids),
        )
    else:
        points = text.view(np.uint32).reshape(len(rids), width).astype(np.uint64)
        out = points @ _MULTIPLIERS[:width]  # wraps modulo 2**64
    out.sort()
    return out


def take(trace: ColumnarTrace, rows: I64) -> ColumnarTrace:
    """The given rows of a trace (names tables and rid codes unchanged, lines kept)."""
    at = rows.tolist()
    pick = operator.itemgetter(*at) if len(at) > 1 else (lambda seq: tuple(seq[i] for i in at))
    return replace(
        trace,
        t=trace.t[rows],
        kind=trace.kind[rows],
        rid=trace.rid[rows],
        tenant=trace.tenant[rows],
        deadline=trace.deadline[rows],
        prompt_tokens=trace.prompt_tokens[rows],
        max_tokens=trace.max_tokens[rows],
        basis=trace.basis[rows],
        reason=tuple(pick(trace.reason)),
        line=trace.line[rows],
        proposals=tuple(pick(trace.proposals)) if trace.proposals else (),
        kept=tuple(pick(trace.kept)) if trace.kept else (),
    )


def _problem(trace: ColumnarTrace, contract: Contract) -> str:
    """Why the partition is bad on its own ("" when it is not), before any request is looked at."""
    if bool((trace.t[1:] < trace.t[:-1]).any()):
        return "time goes backwards"
    if any(name not in contract.tenants for name in trace.tenant_names):
        return "an unknown tenant"
    if int(trace.kind.min()) < 0 or int(trace.kind.max()) >= N_KINDS:
        return "an unknown kind"
    if trace.kept:
        return "rows of the DESIGN §10 kinds (the offline checker replays those)"
    return ""


def _credit(
    req: RequestTable, ent: tuple[I64, npt.NDArray[np.bool_], I64, F64], names: tuple[str, ...], k: int
) -> tuple[dict[str, tuple[int, int]], dict[int, int]]:
    """Per tenant, (arrivals, units) in window k; and per rid code in it, its units used so far."""
    rids = req.arrivals[ent[0][req.arrivals] == k]  # arrival order
    tally: dict[str, tuple[int, int]] = {}
    used: dict[int, int] = {}
    for r, te, w in zip(
        rids.tolist(), req.tenant[rids].tolist(), req.weight_units[rids].tolist(), strict=True
    ):
        n, u = tally.get(names[te], (0, 0))
        tally[names[te]] = (n + 1, u + int(w))
        used[r] = u + int(w)
    return tally, used


def _segments(step: I64, orphan: npt.NDArray[np.bool_]) -> tuple[I64, I64]:
    """A running count's steps between orphan rows: (total, max prefix ≥ 0) of each segment.

    An orphan row's own step is the fold's to add (only it knows that request's
    facts), before the segment that starts with it.
    """
    cs = np.cumsum(step)
    starts = [0, *np.flatnonzero(orphan).tolist()]
    stops = [*starts[1:], len(step)]
    totals, highs = [], []
    for a, b in zip(starts, stops, strict=True):
        base = int(cs[a - 1]) if a else 0
        totals.append(int(cs[b - 1]) - base if b > a else 0)
        highs.append(max(0, int(cs[a:b].max()) - base) if b > a else 0)
    return np.array(totals, dtype=np.int64), np.array(highs, dtype=np.int64)


def _counts(
    trace: ColumnarTrace, own: ColumnarTrace, req: RequestTable, orphan: npt.NDArray[np.bool_]
) -> tuple[tuple[I64, I64], ...]:
    """The assured backlog's, RB's and CAP's running counts, as segments (`_segments`).

    Backlog (the online accumulator's rule): +1 at the admit of an assured
    request, −1 at the end of an admitted one. RB (`rvguard.monitors.rb`): +1
    at the dispatch of a request admitted on a basis other than floor, −1 at
    the end of one dispatched. CAP (`rvguard.monitors.cap`): the same for every
    request.
    """
    rid = trace.rid
    known = ~orphan
    ends = np.isin(trace.kind, list(TERMINAL_CODES))
    floored = req.floored[rid] & known
    backlog = np.zeros(len(trace), dtype=np.int64)
    backlog[floored & (trace.kind == ADMIT)] = 1
    backlog[floored & ends & (req.admit_row[rid] >= 0)] = -1
    admits = own.kind == ADMIT
    surplus_rid = np.zeros(len(trace.rid_names), dtype=bool)
    surplus_rid[own.rid[admits]] = own.basis[admits] != BASIS_CODES[Basis.FLOOR]
    surplus = surplus_rid[rid] & known
    running = np.zeros(len(trace), dtype=np.int64)
    running[known & (trace.kind == DISPATCH)] = 1
    running[known & ends & (req.dispatch_row[rid] >= 0)] = -1
    rb = np.where(surplus, running, 0)
    return _segments(backlog, orphan), _segments(rb, orphan), _segments(running, orphan)


def _floor_spent(
    trace: ColumnarTrace, req: RequestTable, ent: tuple[I64, npt.NDArray[np.bool_], I64, F64]
) -> dict[tuple[str, int], int]:
    """Floor credit (units) admitted here per (tenant, arrival window), by requests arriving here
    (AF's upper side: the fold adds the orphans' and checks each total against B)."""
    admitted = np.flatnonzero(req.admit_row >= 0)
    rs = admitted[trace.basis[req.admit_row[admitted]] == BASIS_CODES[Basis.FLOOR]]
    out: dict[tuple[str, int], int] = {}
    names = trace.tenant_names
    for te, k, w in zip(
        req.tenant[rs].tolist(), ent[0][rs].tolist(), req.weight_units[rs].tolist(), strict=True
    ):
        key = (names[te], k)
        out[key] = out.get(key, 0) + int(w)
    return out


def _busy(trace: ColumnarTrace, req: RequestTable, orphan: npt.NDArray[np.bool_]) -> F64:
    """Each terminal row's service term (end − dispatch), in row order; nan at an orphan's."""
    ends = np.flatnonzero(np.isin(trace.kind, list(TERMINAL_CODES)))
    rid = trace.rid[ends]
    t_dispatch = np.where(orphan[ends], np.nan, req.t_dispatch[rid])
    keep = orphan[ends] | ~np.isnan(t_dispatch)
    out: F64 = (trace.t[ends] - t_dispatch)[keep]
    return out


def _split(trace: ColumnarTrace) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], ColumnarTrace]:
    """Per rid, whether it arrives here; per row, whether its request arrived before; the others' rows."""
    has_arrive = np.zeros(len(trace.rid_names), dtype=bool)
    has_arrive[trace.rid[trace.kind == ARRIVE]] = True
    orphan = ~has_arrive[trace.rid]
    return has_arrive, orphan, take(trace, np.flatnonzero(~orphan))


def _deferred(
    trace: ColumnarTrace,
    req: RequestTable,
    ent: tuple[I64, npt.NDArray[np.bool_], I64, F64],
    settled: npt.NDArray[np.bool_],
    used_first: dict[int, int],
    k0: int,
) -> list[Deferred]:
    """The requests arriving here that the fold judges, in arrival order."""
    return [
        Deferred(
            trace.rid_names[r],
            trace.tenant_names[int(req.tenant[r])],
            bool(req.floored[r]),
            int(ent[0][r]),
            int(ent[2][r]),
            bool(ent[1][r]),
            float(ent[3][r]),
            used_first.get(r, 0),
            int(ent[0][r]) == k0,
            int(req.weight_units[r]),
        )
        for r in req.arrivals.tolist()
        if not settled[r]
    ]


def summarise(
    trace: ColumnarTrace,
    contract: Contract,
    names: Collection[str],
    *,
    index: int,
    path: str,
    records: Records | None = None,
) -> PartitionSummary:
    """Reduce one partition (rows in trace order) to its `PartitionSummary`.

    Args:
        trace: the partition's rows.
        contract: the contract.
        names: the properties to judge (built-in; WF is checked for the fold).
        index: the partition's place in trace order.
        path: its file (for the report).
        records: the record-path events of rows numbered from 0 in the partition (extras kept;
            default: rebuilt from the columns). Each row's ``line`` must be its number + 1.
    """
    if len(trace) == 0:
        return PartitionSummary(index, path)
    problem = _problem(trace, contract)
    if problem:
        return PartitionSummary(index, path, problem=problem)
    events_of: Records = records if records is not None else trace.events_at
    has_arrive, orphan, own = _split(trace)
    idx = row_index(own)
    if not idx.clean:
        return PartitionSummary(index, path, problem="a request breaks the protocol")
    req = request_table(own, contract, idx)
    ent = entitlement_columns(req, own, contract)
    k0 = window_index(float(trace.t[0]), contract.epoch, contract.window)
    k1 = window_index(float(trace.t[-1]), contract.epoch, contract.window)
    credit_first, used_first = _credit(req, ent, trace.tenant_names, k0)
    settled = has_arrive & (req.end_kind >= 0) & (ent[0] > k0)
    violations, tally = _judge_settled(own, settled, contract, ent, names, events_of)
    wanted = np.flatnonzero(orphan | ~settled[trace.rid])
    return PartitionSummary(
        index,
        path,
        events=len(trace),
        first_t=float(trace.t[0]),
        last_t=float(trace.t[-1]),
        first_window=k0,
        last_window=k1,
        credit_first=credit_first,
        credit_last=credit_first if k1 == k0 else _credit(req, ent, trace.tenant_names, k1)[0],
        arrived=rid_hashes([trace.rid_names[r] for r in req.arrivals.tolist()]),
        settled=tally,
        violations=violations,
        deferred=_deferred(trace, req, ent, settled, used_first, k0),
        rows=events_of((trace.line[wanted] - 1).tolist()),
        orphan=orphan[wanted].tolist(),
        counts=_counts(trace, own, req, orphan),
        busy=_busy(trace, req, orphan),
        floor_spent=_floor_spent(own, req, ent),
        client_errors=_client_errors(trace),
    )


def _judge_settled(
    own: ColumnarTrace,
    settled: npt.NDArray[np.bool_],
    contract: Contract,
    ent: tuple[I64, npt.NDArray[np.bool_], I64, F64],
    names: Collection[str],
    events_of: Records,
) -> tuple[list[Violation], Tally]:
    """The settled requests judged here, by the offline checker: their violations (witnesses read
    by the record path) and their tally."""
    s_trace = take(own, np.flatnonzero(settled[own.rid]))
    s_req = request_table(s_trace, contract)
    violations = offline_violations(s_trace, contract, s_req, ent, set(names) - {"RB", "CAP"})
    return _with_records(violations, s_trace, events_of), request_tally(s_trace, contract, s_req, ent, None)


def _client_errors(trace: ColumnarTrace) -> int:
    """How many ``fail`` rows blame the client (`is_client_error`)."""
    return sum(is_client_error(trace.reason[i]) for i in np.flatnonzero(trace.kind == FAIL).tolist())


def _with_records(violations: list[Violation], trace: ColumnarTrace, events_of: Records) -> list[Violation]:
    """The violations with their witness events read again by the record path (extras kept)."""
    if not violations:
        return violations
    named = {v.rid for v in violations}
    codes = [i for i, name in enumerate(trace.rid_names) if name in named]
    rows = np.flatnonzero(np.isin(trace.rid, codes)).tolist()
    where = {(ev.rid, ev.code): i for i, ev in zip(rows, trace.events_at(rows), strict=True)}
    out = []
    for v in violations:
        rows = [int(trace.line[where[(ev.rid, ev.code)]]) - 1 for ev in v.witness]
        out.append(replace(v, witness=tuple(events_of(rows))))
    return out
