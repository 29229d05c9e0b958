"""Event records: validation names the field; unknown fields are kept; round trip."""

from __future__ import annotations

from typing import Any

import pytest

from rvguard.errors import TraceFormatError
from rvguard.events import Arrive, event_from_dict, event_to_dict


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"kind": "arrive", "rid": "a", "tenant": "x"}, "t"),
        ({"t": 1.0, "rid": "a"}, "kind"),
        ({"t": 1.0, "kind": "teleport", "rid": "a"}, "kind"),
        ({"t": float("nan"), "kind": "dispatch", "rid": "a"}, "t"),
        ({"t": float("inf"), "kind": "dispatch", "rid": "a"}, "t"),
        ({"t": -0.5, "kind": "dispatch", "rid": "a"}, "t"),
        ({"t": "1", "kind": "dispatch", "rid": "a"}, "t"),
        ({"t": 1.0, "kind": "dispatch", "rid": ""}, "rid"),
        ({"t": 1.0, "kind": "arrive", "rid": "a"}, "tenant"),
        ({"t": 1.0, "kind": "arrive", "rid": "a", "tenant": "x", "max_tokens": float("nan")}, "max_tokens"),
        ({"t": 1.0, "kind": "arrive", "rid": "a", "tenant": "x", "prompt_tokens": 1.5}, "prompt_tokens"),
        (
            {"t": 1.0, "kind": "arrive", "rid": "a", "tenant": "x", "proposal": {"admit": "yes"}},
            "proposal.admit",
        ),
        (
            {
                "t": 1.0,
                "kind": "arrive",
                "rid": "a",
                "tenant": "x",
                "proposal": {"priority_hint": float("nan")},
            },
            "proposal.priority_hint",
        ),
        ({"t": 1.0, "kind": "admit", "rid": "a", "basis": "vip"}, "basis"),
        # DESIGN §10
        ({"t": 1.0, "kind": "sample", "rid": "a", "resource": "kv", "value": 0.5, "sample_time": 1}, "rid"),
        ({"t": 1.0, "kind": "sample", "value": 0.5, "sample_time": 1}, "resource"),
        ({"t": 1.0, "kind": "sample", "resource": "kv", "value": 1.5, "sample_time": 1}, "value"),
        ({"t": 1.0, "kind": "sample", "resource": "kv", "value": True, "sample_time": 1}, "value"),
        ({"t": 1.0, "kind": "sample", "resource": "kv", "value": 0.5}, "sample_time"),
        ({"t": 1.0, "kind": "sample", "resource": "kv", "value": 0.5, "sample_time": -1}, "sample_time"),
        ({"t": 1.0, "kind": "demote", "rid": "a", "sample_time": 1}, "resource"),
        ({"t": 1.0, "kind": "restore", "rid": "a", "resource": "kv", "sample_time": None}, "sample_time"),
        ({"t": 1.0, "kind": "evict", "rid": "a"}, "state"),
        ({"t": 1.0, "kind": "evict", "rid": "a", "state": 2.5}, "state"),
        ({"t": 1.0, "kind": "relocate", "rid": "a", "engine": ""}, "engine"),
        ({"t": 1.0, "kind": "route", "rid": "a"}, "engine"),
        ({"t": 1.0, "kind": "route", "rid": "a", "engine": "e", "mode": "argmax"}, "mode"),
        ({"t": 1.0, "kind": "route", "rid": "a", "engine": "e", "view_time": float("nan")}, "view_time"),
        ({"t": 1.0, "kind": "route", "engine": "e"}, "rid"),
    ],
)
def test_bad_records_name_the_field(record: dict[str, Any], field: str) -> None:
    with pytest.raises(TraceFormatError) as info:
        event_from_dict(record)
    assert info.value.field == field


def test_unknown_fields_are_kept_and_written_back() -> None:
    rec = {
        "t": 1.0,
        "kind": "arrive",
        "rid": "a",
        "tenant": "x",
        "region": "eu",
        "proposal": {"admit": False},
    }
    ev = event_from_dict(rec)
    assert isinstance(ev, Arrive)
    assert ev.extra == {"region": "eu"}
    assert event_to_dict(ev) == rec


def test_integer_rids_are_read_as_strings() -> None:
    assert event_from_dict({"t": 0, "kind": "dispatch", "rid": 7}).rid == "7"


def test_runbook_records_round_trip_and_a_sample_has_no_rid() -> None:
    from rvguard.events import PREEMPTED, Route, RouteMode, Sample

    rec = {"t": 2.0, "kind": "sample", "resource": "kv", "value": 0.25, "sample_time": 1.5, "gpu": 1}
    ev = event_from_dict(rec)
    assert isinstance(ev, Sample) and ev.rid == "" and dict(ev.extra) == {"gpu": 1}
    assert event_to_dict(ev) == {**rec, "t": 2.0}
    route = event_from_dict({"t": 1, "kind": "route", "rid": "a", "engine": "e1", "mode": None})
    assert route == Route(1.0, "a", "e1", None, RouteMode.P2C)  # absent or null mode: p2c
    assert event_to_dict(route) == {"t": 1.0, "kind": "route", "rid": "a", "engine": "e1", "mode": "p2c"}
    assert PREEMPTED == "preempted"
