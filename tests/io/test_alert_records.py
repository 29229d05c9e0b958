"""The watch's ``alert`` records round-trip through JSONL, CSV and Parquet, and bad ones are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvguard.errors import TraceFormatError
from rvguard.events import Arrive, Watch, event_from_dict
from rvguard.io import read_events, write_events

EVENTS = [
    Watch(0.5, "service", 0.9, 0.5, 0.4, 0.5),
    Arrive(1.0, "a", "assured"),
    Watch(2.0, "backlog", 7.0, 6.0),
    Watch(3.0, "clear", since=0.4, floor_scale=1.0),
]


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_alert_records_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"t.{suffix}"
    write_events(path, EVENTS)
    assert [ev for _, ev in read_events(path)] == EVENTS


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"t": 1, "kind": "alert", "condition": "hot"}, "condition"),
        ({"t": 1, "kind": "alert", "condition": "service", "rid": "r"}, "rid"),
        ({"t": 1, "kind": "alert", "condition": "service", "value": "x"}, "value"),
        ({"t": 1, "kind": "alert", "condition": "service", "since": -1}, "since"),
        ({"t": 1, "kind": "alert", "condition": "service", "floor_scale": 1.5}, "floor_scale"),
    ],
)
def test_a_bad_alert_is_refused_naming_its_field(record: dict[str, object], field: str) -> None:
    with pytest.raises(TraceFormatError) as info:
        event_from_dict(record)
    assert info.value.field == field
