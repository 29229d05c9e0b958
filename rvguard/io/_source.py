"""Where a trace lives: its format (by suffix) and the name errors show.

Kept apart so that every reader and writer agrees on the suffix table and on
how ``-`` (stdin/stdout) is named in messages.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Literal, TypeAlias

from ..errors import TraceFormatError

__all__ = ["STDIO", "PathArg", "TraceFormat", "display_name", "trace_format"]

PathArg: TypeAlias = str | PathLike[str]
TraceFormat: TypeAlias = Literal["jsonl", "csv", "parquet"]

STDIO = "-"
_SUFFIXES: dict[str, TraceFormat] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def display_name(path: PathArg) -> str:
    """The file name used in error messages (``<stdin>`` for ``-``)."""
    text = str(path)
    return "<stdin>" if text == STDIO else text


def trace_format(path: PathArg) -> TraceFormat:
    """The trace format of ``path``, chosen by its suffix; ``-`` is JSON Lines.

    Raises:
        TraceFormatError: the suffix is not one of .jsonl .ndjson .json .csv .parquet .pq.
    """
    if str(path) == STDIO:
        return "jsonl"
    suffix = Path(path).suffix.lower()
    try:
        return _SUFFIXES[suffix]
    except KeyError:
        known = " ".join(sorted(_SUFFIXES))
        raise TraceFormatError(
            f"unknown trace format {suffix or '(no suffix)'!r}; use one of {known}", path=display_name(path)
        ) from None
