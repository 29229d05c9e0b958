"""Online monitor, offline checker and a brute-force checker agree on every trace."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.events import Arrive, Complete, Demote, Event, Evict, Reject, Relocate, Route, Sample
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline

from .brute_force import brute_force, doomed_dispatch
from .strategies import small_contract, wellformed_traces

CONTRACTS = {
    "count": small_contract("count"),
    "tokens": small_contract("tokens"),
    "count, epoch 0.3": small_contract("count", epoch=0.3),
    "tokens, epoch 0.7": small_contract("tokens", epoch=0.7),
    "count, reserve 1": small_contract("count", reserve=1),
    "tokens, reserve 2": small_contract("tokens", reserve=2),
    # no fleet block: CAP's C_e is what the routes carried, else C
    "count, no runbook blocks": small_contract("count", runbook=False),
}
PROPS = ("AF", "SF", "DR", "WF", "ND", "RB", "CAP")
#: DESIGN §2's kinds, written out: a trace of only these is judged vectorised offline
DESIGN2 = frozenset({"arrive", "admit", "reject", "dispatch", "complete", "drop", "fail"})
#: every trace strategy: DESIGN §2's kinds alone, and with DESIGN §10's (samples, routes, ...)
TRACES = st.booleans().flatmap(lambda runbook: wellformed_traces(runbook=runbook))


def _online(events: list[Event], credit: str) -> Monitor:
    m = Monitor(CONTRACTS[credit], PROPS)
    m.feed_all(events)
    return m


def _witness(v: object) -> list[tuple[str, str, float]]:
    return [(e.kind.value, e.rid, e.t) for e in v.witness]  # type: ignore[attr-defined]


@settings(max_examples=400, deadline=None)
@given(TRACES, st.sampled_from(sorted(CONTRACTS)))
def test_online_and_offline_agree(events: list[Event], credit: str) -> None:
    online = _online(events, credit)
    offline = check_offline(ColumnarTrace.from_events(events), CONTRACTS[credit], PROPS)
    assert offline.vectorised == all(e.kind.value in DESIGN2 for e in events)
    on, off = online.violations(), offline.violations
    assert [(v.property, v.rid, v.t, v.detail) for v in on] == [
        (v.property, v.rid, v.t, v.detail) for v in off
    ]
    assert [_witness(v) for v in on] == [_witness(v) for v in off]
    assert [dict(v.context) for v in on] == [dict(v.context) for v in off]
    m_on, m_off = online.summary().to_dict(), offline.metrics.to_dict()
    assert m_on == m_off  # the utilisation too: the same float sum, in the same order


@settings(max_examples=400, deadline=None)
@given(TRACES, st.sampled_from(sorted(CONTRACTS)))
def test_monitor_agrees_with_brute_force(events: list[Event], credit: str) -> None:
    found = {(v.property, v.rid, v.t) for v in _online(events, credit).violations()}
    c = CONTRACTS[credit]
    assert found == brute_force(events, c) | doomed_dispatch(events, c)


@settings(max_examples=300, deadline=None)
@given(TRACES)
def test_wellformed_traces_pass_wf(events: list[Event]) -> None:
    assert not [v for v in _online(events, "count").violations() if v.property == "WF"]


def _mutations(events: list[Event]) -> list[list[Event]]:
    """Mutations that each certainly break the protocol."""
    out = []
    for i, e in enumerate(events):
        if isinstance(e, Arrive) and any(x.rid == e.rid for x in events[i + 1 :]):
            out.append(events[:i] + events[i + 1 :])  # events for a request that never arrived
        if not isinstance(e, Arrive | Sample):  # (a sample has no request: it is never refused)
            out.append([*events[: i + 1], dataclasses.replace(e, rid="ghost"), *events[i + 1 :]])
        if isinstance(e, Complete | Reject):
            out.append([*events[: i + 1], e, *events[i + 1 :]])  # a second terminal event
        if isinstance(e, Arrive):
            out.append([*events[: i + 1], e, *events[i + 1 :]])  # duplicate arrive
        if isinstance(e, Arrive):  # DESIGN §10 moves from a stage that has none of them
            out.append([*events[: i + 1], Evict(e.t, e.rid, 1), *events[i + 1 :]])  # not running
            out.append([*events[: i + 1], Relocate(e.t, e.rid, "e1"), *events[i + 1 :]])  # not evicted
            out.append([*events[: i + 1], Demote(e.t, e.rid, "kv", e.t), *events[i + 1 :]])  # not queued
        if isinstance(e, Complete):
            out.append([*events[: i + 1], Route(e.t, e.rid, "e0", e.t), *events[i + 1 :]])  # after the end
    return out


@settings(max_examples=150, deadline=None)
@given(st.booleans().flatmap(lambda rb: wellformed_traces(max_steps=25, runbook=rb)), st.data())
def test_wf_rejects_every_mutation(events: list[Event], data: st.DataObject) -> None:
    mutants = _mutations(events)
    if not mutants:
        return
    mutant = data.draw(st.sampled_from(mutants))
    online = _online(mutant, "count")
    assert [v for v in online.violations() if v.property == "WF"]
    offline = check_offline(ColumnarTrace.from_events(mutant), CONTRACTS["count"], PROPS)
    assert not offline.vectorised
    assert [v.key for v in offline.violations] == [v.key for v in online.violations()]


def _refused_at(events: list[Event], i: int, t: float, ghost: int) -> Event:
    """An event WF refuses after ``events[:i]``, stamped ``t``: a ghost's, or a request's second arrive."""
    arrived = [e for e in events[:i] if isinstance(e, Arrive)]
    if arrived and ghost == 0:
        return dataclasses.replace(arrived[-1], t=t)  # a duplicate arrive
    # an event for a request that never arrived, of a DESIGN §2 or §10 kind
    ghosts = [
        Complete(t, "ghost"),
        Route(t, "ghost", "e0", t),
        Demote(t, "ghost", "kv", t),
        Evict(t, "ghost", 3),
        Relocate(t, "ghost", "e1"),
    ]
    return ghosts[ghost % len(ghosts)]


@settings(max_examples=200, deadline=None)
@given(st.booleans().flatmap(lambda rb: wellformed_traces(max_steps=25, runbook=rb)), st.data())
def test_issue_10_a_refused_event_moves_no_clock(events: list[Event], data: st.DataObject) -> None:
    """Item 9: an event WF refuses, however late its time, fires no timer and moves no clock.

    The verdicts other than its own WF one are those of the trace without it, online and offline.
    """
    i = data.draw(st.integers(0, len(events)))
    t0 = events[i - 1].t if i else 0.0
    t = data.draw(st.floats(t0, t0 + 100.0, allow_nan=False))
    mutant = [*events[:i], _refused_at(events, i, t, data.draw(st.integers(0, 5))), *events[i:]]
    clean = _online(events, "count")
    online = _online(mutant, "count")
    assert [v.key for v in online.violations() if v.property != "WF"] == [v.key for v in clean.violations()]
    assert online.summary().to_dict() == clean.summary().to_dict()  # its time counts nowhere
    offline = check_offline(ColumnarTrace.from_events(mutant), CONTRACTS["count"], PROPS)
    assert [v.key for v in offline.violations] == [v.key for v in online.violations()]
