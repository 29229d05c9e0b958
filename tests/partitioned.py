"""Test helper: a trace cut into Parquet partitions at given rows (and the same trace in one file)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from hypothesis import strategies as st

from rvguard.events import Event
from rvguard.io.parquet import ParquetWriter


def write_partitions(events: Sequence[Event], cuts: Sequence[int], root: Path) -> Path:
    """Write ``events`` as partitions ``root/hour=<i>/part.parquet`` split before each cut row.

    The partition names sort wrongly as text past ``hour=9``: the dataset's natural order must be
    numeric. Empty partitions (two equal cuts) are written too.
    """
    edges = [0, *sorted(cuts), len(events)]
    for i, (lo, hi) in enumerate(itertools.pairwise(edges)):
        part = root / f"hour={i}"
        part.mkdir(parents=True, exist_ok=True)
        writer = ParquetWriter(part / "part.parquet")
        for ev in events[lo:hi]:
            writer.write(ev)
        writer.close()
    return root


def write_one(events: Sequence[Event], path: Path) -> Path:
    """The same events in one Parquet file."""
    writer = ParquetWriter(path)
    for ev in events:
        writer.write(ev)
    writer.close()
    return path


def cuts(n: int) -> st.SearchStrategy[list[int]]:
    """Up to 12 cut rows in [0, n] (repeats make empty partitions)."""
    return st.lists(st.integers(0, n), max_size=12)
