"""A partitioned trace: a directory or a glob of Parquet files, read as one trace.

Large traces are written in partitions (one file an hour, say). The trace
they make is their concatenation, partition after partition in the
*natural order of their paths* (runs of digits compared as numbers, so
``hour=9`` comes before ``hour=10``); within a partition, row order. That
concatenation must itself be a trace in time order: a partition whose first
event is earlier than the previous one's last is a `TraceOrderError` at that
row, as in one file.

In a directory every file below it is a partition, except names starting
with ``.`` or ``_`` (hidden files, and the ``_SUCCESS``/``_metadata`` markers
that Spark and Arrow write, as Arrow's own dataset reader skips them). Any
other file must be ``.parquet``/``.pq``: a stray file is an error naming it,
never silently skipped. This module only lists paths: no file is opened.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from ..errors import TraceFormatError

__all__ = ["PARTITION_SUFFIXES", "is_dataset", "partitions"]

PARTITION_SUFFIXES = (".parquet", ".pq")
_SKIPPED = (".", "_")
_DIGITS = re.compile(r"(\d+)")


def is_dataset(arg: str) -> bool:
    """True when ``arg`` names a partitioned trace: a directory, or a glob pattern (``*?[``)."""
    return os.path.isdir(arg) or (glob.has_magic(arg) and not os.path.exists(arg))


def _natural(path: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key: digit runs as numbers, the rest as text (``hour=9`` < ``hour=10``)."""
    parts = _DIGITS.split(path)
    return tuple((0, int(p)) if i % 2 else (1, p) for i, p in enumerate(parts))


def _skipped(rel: str) -> bool:
    return any(part.startswith(_SKIPPED) for part in Path(rel).parts)


def _listed(arg: str) -> list[str]:
    if os.path.isdir(arg):
        found = []
        for root, dirs, files in os.walk(arg):
            dirs[:] = [d for d in dirs if not d.startswith(_SKIPPED)]
            found += [os.path.join(root, f) for f in files if not f.startswith(_SKIPPED)]
        return found
    return [p for p in glob.glob(arg, recursive=True) if os.path.isfile(p) and not _skipped(p)]


def partitions(arg: str) -> list[str]:
    """The partition files of a directory or glob, in trace order (see the module docstring).

    Raises:
        TraceFormatError: a file that is not ``.parquet``/``.pq`` (naming it), or no partition at all.
    """
    files = sorted(_listed(arg), key=_natural)
    for f in files:
        if not f.lower().endswith(PARTITION_SUFFIXES):
            raise TraceFormatError(
                "not a Parquet partition: a partitioned trace holds only .parquet or .pq files "
                "(names starting with . or _ are skipped)",
                path=f,
            )
    if not files:
        raise TraceFormatError("no Parquet partition (.parquet or .pq) found", path=arg)
    return files
