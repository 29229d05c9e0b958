"""The columnar form round-trips events and encodes missing values as documented."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from rvguard.columnar import ColumnarTrace
from rvguard.events import Arrive, Proposal, Sample
from tests.monitors.strategies import wellformed_traces


@settings(max_examples=100, deadline=None)
@given(wellformed_traces())
def test_round_trip(events: list) -> None:  # type: ignore[type-arg]
    assert list(ColumnarTrace.from_events(events).events()) == events


@settings(max_examples=100, deadline=None)
@given(wellformed_traces(runbook=True))
def test_round_trip_with_the_runbook_kinds(events: list) -> None:  # type: ignore[type-arg]
    """DESIGN §10 rows keep their event whole; a sample (no request) has rid code -1."""
    c = ColumnarTrace.from_events(events)
    assert list(c.events()) == events
    samples = [i for i, e in enumerate(events) if isinstance(e, Sample)]
    assert [i for i, r in enumerate(c.rid.tolist()) if r < 0] == samples
    assert "" not in c.rid_names


def test_missing_values_and_codes() -> None:
    evs = [Arrive(0.0, "a", "x"), Arrive(1.0, "b", "y", deadline=3.0, max_tokens=5, proposal=Proposal(False))]
    c = ColumnarTrace.from_events(evs, lines=[4, 9])
    assert np.isnan(c.deadline[0]) and c.deadline[1] == 3.0
    assert c.max_tokens.tolist() == [-1, 5]
    assert c.tenant_names == ("x", "y") and c.rid_names == ("a", "b")
    assert c.line.tolist() == [4, 9]
    assert c.event(1) == evs[1]
