"""`rvguard check`'s driver: a refused line is located from the violation's data, not its prose."""

from __future__ import annotations

import pytest

from rvguard.check import _protocol_error
from rvguard.events import Admit, Arrive, Complete, Event
from rvguard.verdict import Violation


@pytest.mark.parametrize(
    ("location", "refused", "field"),
    [
        ("new", Admit(1.0, "x"), "rid"),  # the request never arrived
        ("arrived", Arrive(1.0, "x", "assured"), "rid"),  # it arrives twice
        ("done", Complete(1.0, "x"), "kind"),  # an event after its terminal one
        ("admitted", Complete(1.0, "x"), "kind"),
    ],
)
def test_the_field_at_fault_comes_from_the_stage_and_the_kind(
    location: str, refused: Event, field: str
) -> None:
    """The detail says nothing the old prose search looked for ("duplicate", "never arrived")."""
    v = Violation("WF", "x", 1.0, (refused,), "a sentence worded any way", {"location": location})
    err = _protocol_error(v, "t.jsonl", 7)
    assert (err.field, err.line, err.path) == (field, 7, "t.jsonl")
