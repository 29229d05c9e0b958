"""The engine: tables compile to the same behaviour; strict automata reject what is missing."""

from __future__ import annotations

import dataclasses
from enum import Enum

import pytest

from rvguard.contract import Contract
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, EventKind
from rvguard.monitors import Edge, Instance, Monitor, TimedAutomaton, Timer
from rvguard.monitors.sf import SF


class L(Enum):
    NEW = "new"
    LIVE = "live"
    BAD = "bad"


STRICT = TimedAutomaton(
    name="ONLY_ARRIVE_ADMIT",
    description="a strict automaton that allows arrive then admit, nothing else",
    locations=L,
    initial=L.NEW,
    bad=frozenset({L.BAD}),
    transitions={(L.NEW, EventKind.ARRIVE): (Edge(L.LIVE),), (L.LIVE, EventKind.ADMIT): (Edge(L.LIVE),)},
    strict=True,
)


def test_compiled_table_indexes_every_declared_edge() -> None:
    comp = SF.compile()
    for (loc, kind), edges in SF.transitions.items():
        slot = comp.table[comp.index[loc] * len(EventKind) + list(EventKind).index(kind)]
        assert slot is not None
        assert [comp.locs[target] for target, *_ in slot] == [e.target for e in edges]
    assert comp.codes == {0, 1, 2, 4, 5, 6}  # SF does not react to dispatch


def test_a_strict_automaton_goes_bad_on_a_missing_pair(marquee: Contract) -> None:
    m = Monitor(marquee, ["WF", STRICT])
    m.feed_all([Arrive(0.0, "r", "assured"), Admit(0.0, "r", Basis.FLOOR)])
    assert m.violations() == []
    [v] = m.feed(Dispatch(0.1, "r"))
    assert v.property == "ONLY_ARRIVE_ADMIT"
    assert "dispatch" in v.detail


def _bound(inst: Instance) -> float:
    return inst.t_arrive + 1.0


def _reset(inst: Instance, ev: Event) -> None:
    inst.resets["y"] = ev.t


TIMED = TimedAutomaton(
    name="T",
    description="complete within 1 s of arrival",
    locations=L,
    initial=L.NEW,
    bad=frozenset({L.BAD}),
    transitions={
        (L.NEW, EventKind.ARRIVE): (Edge(L.LIVE, update=_reset),),
        (L.LIVE, EventKind.COMPLETE): (Edge(L.NEW),),
    },
    timers=(Timer(L.LIVE, _bound, L.BAD, "x > 1"),),
)


def test_timer_fires_strictly_after_its_bound_and_reports_the_bound(marquee: Contract) -> None:
    m = Monitor(marquee, [TIMED])
    m.feed(Arrive(0.0, "r", "assured"))
    assert m.advance(1.0) == []
    [v] = m.advance(1.5)
    assert (v.property, v.t) == ("T", 1.0)


def test_update_functions_reset_clocks(marquee: Contract) -> None:
    m = Monitor(marquee, [TIMED])
    m.feed(Arrive(2.0, "r", "assured"))
    inst = m._live["r"]
    assert inst.clock("y", 2.5) == 0.5
    m.feed_all([Admit(2.1, "r"), Dispatch(2.2, "r"), Complete(2.4, "r")])
    assert m.advance(10.0) == []


def test_clocks_is_no_parameter() -> None:
    """``clocks`` was declared and never read (a clock exists once an update resets it): it is gone,
    not kept as an ignored, deprecated parameter in a package that never released it."""
    assert "clocks" not in {f.name for f in dataclasses.fields(TimedAutomaton)}
    with pytest.raises(TypeError, match="clocks"):
        TimedAutomaton("C", "", L, L.NEW, frozenset(), {}, clocks=("x",))  # type: ignore[call-arg]
