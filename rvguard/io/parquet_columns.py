"""A Parquet trace straight into `ColumnarTrace`, vectorised over Arrow columns.

The checks are those of the event path (`iter_parquet` + `event_from_dict`),
applied to whole columns: each returns a mask of bad rows, a field name and a
message; a row's error is its first failing check in the event path's order
(row-level cells, then kind, t, rid, then per-kind fields). Learner proposals
and ``extra_json`` cells are checked row by row, but only on rows that have
them. A file with rows of the DESIGN §10 kinds (sample, route, ...) is read
through the event path instead, row by row. The `test_columnar`
differential test holds the two paths together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ..bounds import MAX_ID_CHARS, MAX_TIME, MAX_TOKENS, shown
from ..columnar import BASIS_CODES, COLUMN_KINDS, KIND_CODES, ColumnarTrace
from ..errors import TraceError, TraceFormatError
from ..events import Basis, Event, EventKind, Proposal, event_from_dict
from ._arrow import pyarrow, pyarrow_compute
from ._source import PathArg, display_name
from .parquet import _FINITE_ONLY, BATCH_ROWS, EXTRA_JSON, extra_fields, open_parquet, record_from_row

__all__ = ["parquet_columnar", "table_columnar"]

Mask = npt.NDArray[np.bool_]
# (bad rows, field, message for row i)
Check = tuple[Mask, str, Callable[[int], str]]

_KIND_NAMES = [k.value for k in KIND_CODES]
_BASIS_NAMES = [b.value for b in BASIS_CODES]
#: kinds whose fields the columns do not hold (DESIGN §10): a file with any goes through the event path
_OTHER_CODES = [code for code in KIND_CODES.values() if code not in COLUMN_KINDS]
_REASON_KINDS = [EventKind.REJECT.value, EventKind.DROP.value, EventKind.FAIL.value]


class _Cols:
    """The table's columns as combined Arrow arrays, with typed numpy views on demand."""

    def __init__(self, table: Any) -> None:
        self.pa = pyarrow()
        self.pc = pyarrow_compute()
        self.n: int = table.num_rows
        self.names: list[str] = list(table.column_names)
        self._arr = {c: table.column(c).combine_chunks() for c in self.names}
        self.proposals: dict[int, Proposal | TraceError] = {}

    def get(self, name: str) -> Any:
        """The column, or an all-null one when absent."""
        if name in self._arr:
            return self._arr[name]
        return self.pa.nulls(self.n)

    def valid(self, name: str) -> Mask:
        return np.asarray(self.pc.is_valid(self.get(name)).to_numpy(zero_copy_only=False), dtype=bool)

    def is_kind(self, name: str) -> bool:
        t = self.get(name).type
        return bool(self.pa.types.is_string(t) or self.pa.types.is_large_string(t))

    def is_number(self, name: str) -> bool:
        t = self.get(name).type
        return bool(self.pa.types.is_integer(t) or self.pa.types.is_floating(t))

    def floats(self, name: str) -> npt.NDArray[np.float64]:
        # unsafe: a uint64/int64 beyond 2**53 rounds, and every bound it is checked against is far below
        arr = self.pc.cast(self.get(name), self.pa.float64(), safe=False)
        return np.asarray(arr.fill_null(np.nan).to_numpy(zero_copy_only=False), dtype=np.float64)

    def member(self, name: str, values: list[str]) -> npt.NDArray[np.int64]:
        """Index of each cell in ``values`` (-1 when absent or null)."""
        if not self.is_kind(name):
            return np.full(self.n, -1, dtype=np.int64)
        idx = self.pc.index_in(self.get(name), value_set=self.pa.array(values))
        return np.asarray(idx.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)

    def value(self, name: str, i: int) -> Any:
        return self.get(name)[i].as_py()


def _row_cell_checks(c: _Cols) -> list[Check]:
    """Checks the event path makes while reading a row's cells, in column order."""
    checks: list[Check] = []
    for name in c.names:
        if name in _FINITE_ONLY and c.pa.types.is_floating(c.get(name).type):
            v = c.floats(name)
            bad = c.valid(name) & ~np.isfinite(v)
            checks.append((bad, _FINITE_ONLY[name], _got(c, name, "a finite number")))
        elif name == EXTRA_JSON:
            checks.append(_extra_json_check(c))
    return checks


