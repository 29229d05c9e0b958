"""Mutation tests: a compliant trace of the guarded simulator (the `DecisionCore` on a simulated
engine), one smallest edit that breaks one clause, and the property reports it at that event.

Hypothesis picks the arrivals (a seed) and where to edit; the edits are explicit:

* AF's upper side — one extra floor admit: an excess arrival the guard rejected, admitted on the
  floor instead, in a window whose B floor credits were already admitted;
* CAP — one extra dispatch: a surplus request arriving, admitted and dispatched (and completed at
  once) at an instant when C requests are already in flight (and fewer than C − R surplus ones, so
  RB still holds);
* PR — a guard-caused end: an entitled request's completion replaced by ``fail("shutdown")``.

Each is checked online (`Monitor`) and offline (`check_offline`, vectorised unless the watch wrote an
alert into the trace, then replayed): the
clause's violations are exactly the one at the edited event, with the request's events up to it as
the witness, and the other properties' verdicts are those of the unedited trace.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Drop, Event, Fail, Reject
from rvguard.monitors import DEFAULT_PROPERTIES, Monitor
from rvguard.monitors.offline import check_offline
from rvguard.sim.experiments import MARQUEE_CONTRACT as MARQUEE
from rvguard.sim.run import run_once
from rvguard.sim.workloads import poisson
from rvguard.verdict import Violation

PROPS = (*DEFAULT_PROPERTIES, "PR")
SEEDS = st.integers(0, 2**16)


def _compliant(seed: int) -> list[Event]:
    """A guarded run at more than B assured arrivals a window (so the guard rejects excess)."""
    arrivals = poisson(MARQUEE, random.Random(seed), assured_rate=9.0, opp_rate=9.0, duration=2.0)
    events = list(run_once(MARQUEE, arrivals, mode="guarded", seed=seed).result.events)
    assert not _judge(events, lambda v: v.property in ("AF", "CAP", "PR"))  # the clauses hold
    return events


def _judge(events: list[Event], keep: Callable[[Violation], bool]) -> list[Violation]:
    """Online and offline verdicts (asserted equal), the ones ``keep`` selects."""
    online = Monitor(MARQUEE, PROPS, retain_finished=None)
    online.feed_all(events)
    offline = check_offline(ColumnarTrace.from_events(events), MARQUEE, PROPS)
    assert offline.vectorised == all(e.rid for e in events)  # a node record (the watch's alert): replay
    assert [v.to_dict() for v in offline.violations] == [v.to_dict() for v in online.violations()]
    return [v for v in online.violations() if keep(v)]


def _others(events: list[Event], prop: str) -> list[tuple[str, str, float]]:
    return [(v.property, v.rid, v.t) for v in _judge(events, lambda v: v.property != prop)]


def _reported_at(mutant: list[Event], prop: str, edited: Event, select: Callable[[Violation], bool]) -> None:
    [v] = _judge(mutant, lambda v: v.property == prop and select(v))
    assert (v.rid, v.t, v.witness[-1]) == (edited.rid, edited.t, edited)
    assert list(v.witness) == [e for e in mutant[: mutant.index(edited) + 1] if e.rid == edited.rid]


def _upper(v: Violation) -> bool:
    return "floor_admitted" in v.context


@settings(max_examples=15, deadline=None)
@given(SEEDS, st.data())
def test_one_extra_floor_admit_breaks_afs_upper_side_at_that_admit(seed: int, data: st.DataObject) -> None:
    events = _compliant(seed)
    arrival = {e.rid: e for e in events if isinstance(e, Arrive)}
    floor = int(MARQUEE.tenants["assured"].floor)
    spent: dict[int, int] = {}
    spots = []
    for i, e in enumerate(events):
        k = int((arrival[e.rid].t - MARQUEE.epoch) // MARQUEE.window) if e.rid in arrival else -1
        if isinstance(e, Admit) and e.basis is Basis.FLOOR:
            spent[k] = spent.get(k, 0) + 1
        if isinstance(e, Reject) and arrival[e.rid].tenant == "assured" and spent.get(k, 0) == floor:
            spots.append(i)
    assume(spots)
    i = data.draw(st.sampled_from(spots))
    edited = Admit(events[i].t, events[i].rid, Basis.FLOOR)
    mutant = [*events[:i], edited, *events[i + 1 :]]
    _reported_at(mutant, "AF", edited, _upper)
    assert "beyond B" in _judge(mutant, _upper)[0].detail
    assert _others(mutant, "AF") == _others(events, "AF")


def _in_flight(events: list[Event]) -> list[tuple[int, int]]:
    """After each event: (requests holding a slot, surplus ones among them), replayed here."""
    surplus: set[str] = set()
    running: set[str] = set()
    out = []
    for e in events:
        if isinstance(e, Admit) and e.basis is not Basis.FLOOR:
            surplus.add(e.rid)
        elif isinstance(e, Dispatch):
            running.add(e.rid)
        elif isinstance(e, Complete | Fail | Drop):
            running.discard(e.rid)
        out.append((len(running), len(running & surplus)))
    return out


@settings(max_examples=15, deadline=None)
@given(SEEDS, st.data())
def test_one_extra_dispatch_breaks_cap_at_that_dispatch(seed: int, data: st.DataObject) -> None:
    events = _compliant(seed)
    c, limit = MARQUEE.slots, MARQUEE.slots - MARQUEE.reserve
    spots = [i for i, (n, s) in enumerate(_in_flight(events)) if n == c and s < limit]
    assume(spots)
    i = data.draw(st.sampled_from(spots))
    t = events[i].t
    edited = Dispatch(t, "extra")
    extra = [Arrive(t, "extra", "opportunistic"), Admit(t, "extra"), edited, Complete(t, "extra")]
    mutant = [*events[: i + 1], *extra, *events[i + 1 :]]
    _reported_at(mutant, "CAP", edited, lambda v: True)
    [v] = _judge(mutant, lambda v: v.property == "CAP")
    assert (v.context["clause"], v.context["limit"], v.context["in_flight"]) == ("C", c, c + 1)
    assert len(v.context["holders"]) == c
    assert _others(mutant, "CAP") == _others(events, "CAP")


@pytest.mark.parametrize("reason", ["shutdown", "hold-bound"])  # hold-bound: rationed relief's answer
@settings(max_examples=15, deadline=None)
@given(SEEDS, st.data())
def test_a_guard_caused_shutdown_of_an_entitled_request_breaks_pr_at_that_fail(
    reason: str, seed: int, data: st.DataObject
) -> None:
    events = _compliant(seed)
    floor_admitted = {e.rid for e in events if isinstance(e, Admit) and e.basis is Basis.FLOOR}
    spots = [i for i, e in enumerate(events) if isinstance(e, Complete) and e.rid in floor_admitted]
    assume(spots)
    i = data.draw(st.sampled_from(spots))
    edited = Fail(events[i].t, events[i].rid, reason)
    mutant = [*events[:i], edited, *events[i + 1 :]]
    _reported_at(mutant, "PR", edited, lambda v: True)
    assert f"'{reason}'" in _judge(mutant, lambda v: v.property == "PR")[0].detail
    sf = [(v.property, v.rid, v.t) for v in _judge(mutant, lambda v: v.property == "SF")]
    assert [x for x in _others(mutant, "PR") if x not in sf] == _others(events, "PR")  # SF: its miss
