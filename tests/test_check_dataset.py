"""`rvguard check` over a partitioned trace: the report of the partitions' concatenation."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.check import check_trace
from rvguard.cli import main
from rvguard.contract import Contract
from rvguard.errors import TraceFormatError, TraceOrderError
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event

from .monitors.strategies import small_contract, wellformed_traces
from .partitioned import write_one, write_partitions

CONTRACT = small_contract("tokens")
PROPS = ("AF", "SF", "DR", "WF", "ND")


def _report(path: Path, contract: Contract = CONTRACT, **kw: Any) -> dict[str, Any]:
    d = check_trace(str(path), contract, properties=PROPS, **kw).to_dict()
    del d["trace"], d["seconds"]
    return d


@settings(max_examples=60, deadline=None)
@given(st.data(), wellformed_traces(max_steps=40))
def test_a_partitioned_trace_checks_as_its_concatenation(data: st.DataObject, events: list[Event]) -> None:
    """Cuts anywhere (inside windows, across open requests, empty partitions): the same report."""
    cut_rows = data.draw(st.lists(st.integers(0, len(events)), max_size=12))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        one = _report(write_one(events, root / "one.parquet"))
        parts = write_partitions(events, cut_rows, root / "ds")
        assert _report(parts) == one
        assert _report(parts / "hour=*" / "*.parquet") == one  # a glob names the same partitions


def _trace() -> list[Event]:
    return [
        Arrive(0.0, "a", "a"),
        Admit(0.1, "a", Basis.FLOOR),
        Dispatch(0.2, "a"),
        Arrive(0.3, "b", "b"),
        Complete(0.4, "a"),
    ]


def test_partitions_are_taken_in_natural_order(tmp_path: Path) -> None:
    """hour=10 after hour=9: text order would put the complete before its arrive (a WF error)."""
    events = _trace()
    write_partitions(events, list(range(1, len(events))) + [len(events)] * 7, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir())[:3] == ["hour=0", "hour=1", "hour=10"]
    assert _report(tmp_path) == _report(write_one(events, tmp_path.parent / "one.parquet"))


def test_time_going_back_across_partitions_names_the_partition_and_row(tmp_path: Path) -> None:
    write_one([Arrive(1.0, "x", "a"), Arrive(2.0, "y", "a")], tmp_path / "p1.parquet")
    write_one([Arrive(3.0, "z", "a"), Arrive(1.5, "w", "a")], tmp_path / "p2.parquet")
    with pytest.raises(TraceOrderError) as info:
        check_trace(str(tmp_path), CONTRACT)
    assert info.value.path.endswith("p2.parquet") and info.value.line == 2
    (tmp_path / "p2.parquet").unlink()
    write_one([Arrive(1.5, "w", "a")], tmp_path / "p2.parquet")
    with pytest.raises(TraceOrderError) as info:
        check_trace(str(tmp_path), CONTRACT)
    assert info.value.path.endswith("p2.parquet") and info.value.line == 1


def test_a_stray_file_is_an_input_error_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_partitions([Arrive(0.0, "a", "assured"), Admit(0.1, "a", Basis.FLOOR)], [1], tmp_path)
    (tmp_path / "_SUCCESS").write_text("")  # markers and hidden files are skipped
    (tmp_path / ".crc").write_text("")
    spec = Path(__file__).parent.parent / "specs" / "marquee.yaml"
    assert main(["check", str(tmp_path), "--contract", str(spec)]) == 0
    (tmp_path / "hour=1" / "notes.txt").write_text("not a partition")
    assert main(["check", str(tmp_path), "--contract", str(spec)]) == 2
    assert "hour=1/notes.txt: not a Parquet partition" in capsys.readouterr().err


def test_a_partition_that_is_not_parquet_is_named(tmp_path: Path) -> None:
    write_partitions(_trace(), [2], tmp_path)
    (tmp_path / "hour=1" / "part.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(TraceFormatError) as info:
        check_trace(str(tmp_path), CONTRACT)
    assert info.value.path.endswith("hour=1/part.parquet") and "not a readable Parquet file" in str(
        info.value
    )


def test_lenient_bad_lines_name_their_partition(tmp_path: Path) -> None:
    events = [*_trace(), Complete(0.5, "zz")]  # zz never arrived
    write_partitions(events, [3], tmp_path)
    report = check_trace(str(tmp_path), CONTRACT, lenient=True)
    [bad] = report.bad_lines
    assert (bad.line, bad.field) == (3, "rid") and bad.path.endswith("hour=1/part.parquet")
    assert report.to_dict()["bad_lines"][0]["path"] == bad.path


def test_no_partition_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="no Parquet partition"):
        check_trace(str(tmp_path), CONTRACT)
    with pytest.raises(TraceFormatError, match="no Parquet partition"):
        check_trace(str(tmp_path / "*.parquet"), CONTRACT)
