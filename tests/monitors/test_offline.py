"""The offline checker: which path runs, and its errors carry the trace line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.errors import TraceOrderError, UnknownTenantError
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, Reject
from rvguard.monitors.offline import check_offline, protocol_is_clean
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


@settings(max_examples=100, deadline=None)
@given(wellformed_traces(), st.data())
def test_bulk_event_reads_equal_row_reads(events: list[Event], data: st.DataObject) -> None:
    trace = ColumnarTrace.from_events(events)
    rows = data.draw(st.lists(st.integers(0, max(len(events) - 1, 0)), max_size=10)) if events else []
    assert trace.events_at(rows) == [trace.event(i) for i in rows]
    assert trace.events_at(range(len(events))) == events
