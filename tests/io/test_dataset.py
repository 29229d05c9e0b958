"""Listing a partitioned trace: natural path order, markers skipped, stray files named."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvguard.errors import TraceFormatError
from rvguard.io.dataset import is_dataset, partitions


def _touch(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"")


def test_natural_order_numbers_compare_as_numbers(tmp_path: Path) -> None:
    _touch(
        tmp_path, "day=2/hour=10/a.parquet", "day=2/hour=9/a.parquet", "day=10/hour=0/a.pq", "day=2/x.parquet"
    )
    got = [str(Path(p).relative_to(tmp_path)) for p in partitions(str(tmp_path))]
    assert got == [
        "day=2/hour=9/a.parquet",
        "day=2/hour=10/a.parquet",
        "day=2/x.parquet",
        "day=10/hour=0/a.pq",
    ]


def test_markers_and_hidden_names_are_skipped_in_directories_and_globs(tmp_path: Path) -> None:
    _touch(tmp_path, "a.parquet", "_SUCCESS", ".a.parquet.crc", "_tmp/b.parquet", ".hidden/c.parquet")
    assert partitions(str(tmp_path)) == [str(tmp_path / "a.parquet")]
    assert partitions(str(tmp_path / "**" / "*.parquet")) == [str(tmp_path / "a.parquet")]


def test_a_stray_file_is_named(tmp_path: Path) -> None:
    _touch(tmp_path, "a.parquet", "b/readme.md")
    with pytest.raises(TraceFormatError, match="not a Parquet partition") as info:
        partitions(str(tmp_path))
    assert info.value.path == str(tmp_path / "b" / "readme.md")


def test_what_counts_as_a_dataset(tmp_path: Path) -> None:
    _touch(tmp_path, "t.parquet")
    assert is_dataset(str(tmp_path)) and is_dataset(str(tmp_path / "*.parquet"))
    assert not is_dataset(str(tmp_path / "t.parquet")) and not is_dataset("-")
    with pytest.raises(TraceFormatError, match="no Parquet partition"):
        partitions(str(tmp_path / "none-*.parquet"))
