"""CSV traces: one row per event, the DESIGN §8 fields as columns.

Columns: ``t,kind,rid,tenant,deadline,prompt_tokens,max_tokens,proposal_admit,
proposal_objective,proposal_priority_hint,basis,reason``, then the DESIGN §10
fields ``resource,value,sample_time,state,engine,view_time,mode,headroom,target,
capacity`` and the DESIGN §12 alert's ``condition,bound,since,floor_scale``; any
other column is an unknown field kept in the event's ``extra``. Only ``t``,
``kind`` and ``rid`` are required in the header. An empty cell means "absent".
Numeric columns (and extra columns) are parsed as numbers when they read as one;
text columns stay text (a rid ``007`` stays ``"007"``). Line numbers are
physical file lines, the header being line 1. Validation is
`rvguard.events.event_from_dict`'s, located here.

Lossy corners, by design: an extra whose text reads as a number comes back
as that number, an empty-string extra comes back absent, and a list or
object extra is written as JSON text and comes back as text.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any

from ..errors import LineTooLongError, TraceError, TraceFormatError
from ..events import Event, event_from_dict, event_to_dict
from ._lines import bounded_lines
from ._source import PathArg, display_name

__all__ = ["COLUMNS", "CsvWriter", "iter_csv", "record_from_row"]

COLUMNS: tuple[str, ...] = (
    "t",
    "kind",
    "rid",
    "tenant",
    "deadline",
    "prompt_tokens",
    "max_tokens",
    "proposal_admit",
    "proposal_objective",
    "proposal_priority_hint",
    "basis",
    "reason",
    # DESIGN §10: sample, demote/restore, evict, route/relocate
    "resource",
    "value",
    "sample_time",
    "state",
    "engine",
    "view_time",
    "mode",
    "headroom",
    "target",
    "capacity",
    # DESIGN §12: the watch's alert
    "condition",
    "bound",
    "since",
    "floor_scale",
)
_REQUIRED = ("t", "kind", "rid")
_TEXT = frozenset(
    {
        "kind",
        "rid",
        "tenant",
        "basis",
        "reason",
        "proposal_objective",
        "resource",
        "engine",
        "mode",
        "condition",
    }
)
_PROPOSAL = "proposal_"
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def parse_number(cell: str, column: str) -> Any:
    """``cell`` as an int or a float when it reads as one, else the text unchanged.

    Raises:
        TraceFormatError: a number too large to be finite (``1e999``), or an
            integer longer than Python's 4300-digit limit.
    """
    if _INT.fullmatch(cell):
        try:
            return int(cell)
        except ValueError:
            raise TraceFormatError("integer longer than 4300 digits", field=column) from None
    if _FLOAT.fullmatch(cell):
        value = float(cell)
        if not math.isfinite(value):
            raise TraceFormatError(f"non-finite number {cell!r}", field=column)
        return value
    return cell


def _cell_value(column: str, cell: str) -> Any:
    if column in _TEXT:
        return cell
    if column == "proposal_admit":
        return {"true": True, "false": False}.get(cell.lower(), cell)
    return parse_number(cell, column)


def record_from_row(header: Sequence[str], row: Sequence[str]) -> dict[str, Any]:
    """A trace record (as `event_from_dict` takes it) from one CSV row; empty cells are absent."""
    rec: dict[str, Any] = {}
    proposal: dict[str, Any] = {}
    for column, cell in zip(header, row, strict=True):
        if cell == "":
            continue
        value = _cell_value(column, cell)
        if column.startswith(_PROPOSAL) and column in COLUMNS:
            proposal[column[len(_PROPOSAL) :]] = value
        else:
            rec[column] = value
    if proposal:
        rec["proposal"] = proposal
    return rec


class _Lines:
    """Feeds the csv module file lines while remembering whether the last one ended with a newline."""

    def __init__(self, stream: Iterable[str]) -> None:
        self._stream = iter(stream)
        self.ended = True

    def __iter__(self) -> Iterator[str]:
        for line in self._stream:
            self.ended = line.endswith("\n")
            yield line


def _check_header(header: list[str] | None) -> list[str]:
    if not header or header == [""]:
        raise TraceFormatError("empty file: no header line")
    seen: set[str] = set()
    for column in header:
        if column in seen:
            raise TraceFormatError("duplicate column in the header", field=column)
        seen.add(column)
    for column in _REQUIRED:
        if column not in seen:
            raise TraceFormatError(f"missing column (the header has {','.join(header)})", field=column)
    return header


def _row_event(header: list[str], row: list[str], *, ended: bool) -> Event:
    if not row:
        raise TraceFormatError("blank line (only the newline that ends the file may be empty)")
    if len(row) != len(header):
        what = f"has {len(row)} cells, the header has {len(header)}"
        raise TraceFormatError(what if ended else f"truncated last line: {what}")
    return event_from_dict(record_from_row(header, row))


def iter_csv(path: PathArg) -> Iterator[tuple[int, Event | TraceError]]:
    """Each data row of a CSV trace as (file line, event or located error); constant memory.

    A bad header yields one error at line 1 and ends the file.

    Raises:
        LineTooLongError: a line over `MAX_LINE_BYTES` characters (the rest is unreadable).
    """
    name = display_name(path)
    with open(path, encoding="utf-8-sig", newline="") as stream:
        yield from _iter_stream(stream, name)


def _iter_stream(stream: IO[str], name: str) -> Iterator[tuple[int, Event | TraceError]]:
    lines = _Lines(bounded_lines(stream, name))
    reader = csv.reader(lines, strict=True)
    try:
        header = _check_header(next(reader, None))
    except LineTooLongError:
        raise
    except (TraceError, csv.Error, UnicodeDecodeError) as exc:
        yield 1, _locate(exc, name, 1)
        return
    start = reader.line_num + 1
    while True:
        try:
            row = next(reader, None)
            if row is None:
                return
            yield start, _row_event(header, row, ended=lines.ended)
        except LineTooLongError:
            raise
        except (TraceError, csv.Error) as exc:
            yield start, _locate(exc, name, start)
        except UnicodeDecodeError as exc:
            yield start, _locate(exc, name, start)
            return
        start = reader.line_num + 1


def _locate(exc: Exception, name: str, line: int) -> TraceError:
    if isinstance(exc, TraceError):
        return exc.located(path=name, line=line)
    if isinstance(exc, UnicodeDecodeError):
        return TraceFormatError("not UTF-8 text", path=name, line=line)
    return TraceFormatError(f"malformed CSV: {exc}", path=name, line=line)


def _cell(value: Any) -> str:
    """The CSV text of one value; floats as ``repr`` so they round-trip exactly."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        raise TypeError(f"non-finite number {value!r}")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def row_of(event: Event, header: Sequence[str]) -> list[str]:
    """The CSV row of an event under ``header``; raises `KeyError` naming a field the header lacks."""
    rec = event_to_dict(event)
    prop = rec.pop("proposal", None) or {}
    for key, value in prop.items():
        rec[_PROPOSAL + key] = value
    missing = [k for k in rec if k not in header]
    if missing:
        raise KeyError(missing[0])
    return [_cell(rec.get(column)) for column in header]


