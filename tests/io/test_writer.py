"""TraceWriter and write_events: all formats, context manager, extras."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.errors import TraceFormatError
from rvguard.events import Admit, Complete, Event
from rvguard.io import TraceWriter, read_events, write_events

from .trace_strategies import events, same


@settings(max_examples=60, deadline=None)
@given(st.lists(events(), max_size=15), st.sampled_from([".jsonl", ".csv", ".parquet"]))
def test_write_events_roundtrip(
    tmp_path_factory: pytest.TempPathFactory, evs: list[Event], suffix: str
) -> None:
    p = tmp_path_factory.mktemp("w") / f"t{suffix}"
    write_events(p, evs)
    assert same([ev for _, ev in read_events(p)], evs)


def test_context_manager_closes_on_error(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"

    def produce() -> None:
        with TraceWriter(p) as w:
            w.write(Complete(t=1.0, rid="a"))
            raise RuntimeError("producer failed")

    with pytest.raises(RuntimeError):
        produce()
    assert [ev for _, ev in read_events(p)] == [Complete(t=1.0, rid="a")]


def test_close_is_idempotent(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "t.csv")
    w.write(Admit(t=0.0, rid="a"))
    w.close()
    w.close()


def test_generator_csv_takes_columns_from_first_event(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"

    def gen() -> object:
        yield Complete(t=1.0, rid="a", extra={"x": 1})
        yield Complete(t=2.0, rid="b", extra={"y": 2})

    with pytest.raises(TraceFormatError) as info:
        write_events(p, gen())  # type: ignore[arg-type]
    assert info.value.field == "y"


def test_list_csv_gets_union_of_extra_columns(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    evs: list[Event] = [Complete(t=1.0, rid="a", extra={"x": 1}), Complete(t=2.0, rid="b", extra={"y": 2})]
    write_events(p, evs)
    assert same([ev for _, ev in read_events(p)], evs)
