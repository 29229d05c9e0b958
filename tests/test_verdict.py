"""Violations are values with a JSON form and a canonical order."""

from __future__ import annotations

from rvguard.events import Arrive, Reject
from rvguard.verdict import Violation


def test_to_dict_has_the_design_fields() -> None:
    v = Violation("AF", "r1", 0.2, (Arrive(0.1, "r1", "a"), Reject(0.2, "r1", "no")), "why", {"window": 0})
    d = v.to_dict()
    assert (d["property"], d["rid"], d["t"], d["detail"], d["context"]) == (
        "AF",
        "r1",
        0.2,
        "why",
        {"window": 0},
    )
    assert [w["kind"] for w in d["witness"]] == ["arrive", "reject"]


def test_key_orders_by_time_then_property_then_rid() -> None:
    vs = [Violation("SF", "b", 1.0, ()), Violation("AF", "z", 1.0, ()), Violation("DR", "a", 0.5, ())]
    assert [v.rid for v in sorted(vs, key=lambda v: v.key)] == ["a", "z", "b"]
