"""`utilisation` is the same float online and offline (and in the partitioned fold), not merely close.

The busy time is a float sum of one term per dispatched request; floats do not add associatively,
so the offline path must add the terms in the monitor's order. Times here are arbitrary floats (not
the dyadic grid of `strategies.wellformed_traces`, where every order gives the same sum).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, Fail
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline

from .strategies import small_contract, wellformed_traces

CONTRACT = small_contract("count", runbook=False)
GAP = st.floats(0.0, 0.7, allow_nan=False, allow_infinity=False)


@st.composite
def float_traces(draw: st.DrawFn) -> list[Event]:
    """Requests that arrive, are admitted, dispatched and (mostly) end, at arbitrary float times;
    ends in any order, some requests still running at the trace's end."""
    timed: list[tuple[float, int, Event]] = []
    t = 0.0
    for i in range(draw(st.integers(1, 30))):
        t += draw(GAP)
        rid = f"r{i}"
        start = t + draw(GAP)
        timed += [(t, 0, Arrive(t, rid, "o")), (t, 1, Admit(t, rid, Basis.SURPLUS))]
        timed.append((start, 2, Dispatch(start, rid)))
        end = draw(st.sampled_from(["complete", "complete", "fail", "open"]))
        if end != "open":
            stop = start + draw(GAP)
            timed.append((stop, 3, Complete(stop, rid) if end == "complete" else Fail(stop, rid, "err")))
    timed.sort(key=lambda x: (x[0], x[1]))
    return [ev for _, _, ev in timed]


def _both(events: list[Event]) -> tuple[float | None, float | None]:
    online = Monitor(CONTRACT, ("WF",))
    online.feed_all(events)
    offline = check_offline(ColumnarTrace.from_events(events), CONTRACT, ("WF",))
    assert offline.vectorised
    return online.summary().utilisation, offline.metrics.utilisation


@settings(max_examples=200, deadline=None)
@given(float_traces())
def test_utilisation_is_the_same_float_online_and_offline(events: list[Event]) -> None:
    online, offline = _both(events)
    assert online == offline  # exactly: the README says the two paths give the same metrics


@settings(max_examples=100, deadline=None)
@given(wellformed_traces())
def test_utilisation_agrees_on_protocol_traces(events: list[Event]) -> None:
    online, offline = _both(events)
    assert online == offline