class CsvWriter:
    """Streams events to a CSV trace (see the module docstring for columns)."""

    def __init__(self, path: PathArg, *, extra_columns: Sequence[str] | None = None) -> None:
        self.path = display_name(path)
        self._out = open(path, "w", encoding="utf-8", newline="")  # noqa: SIM115
        self._csv = csv.writer(self._out, lineterminator="\n")
        self._header: list[str] | None = None
        if extra_columns is not None:
            self._start(extra_columns)
        self._count = 0

    def _start(self, extra: Iterable[str]) -> None:
        self._header = list(COLUMNS) + [c for c in dict.fromkeys(extra) if c not in COLUMNS]
        self._csv.writerow(self._header)

    def write(self, event: Event) -> None:
        """Append one event.

        Raises:
            TraceFormatError: an unknown field with no column, or a non-finite number.
        """
        self._count += 1
        if self._header is None:
            self._start(event.extra)
        assert self._header is not None
        try:
            self._csv.writerow(row_of(event, self._header))
        except KeyError as exc:
            msg = "no CSV column for this unknown field (declare it in extra_columns)"
            raise TraceFormatError(
                msg, path=self.path, line=self._count + 1, field=str(exc.args[0])
            ) from None
        except TypeError as exc:
            raise TraceFormatError(f"cannot write: {exc}", path=self.path, line=self._count + 1) from None

    def close(self) -> None:
        """Write the header if nothing was written, flush and close."""
        if self._header is None:
            self._start(())
        self._out.close()