def _extra_json_check(c: _Cols) -> Check:
    bad = np.zeros(c.n, dtype=bool)
    reasons: dict[int, str] = {}
    for i in np.flatnonzero(c.valid(EXTRA_JSON)):
        try:
            extra_fields(c.value(EXTRA_JSON, int(i)))
        except TraceError as err:
            bad[i] = True
            reasons[int(i)] = err.reason
    return bad, EXTRA_JSON, lambda i: reasons[i]


def _core_checks(c: _Cols, kind: npt.NDArray[np.int64]) -> list[Check]:
    has_kind = c.valid("kind")
    t = c.floats("t") if c.is_number("t") else np.full(c.n, np.nan)
    t_present = c.valid("t")
    rid_ok = _rid_ok(c)
    return [
        (~has_kind, "kind", lambda i: "is missing"),
        (kind < 0, "kind", lambda i: f"unknown event kind {c.value('kind', i)!r}"),
        (~t_present, "t", lambda i: "is missing"),
        (~_in_range(t, MAX_TIME), "t", lambda i: _time_message(c, "t", i)),
        (
            ~rid_ok,
            "rid",
            lambda i: (
                f"must be a non-empty string of at most {MAX_ID_CHARS} characters, "
                f"got {shown(c.value('rid', i))}"
            ),
        ),
    ]


def _rid_ok(c: _Cols) -> Mask:
    if c.pa.types.is_integer(c.get("rid").type):
        return c.valid("rid")
    if not c.is_kind("rid"):
        return np.zeros(c.n, dtype=bool)
    length = np.asarray(
        c.pc.utf8_length(c.get("rid")).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64
    )
    return (length > 0) & (length <= MAX_ID_CHARS)


def _text_ok(c: _Cols, name: str, *, required: bool) -> Mask:
    """Cells acceptable as text: strings (non-empty when required), or null when optional."""
    valid = c.valid(name)
    if not c.is_kind(name):
        return ~valid if not required else np.zeros(c.n, dtype=bool)
    if not required:
        return np.ones(c.n, dtype=bool)
    length = c.pc.utf8_length(c.get(name)).fill_null(0)
    return np.asarray(length.to_numpy(zero_copy_only=False), dtype=np.int64) > 0


def _in_range(v: npt.NDArray[np.float64], top: float) -> Mask:
    """0 ≤ v ≤ top (NaN and ±inf fall outside)."""
    with np.errstate(invalid="ignore"):
        ok: Mask = (v >= 0) & (v <= top)
    return ok


def _time_message(c: _Cols, name: str, i: int) -> str:
    """The event path's message for a bad time (`rvguard.events._time`)."""
    value = c.value(name, i)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number, got {shown(value)}"
    what = "must not be negative" if value < 0 else f"must be finite and at most {MAX_TIME:g} s"
    return f"{what}, got {shown(value)}"


def _time_ok(c: _Cols, name: str) -> Mask:
    valid = c.valid(name)
    if not c.is_number(name):
        return ~valid
    return ~valid | _in_range(c.floats(name), MAX_TIME)


def _deadline_after_t(c: _Cols) -> Mask:
    """A present, in-range deadline is not before its row's time (both in range, so exact)."""
    if not c.is_number("deadline") or not c.is_number("t"):
        return np.ones(c.n, dtype=bool)
    with np.errstate(invalid="ignore"):
        late: Mask = ~(c.floats("deadline") < c.floats("t"))
    return late


def _count_ok(c: _Cols, name: str) -> Mask:
    valid = c.valid(name)
    if not c.is_number(name):
        return ~valid
    v = c.floats(name)
    with np.errstate(invalid="ignore"):
        ok: Mask = ~valid | (_in_range(v, MAX_TOKENS) & (v == np.floor(v)))
    return ok


