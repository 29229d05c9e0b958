"""The table form checks itself when built: every problem named with its field, all at once."""

from __future__ import annotations

import pytest

from rvguard.errors import SpecError
from rvguard.lifecycle import EventKind
from rvguard.properties import Counter, PropertyTable, Scope, edge
from rvguard.properties.table import RemedyAction, parse_remedy


def _table(*edges: object, **over: object) -> PropertyTable:
    fields: dict[str, object] = {
        "name": "P",
        "description": "",
        "locations": ("NEW", "A", "BAD"),
        "initial": "NEW",
        "bad": "BAD",
        "counters": (Counter("n", Scope.SHARED),),
        "edges": edges or (edge("NEW", "admit", "A"),),
    }
    return PropertyTable(**(fields | over))  # type: ignore[arg-type]


def test_a_good_table() -> None:
    t = _table(edge("NEW", "dispatch", "BAD", "n >= slots", ["n += 1"], "delay"))
    assert t.edges[0].is_controllable() and str(t.edges[0].remedy) == "delay"
    assert "n" in t.known_names() and "deadline" in t.known_names()


@pytest.mark.parametrize(
    ("built", "field", "says"),
    [
        (lambda: _table(edge("NEW", "dispatch", "BAD")), "NEW --dispatch.remedy", "needs a remedy"),
        (lambda: _table(edge("NEW", "admit", "Z")), "NEW --admit.target", "'Z' is not declared"),
        (lambda: _table(edge("NEW", "admit", "A", "m < 1")), "NEW --admit.guard", "unknown name 'm'"),
        (lambda: _table(edge("NEW", "admit", "A", updates=["t = 1"])), "NEW --admit.updates", "no counter"),
        (lambda: _table(counters=(Counter("deadline", Scope.TENANT),)), "counters", "shadows"),
        (lambda: _table(bad="NOPE"), "bad", "not among the locations"),
        (lambda: _table(params={"k": float("nan")}), "params.k", "not a finite number"),
    ],
)
def test_problems_name_their_field(built: object, field: str, says: str) -> None:
    with pytest.raises(SpecError) as err:
        built()  # type: ignore[operator]
    assert err.value.field == field and says in str(err.value)


def test_every_problem_at_once() -> None:
    with pytest.raises(SpecError) as err:
        _table(edge("NEW", "dispatch", "BAD"), edge("NEW", "admit", "Z"), bad="BAD")
    assert len(err.value.errors) == 2


def test_uncontrollable_edges_need_no_remedy_and_monitor_only_tables_none() -> None:
    assert _table(edge("NEW", "complete", "BAD")).edges[0].is_controllable() is False
    assert _table(edge("NEW", "dispatch", "BAD"), monitor_only=True).monitor_only
    forced = _table(edge("NEW", "fail", "BAD", "preempted == 1", remedy="suppress", controllable=True))
    assert forced.edges[0].is_controllable()


def test_remedies() -> None:
    r = parse_remedy("replace: admit floor", "f")
    assert (r.action, r.kind, r.basis) == (RemedyAction.REPLACE, EventKind.ADMIT, "floor")
    assert parse_remedy("insert: demote", "f").kind is EventKind.DEMOTE
    for bad in ("teleport", "delay: admit", "replace:", "replace: admit gold"):
        with pytest.raises(SpecError):
            parse_remedy(bad, "f")
