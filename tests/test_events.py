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
