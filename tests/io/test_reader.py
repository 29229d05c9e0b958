"""Format dispatch, strict and lenient reading over every format."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvguard.errors import TraceError, TraceFormatError
from rvguard.events import Complete, Event
from rvguard.io import iter_records, read_events, write_events

JSONL_BAD = (
    '{"t": 1, "kind": "complete", "rid": "a"}\n'
    '{"t": 2, "kind": "complete"}\n'
    '{"t": 3, "kind": "complete", "rid": "c"}\n'
    "{oops\n"
    '{"t": 5, "kind": "complete", "rid": "e"}\n'
)


def test_strict_raises_first_located_error(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text(JSONL_BAD)
    reader = read_events(p)
    assert next(reader)[0] == 1
    with pytest.raises(TraceFormatError) as info:
        next(reader)
    assert (info.value.path, info.value.line, info.value.field) == (str(p), 2, "rid")


def test_lenient_collects_errors_and_continues(tmp_path: Path) -> None:
    p = tmp_path / "x.ndjson"
    p.write_text(JSONL_BAD)
    reader = read_events(p, lenient=True)
    assert [line for line, _ in reader] == [1, 3, 5]
    assert [(e.line, e.field) for e in reader.errors] == [(2, "rid"), (4, "")]
    assert reader.records == 5


@pytest.mark.parametrize("suffix", [".jsonl", ".ndjson", ".json", ".csv", ".parquet", ".PQ"])
def test_every_suffix_roundtrips(tmp_path: Path, suffix: str) -> None:
    evs: list[Event] = [Complete(t=float(i), rid=f"r{i}", extra={"n": i}) for i in range(5)]
    p = tmp_path / f"x{suffix}"
    assert write_events(p, evs) == 5
    got = [ev for _, ev in read_events(p)]
    assert got == evs
    assert [dict(e.extra) for e in got] == [{"n": i} for i in range(5)]


def test_unknown_suffix_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError) as info:
        iter_records(tmp_path / "x.txt")
    assert "unknown trace format '.txt'" in str(info.value)


def test_csv_errors_through_the_reader(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_text("t,kind,rid\n1,complete,a\n-1,complete,b\n")
    items = list(iter_records(p))
    err = items[1][1]
    assert isinstance(err, TraceError)
    assert (items[1][0], err.line, err.field) == (3, 3, "t")