def _kind_checks(c: _Cols, kind: npt.NDArray[np.int64]) -> list[Check]:
    """Per-kind field checks, in `event_from_dict`'s order."""
    arrive = kind == KIND_CODES[EventKind.ARRIVE]
    admit = kind == KIND_CODES[EventKind.ADMIT]
    reasoned = np.isin(kind, [KIND_CODES[EventKind(k)] for k in _REASON_KINDS])
    basis = c.member("basis", _BASIS_NAMES)
    checks: list[Check] = [
        (arrive & ~_text_ok(c, "tenant", required=True), "tenant", _got(c, "tenant", "a non-empty string")),
        (arrive & ~_time_ok(c, "deadline"), "deadline", lambda i: _time_message(c, "deadline", i)),
        (arrive & ~_deadline_after_t(c), "deadline", lambda i: _before_t(c, i)),
        (
            arrive & ~_count_ok(c, "prompt_tokens"),
            "prompt_tokens",
            _got(c, "prompt_tokens", _WHOLE),
        ),
        (arrive & ~_count_ok(c, "max_tokens"), "max_tokens", _got(c, "max_tokens", _WHOLE)),
        (admit & c.valid("basis") & (basis < 0), "basis", _got(c, "basis", "one of floor, surplus, demoted")),
        (reasoned & ~_text_ok(c, "reason", required=False), "reason", _got(c, "reason", "a string")),
    ]
    checks[5:5] = _proposal_checks(c, arrive)
    return checks


def _got(c: _Cols, name: str, what: str) -> Callable[[int], str]:
    return lambda i: f"must be {what}, got {shown(c.value(name, i))}"


def _before_t(c: _Cols, i: int) -> str:
    return f"is before the arrival time t = {float(c.value('t', i))!r}, got {float(c.value('deadline', i))!r}"


_WHOLE = f"a whole number in [0, {MAX_TOKENS}]"
_PROPOSAL_COLS = ("proposal_admit", "proposal_objective", "proposal_priority_hint")


def _proposals(c: _Cols, arrive: Mask) -> dict[int, Proposal | TraceError]:
    """Each arrive row's proposal (or its error), built by the event path's own validation."""
    present = np.zeros(c.n, dtype=bool)
    for name in _PROPOSAL_COLS:
        if name in c.names:
            present |= c.valid(name)
    out: dict[int, Proposal | TraceError] = {}
    for i in np.flatnonzero(arrive & present):
        prop = {n[len("proposal_") :]: c.value(n, int(i)) for n in _PROPOSAL_COLS if n in c.names}
        rec = {"t": 0, "kind": "arrive", "rid": "r", "tenant": "x"}
        rec["proposal"] = {k: v for k, v in prop.items() if v is not None}
        try:
            ev = event_from_dict(rec)
        except TraceError as err:
            out[int(i)] = err
        else:
            out[int(i)] = ev.proposal  # type: ignore[union-attr,assignment]
    return out


def _proposal_checks(c: _Cols, arrive: Mask) -> list[Check]:
    c.proposals = _proposals(c, arrive)
    bad = np.zeros(c.n, dtype=bool)
    fields: dict[int, TraceError] = {}
    for i, p in c.proposals.items():
        if isinstance(p, TraceError):
            bad[i] = True
            fields[i] = p
    if not fields:
        return []
    # One check per distinct field, so each row reports the field the event path names.
    return [
        (
            bad & np.isin(np.arange(c.n), [i for i, e in fields.items() if e.field == f]),
            f,
            lambda i: fields[i].reason,
        )
        for f in dict.fromkeys(e.field for e in fields.values())
    ]


def _first_errors(checks: list[Check], n: int, name: str) -> tuple[Mask, list[TraceError]]:
    """Rows with at least one failing check, and each one's first error (by row)."""
    bad = np.zeros(n, dtype=bool)
    errors: dict[int, TraceError] = {}
    for mask, field, message in checks:
        for i in np.flatnonzero(mask & ~bad):
            errors[int(i)] = TraceFormatError(message(int(i)), path=name, line=int(i) + 1, field=field)
        bad |= mask
    return bad, [errors[i] for i in sorted(errors)]


def parquet_columnar(path: PathArg, *, lenient: bool, errors: list[TraceError] | None) -> ColumnarTrace:
    """Read a Parquet trace into columns (see the module docstring); bad rows raise or are collected.

    Raises:
        TraceFormatError: (strict) the first bad row; a file that is not Parquet.
    """
    return table_columnar(open_parquet(path).read(), display_name(path), lenient=lenient, errors=errors)


