"""Trace I/O: JSON Lines, CSV and Parquet readers and writers, and the columnar form.

Readers stream with constant memory and report bad records as located
`TraceError`s (file, line, field); writers round-trip exactly.
"""

from __future__ import annotations

from .reader import EventReader as EventReader
from .reader import iter_records as iter_records
from .reader import read_events as read_events
from .writer import TraceWriter as TraceWriter
from .writer import write_events as write_events

__all__ = ["EventReader", "TraceWriter", "iter_records", "read_events", "write_events"]
