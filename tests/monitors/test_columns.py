"""The per-request columns: the row index finds each request's rows and agrees with WF; windows as scalars."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Demote,
    Dispatch,
    Drop,
    Event,
    Evict,
    Fail,
    Reject,
    Relocate,
    Restore,
    Route,
    Sample,
)
from rvguard.monitors import wf
from rvguard.monitors.columns import protocol_is_clean, row_index, window_indices
from tests.monitors.strategies import wellformed_traces


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
    # DESIGN §10: rows the row table does not hold (the trace is then replayed, never vectorised)
    "sample": lambda t, rid: Sample(t, "kv", 0.5, t),
    "route": lambda t, rid: Route(t, rid, "e0", t),
    "demote": lambda t, rid: Demote(t, rid, "kv", t),
    "restore": lambda t, rid: Restore(t, rid, "kv", t),
    "evict": lambda t, rid: Evict(t, rid, 3),
    "relocate": lambda t, rid: Relocate(t, rid, "e1"),
}
_DESIGN2 = {"arrive", "admit", "reject", "dispatch", "complete", "drop", "fail"}


def _wf_accepts(events: list[Event]) -> bool:
    """The oracle: replay each rid's kinds through WF's own table."""
    loc = {e.rid: wf.Loc.NEW for e in events}
    for e in events:
        if isinstance(e, Sample):  # a node event: no request, always legal
            continue
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
    plain = all(kind in _DESIGN2 for _, kind in rows)
    assert protocol_is_clean(trace) == (_wf_accepts(events) and plain)


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
