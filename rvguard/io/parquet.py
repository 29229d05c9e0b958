"""Parquet traces: the CSV columns with native types, for large traces.

Columns as in `rvguard.io.csv.COLUMNS` (``t`` float64, token counts int64,
``proposal_admit`` bool, the rest strings); a null is "absent". Any other
column is an unknown field kept in ``extra``; our writer stores extras as one
JSON-text column, ``extra_json``, so that they round-trip whatever their
types. Row numbers (1-based) stand for line numbers in errors. Reading holds
one record batch at a time; writing buffers one batch (64k rows by default).
pyarrow is imported lazily.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from ..bounds import shown
from ..errors import TraceError, TraceFormatError
from ..events import Event, event_from_dict, event_to_dict
from ..untrusted import load_json
from ._arrow import pyarrow, pyarrow_parquet
from ._source import PathArg, display_name
from .csv import COLUMNS

__all__ = ["BATCH_ROWS", "EXTRA_JSON", "ParquetWriter", "iter_parquet", "open_parquet"]

BATCH_ROWS = 65_536
EXTRA_JSON = "extra_json"
_PROPOSAL = "proposal_"
_TYPES = {
    "t": "float64",
    "deadline": "float64",
    "prompt_tokens": "int64",
    "max_tokens": "int64",
    "proposal_admit": "bool_",
    "proposal_priority_hint": "float64",
    "value": "float64",
    "sample_time": "float64",
    "state": "int64",
    "view_time": "float64",
    "headroom": "float64",
    "target": "float64",
    "capacity": "int64",
    "bound": "float64",
    "since": "float64",
    "floor_scale": "float64",
}


def _schema() -> Any:
    pa = pyarrow()
    fields = [pa.field(c, getattr(pa, _TYPES.get(c, "string"))()) for c in (*COLUMNS, EXTRA_JSON)]
    return pa.schema(fields)


def open_parquet(path: PathArg) -> Any:
    """A ``pyarrow.parquet.ParquetFile``; a file that is not Parquet is a `TraceFormatError`."""
    pq = pyarrow_parquet()
    try:
        return pq.ParquetFile(path)
    except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid derives from ValueError
        if isinstance(exc, FileNotFoundError):
            raise
        raise TraceFormatError(f"not a readable Parquet file: {exc}", path=display_name(path)) from None


# Counts and hints arrive as floats from a float column: NaN/inf must be errors, not crashes.
_FINITE_ONLY = {
    "prompt_tokens": "prompt_tokens",
    "max_tokens": "max_tokens",
    "proposal_priority_hint": "proposal.priority_hint",
}


def extra_fields(cell: Any) -> dict[str, Any]:
    """The unknown fields an ``extra_json`` cell holds (JSON text of one object, JSONL's rules).

    Raises:
        TraceFormatError: not text, malformed, too deep, a key twice, or not an object.
    """
    if not isinstance(cell, str):
        raise TraceFormatError(f"must be JSON text, got {shown(cell)}", field=EXTRA_JSON)
    try:
        extra = load_json(cell, parse_constant=_no_constant)
    except ValueError as exc:  # malformed (JSONDecodeError), too deep or a key twice (StructureError)
        raise TraceFormatError(f"malformed JSON: {getattr(exc, 'msg', exc)}", field=EXTRA_JSON) from None
    if not isinstance(extra, dict):
        raise TraceFormatError("must hold a JSON object", field=EXTRA_JSON)
    return extra


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def record_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """A trace record from one Parquet row (nulls absent, proposal_* folded, extra_json merged)."""
    rec: dict[str, Any] = {}
    proposal: dict[str, Any] = {}
    for column, value in row.items():
        if value is None:
            continue
        if column in _FINITE_ONLY and isinstance(value, float) and not math.isfinite(value):
            raise TraceFormatError(f"must be a finite number, got {value!r}", field=_FINITE_ONLY[column])
        if column.startswith(_PROPOSAL) and column in COLUMNS:
            proposal[column[len(_PROPOSAL) :]] = value
        elif column == EXTRA_JSON:
            for key, item in extra_fields(value).items():
                rec.setdefault(key, item)
        else:
            rec[column] = value
    if proposal:
        rec["proposal"] = proposal
    return rec


def iter_parquet(path: PathArg) -> Iterator[tuple[int, Event | TraceError]]:
    """Each row of a Parquet trace as (row number, event or located error), batch by batch.

    A file that is not Parquet yields one error at line 0 and ends.
    """
    name = display_name(path)
    try:
        pf = open_parquet(path)
    except TraceError as err:
        yield 0, err
        return
    line = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS):
        for row in batch.to_pylist():
            line += 1
            try:
                yield line, event_from_dict(record_from_row(row))
            except TraceError as err:
                yield line, err.located(path=name, line=line)


def _row(event: Event) -> dict[str, Any]:
    rec = event_to_dict(event)
    row: dict[str, Any] = {c: rec.pop(c, None) for c in COLUMNS if c in rec}
    for key, value in (rec.pop("proposal", None) or {}).items():
        row[_PROPOSAL + key] = value
    if rec:
        row[EXTRA_JSON] = json.dumps(rec, separators=(",", ":"), allow_nan=False)
    return row


class ParquetWriter:
    """Streams events to a Parquet trace in record batches of ``batch_rows`` rows."""

    def __init__(self, path: PathArg, *, batch_rows: int = BATCH_ROWS) -> None:
        pq = pyarrow_parquet()
        self.path = display_name(path)
        self._schema = _schema()
        self._writer = pq.ParquetWriter(str(path), self._schema)
        self._rows: list[dict[str, Any]] = []
        self._batch_rows = batch_rows
        self._count = 0

    def write(self, event: Event) -> None:
        """Append one event (buffered until a batch is full).

        Raises:
            TraceFormatError: an unknown field JSON cannot carry (NaN, an object).
        """
        self._count += 1
        try:
            self._rows.append(_row(event))
        except (TypeError, ValueError) as exc:
            raise TraceFormatError(f"cannot write: {exc}", path=self.path, line=self._count) from None
        if len(self._rows) >= self._batch_rows:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            pa = pyarrow()
            self._writer.write_batch(pa.RecordBatch.from_pylist(self._rows, schema=self._schema))
            self._rows = []

    def close(self) -> None:
        """Write the last batch and the file footer."""
        self._flush()
        self._writer.close()
