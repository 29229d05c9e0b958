"""The offline checker: which path runs, and its errors carry the trace line."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.errors import TraceOrderError, UnknownTenantError
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Drop, Event, Fail, Reject
from rvguard.monitors import wf
from rvguard.monitors.offline import check_offline, protocol_is_clean, row_index, window_indices
from tests.monitors.strategies import wellformed_traces
from tests.monitors.test_automaton import TIMED

CLEAN: list[Event] = [
    Arrive(0.0, "a", "assured"),
    Admit(0.0, "a", Basis.FLOOR),
    Dispatch(0.1, "a"),
    Complete(0.5, "a"),
    Arrive(0.6, "b", "assured"),
    Reject(0.6, "b", "learner"),
]


def test_clean_trace_takes_the_vectorised_path(marquee: Contract) -> None:
    result = check_offline(ColumnarTrace.from_events(CLEAN), marquee)
    assert result.vectorised
    assert [(v.property, v.rid) for v in result.violations] == [("AF", "b")]


def test_protocol_break_replays_through_the_monitor(marquee: Contract) -> None:
    broken = [*CLEAN, Complete(0.7, "a")]
    trace = ColumnarTrace.from_events(broken)
    assert not protocol_is_clean(trace)
    result = check_offline(trace, marquee)
    assert not result.vectorised
    assert ("WF", "a") in [(v.property, v.rid) for v in result.violations]


def test_user_defined_properties_replay(marquee: Contract) -> None:
    result = check_offline(ColumnarTrace.from_events(CLEAN), marquee, ["AF", TIMED])
    assert not result.vectorised


def test_errors_name_the_source_line(marquee: Contract) -> None:
    back = [Arrive(1.0, "a", "assured"), Arrive(0.5, "b", "assured")]
    with pytest.raises(TraceOrderError) as info:
        check_offline(ColumnarTrace.from_events(back, lines=[10, 11]), marquee, path="t.jsonl")
    assert (info.value.path, info.value.line, info.value.field) == ("t.jsonl", 11, "t")
    with pytest.raises(UnknownTenantError) as info2:
        check_offline(ColumnarTrace.from_events([Arrive(0.0, "x", "eve")], lines=[7]), marquee)
    assert info2.value.line == 7


def test_vectorised_window_index_matches_the_scalar_one(marquee: Contract) -> None:
    t = np.array([marquee.window_start(k, origin=0.1) for k in range(-3, 40)] + [0.3, 0.7, 1e6 + 0.25])
    expect = [marquee.window_index(float(x), origin=0.1) for x in t]
    assert window_indices(t, 0.1, marquee.window).tolist() == expect


_MAKERS = {
    "arrive": lambda t, rid: Arrive(t, rid, "assured"),
    "admit": lambda t, rid: Admit(t, rid, Basis.FLOOR),
    "reject": lambda t, rid: Reject(t, rid),
    "dispatch": lambda t, rid: Dispatch(t, rid),
    "complete": lambda t, rid: Complete(t, rid),
    "drop": lambda t, rid: Drop(t, rid),
    "fail": lambda t, rid: Fail(t, rid),
}


def _wf_accepts(events: list[Event]) -> bool:
    """The oracle: replay each rid's kinds through WF's own table."""
    loc = {e.rid: wf.Loc.NEW for e in events}
    for e in events:
        edges = wf.TRANSITIONS.get((loc[e.rid], e.kind))
        if not edges:
            return False
        loc[e.rid] = wf.Loc(edges[0].target)
    return True


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(sorted(_MAKERS))), max_size=12))
def test_row_index_cleanliness_is_wf_acceptance(rows: list[tuple[str, str]]) -> None:
    events = [_MAKERS[kind](float(i), rid) for i, (rid, kind) in enumerate(rows)]
    trace = ColumnarTrace.from_events(events)
    assert protocol_is_clean(trace) == _wf_accepts(events)


@settings(max_examples=200, deadline=None)
@given(wellformed_traces())
def test_row_index_finds_each_requests_rows(events: list[Event]) -> None:
    trace = ColumnarTrace.from_events(events)
    index = row_index(trace)
    assert index.clean
    for code, name in enumerate(trace.rid_names):
        mine = [i for i, e in enumerate(events) if e.rid == name]
        found = [int(x[code]) for x in (index.arrive, index.admit, index.dispatch, index.end)]
        assert sorted(i for i in found if i >= 0) == mine
        assert index.arrive[code] == mine[0]
    assert index.arrivals.tolist() == [i for i, e in enumerate(events) if isinstance(e, Arrive)]


@settings(max_examples=100, deadline=None)
@given(wellformed_traces(), st.data())
def test_bulk_event_reads_equal_row_reads(events: list[Event], data: st.DataObject) -> None:
    trace = ColumnarTrace.from_events(events)
    rows = data.draw(st.lists(st.integers(0, max(len(events) - 1, 0)), max_size=10)) if events else []
    assert trace.events_at(rows) == [trace.event(i) for i in rows]
    assert trace.events_at(range(len(events))) == events