def table_columnar(
    table: Any, name: str, *, lenient: bool = False, errors: list[TraceError] | None = None
) -> ColumnarTrace:
    """`parquet_columnar` of a ``pyarrow.Table`` already read (``name``: the file, for errors).

    Raises:
        TraceFormatError: (strict) the first bad row.
    """
    c = _Cols(table)
    kind = c.member("kind", _KIND_NAMES)
    if bool(np.isin(kind, _OTHER_CODES).any()):
        return _via_events(table, name, lenient=lenient, errors=errors)
    checks = _row_cell_checks(c) + _core_checks(c, kind) + _kind_checks(c, kind)
    bad, found = _first_errors(checks, c.n, name)
    if found and not lenient:
        raise found[0]
    if errors is not None:
        errors.extend(found)
    return _build(c, kind, np.flatnonzero(~bad))


def _via_events(table: Any, name: str, *, lenient: bool, errors: list[TraceError] | None) -> ColumnarTrace:
    """The event path, row by row (`iter_parquet`'s rules): for tables with rows of kinds the columns
    do not hold."""
    lines: list[int] = []
    events: list[Event] = []
    line = 0
    for batch in table.to_batches(max_chunksize=BATCH_ROWS):
        for row in batch.to_pylist():
            line += 1
            try:
                events.append(event_from_dict(record_from_row(row)))
            except TraceError as err:
                located = err.located(path=name, line=line)
                if not lenient:
                    raise located from None
                if errors is not None:
                    errors.append(located)
                continue
            lines.append(line)
    return ColumnarTrace.from_events(events, lines=lines)


def _encode(c: _Cols, arr: Any) -> tuple[npt.NDArray[np.int64], tuple[str, ...]]:
    """Dictionary-encode strings in first-appearance order; nulls become -1."""
    enc = c.pc.dictionary_encode(c.pc.cast(arr, c.pa.string()))
    codes = np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return codes, tuple(enc.dictionary.to_pylist())


def _build(c: _Cols, kind_all: npt.NDArray[np.int64], keep: npt.NDArray[np.int64]) -> ColumnarTrace:
    take = c.pa.array(keep, type=c.pa.int64())
    kind = kind_all[keep]
    arrive = kind == KIND_CODES[EventKind.ARRIVE]
    admit = kind == KIND_CODES[EventKind.ADMIT]
    reasoned = np.isin(kind, [KIND_CODES[EventKind(k)] for k in _REASON_KINDS])
    null = c.pa.nulls(len(keep), c.pa.string())
    rid, rid_names = _encode(c, c.get("rid").take(take))
    tenant_col = c.get("tenant").take(take) if c.is_kind("tenant") else null
    tenant, tenant_names = _encode(c, c.pc.if_else(c.pa.array(arrive), tenant_col, null))
    named = c.member("basis", _BASIS_NAMES)[keep]
    basis = np.where(admit, np.where(named < 0, BASIS_CODES[Basis.SURPLUS], named), -1).astype(np.int8)
    reasons = c.get("reason").take(take).to_pylist() if c.is_kind("reason") else [None] * len(keep)
    return ColumnarTrace(
        t=c.floats("t")[keep],
        kind=kind.astype(np.int8),
        rid=rid,
        rid_names=rid_names,
        tenant=tenant,
        tenant_names=tenant_names,
        deadline=np.where(arrive, _numbers(c, "deadline", np.nan)[keep], np.nan),
        prompt_tokens=np.where(arrive, _numbers(c, "prompt_tokens", -1)[keep], -1).astype(np.int64),
        max_tokens=np.where(arrive, _numbers(c, "max_tokens", -1)[keep], -1).astype(np.int64),
        basis=basis,
        reason=tuple(r or "" if ok else "" for r, ok in zip(reasons, reasoned, strict=True)),
        line=keep.astype(np.int64) + 1,
        proposals=_proposals_kept(c, keep),
    )


def _numbers(c: _Cols, name: str, missing: float) -> npt.NDArray[np.float64]:
    if not c.is_number(name):
        return np.full(c.n, missing)
    v = c.floats(name)
    return np.where(np.isnan(v), missing, v)


def _proposals_kept(c: _Cols, keep: npt.NDArray[np.int64]) -> tuple[Proposal | None, ...]:
    """Each kept row's proposal (None for most): built from the few rows that have one."""
    out: list[Proposal | None] = [None] * len(keep)
    found = {i: p for i, p in c.proposals.items() if isinstance(p, Proposal)}
    if found:
        rows = np.array(sorted(found), dtype=np.int64)
        at = np.searchsorted(keep, rows)
        for j, i in zip(at.tolist(), rows.tolist(), strict=True):
            if j < len(keep) and keep[j] == i:
                out[j] = found[i]
    return tuple(out)
