"""Trace I/O: JSON Lines, CSV and Parquet readers and writers, and public-trace importers.

Readers stream with constant memory and report bad records as located
`TraceError`s (file, line, field); writers round-trip exactly.
"""

from __future__ import annotations

from .public import EveryKthRule as EveryKthRule
from .public import FractionRule as FractionRule
from .public import PublicArrival as PublicArrival
from .public import detect_public_format as detect_public_format
from .public import iter_public as iter_public
from .public import read_public as read_public
from .public import to_arrivals as to_arrivals
from .reader import EventReader as EventReader
from .reader import iter_records as iter_records
from .reader import read_columnar as read_columnar
from .reader import read_events as read_events
from .writer import TraceWriter as TraceWriter
from .writer import write_events as write_events

__all__ = [
    "EventReader",
    "EveryKthRule",
    "FractionRule",
    "PublicArrival",
    "TraceWriter",
    "detect_public_format",
    "iter_public",
    "iter_records",
    "read_columnar",
    "read_events",
    "read_public",
    "to_arrivals",
    "write_events",
]
