"""Reading traces of any supported format, strictly or leniently.

`iter_records` is the primitive: (line, event-or-error) pairs, errors as
values. `read_events` builds the two policies on it: strict raises the first
located error; lenient keeps going and collects the errors on the reader
(`EventReader.errors`) so nothing is ever skipped silently.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..columnar import ColumnarTrace
from ..errors import TraceError
from ..events import Event
from ._source import PathArg, trace_format

__all__ = ["EventReader", "iter_records", "read_columnar", "read_events"]


def iter_records(path: PathArg) -> Iterator[tuple[int, Event | TraceError]]:
    """Each record of a trace as (line number, event or located `TraceError`).

    The format comes from the suffix (.jsonl/.ndjson/.json, .csv, .parquet);
    ``-`` is JSON Lines on stdin. Memory is constant (Parquet: one record batch).

    Raises:
        TraceFormatError: the suffix is unknown.
        MissingExtraError: a Parquet file without pyarrow installed.
        OSError: the file cannot be opened.
    """
    fmt = trace_format(path)
    if fmt == "csv":
        from .csv import iter_csv

        return iter_csv(path)
    if fmt == "parquet":
        from .parquet import iter_parquet

        return iter_parquet(path)
    from .jsonl import iter_jsonl

    return iter_jsonl(path)


class EventReader(Iterator[tuple[int, Event]]):
    """Iterates (line, event) over a trace; in lenient mode bad records land in `errors`.

    Attributes:
        errors: the located errors of the bad records seen so far (lenient mode).
        records: the number of records (good and bad) seen so far.
    """

    def __init__(self, path: PathArg, *, lenient: bool = False) -> None:
        self.lenient = lenient
        self.errors: list[TraceError] = []
        self.records = 0
        self._it = iter_records(path)

    def __iter__(self) -> EventReader:
        return self

    def __next__(self) -> tuple[int, Event]:
        for line, item in self._it:
            self.records += 1
            if not isinstance(item, TraceError):
                return line, item
            if not self.lenient:
                raise item
            self.errors.append(item)
        raise StopIteration


def read_events(path: PathArg, *, lenient: bool = False) -> EventReader:
    """The events of a trace with their line numbers, streaming.

    Args:
        path: the trace file, or ``-`` for JSON Lines on stdin.
        lenient: keep going past bad records, collecting them in the reader's
            ``errors`` (strict mode raises at the first one).

    Raises:
        TraceError: (strict, while iterating) the first bad record, with path, line and field.
    """
    return EventReader(path, lenient=lenient)


def read_columnar(
    path: PathArg, *, lenient: bool = False, errors: list[TraceError] | None = None
) -> ColumnarTrace:
    """A whole trace in columnar form, rows keeping their source line numbers.

    Parquet goes straight from the Arrow columns (vectorised, same checks as
    the event path); other formats go through `read_events`.

    Args:
        path: the trace file.
        lenient: leave bad records out instead of raising; they are appended to ``errors``.
        errors: where lenient reading reports the bad records (required with ``lenient``,
            so that nothing is dropped silently).

    Raises:
        TraceError: (strict) the first bad record.
        ValueError: ``lenient`` without an ``errors`` list.
    """
    if lenient and errors is None:
        raise ValueError("lenient reading needs errors=[]: bad records are reported, never dropped silently")
    if trace_format(path) == "parquet":
        from .parquet_columns import parquet_columnar

        return parquet_columnar(path, lenient=lenient, errors=errors)
    reader = read_events(path, lenient=lenient)
    lines: list[int] = []
    events: list[Event] = []
    for line, ev in reader:
        lines.append(line)
        events.append(ev)
    if errors is not None:
        errors.extend(reader.errors)
    return ColumnarTrace.from_events(events, lines=lines)
