"""Writing traces in any supported format, chosen by the file's suffix.

A `TraceWriter` streams: each `write` goes straight to the format's writer
(Parquet buffers one record batch). Use it as a context manager so the file is
flushed and closed even when the producer fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Protocol

from ..events import Event
from ._source import PathArg, trace_format

__all__ = ["TraceWriter", "write_events"]


class _Sink(Protocol):
    def write(self, event: Event) -> None: ...
    def close(self) -> None: ...


def _open_sink(path: PathArg, extra_columns: Sequence[str] | None) -> _Sink:
    fmt = trace_format(path)
    if fmt == "csv":
        from .csv import CsvWriter

        return CsvWriter(path, extra_columns=extra_columns)
    if fmt == "parquet":
        from .parquet import ParquetWriter

        return ParquetWriter(path)
    from .jsonl import JsonlWriter

    return JsonlWriter(path)


class TraceWriter:
    """Writes events to a JSONL, CSV or Parquet trace (by suffix; ``-`` is JSONL on stdout).

    Args:
        path: the output file.
        extra_columns: CSV only: the columns for events' unknown fields. ``None``
            takes them from the first event; a later event with another unknown
            field is an error rather than a silent loss.
    """

    def __init__(self, path: PathArg, *, extra_columns: Sequence[str] | None = None) -> None:
        self._sink = _open_sink(path, extra_columns)
        self._closed = False

    def write(self, event: Event) -> None:
        """Append one event."""
        self._sink.write(event)

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if not self._closed:
            self._closed = True
            self._sink.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def write_events(path: PathArg, events: Iterable[Event]) -> int:
    """Write all ``events`` to ``path`` and return how many were written.

    For CSV, a list (any `Sequence`) gets one column per unknown field found in
    any event; a one-pass iterable takes its columns from the first event.
    """
    extra: list[str] | None = None
    if isinstance(events, Sequence):
        extra = list(dict.fromkeys(k for ev in events for k in ev.extra))
    n = 0
    with TraceWriter(path, extra_columns=extra) as out:
        for ev in events:
            out.write(ev)
            n += 1
    return n
