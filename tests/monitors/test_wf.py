"""WF: protocol breaks are refused atomically; the table covers every pair."""

from __future__ import annotations

import pytest

from rvguard.contract import Contract
from rvguard.events import Admit, Arrive, Complete, Dispatch, Event, Reject
from rvguard.monitors import Monitor


@pytest.mark.parametrize(
    ("events", "detail"),
    [
        ([Admit(0.0, "x")], "never arrived"),
        ([Arrive(0.0, "x", "assured"), Arrive(0.1, "x", "assured")], "duplicate arrive"),
        ([Arrive(0.0, "x", "assured"), Dispatch(0.1, "x")], "neither admitted nor rejected"),
        ([Arrive(0.0, "x", "assured"), Reject(0.0, "x"), Reject(0.1, "x")], "terminal"),
        ([Arrive(0.0, "x", "assured"), Admit(0.0, "x"), Complete(0.1, "x")], "not dispatched"),
    ],
)
def test_wf_rejects_protocol_breaks_atomically(marquee: Contract, events: list[Event], detail: str) -> None:
    m = Monitor(marquee)
    for ev in events[:-1]:
        assert m.feed(ev) == [] or ev.kind.value == "reject"
    before = m.statistics()
    [v] = [x for x in m.feed(events[-1]) if x.property == "WF"]
    assert detail in v.detail
    assert m.statistics().live_requests == before.live_requests


def test_every_table_pair_is_in_the_table_or_rejected() -> None:
    from rvguard.events import EventKind
    from rvguard.monitors import wf

    for loc in wf.Loc:
        for kind in EventKind:
            edges = wf.TRANSITIONS.get((loc, kind))
            assert edges is None or all(e.target in wf.Loc for e in edges)
    legal = {(loc.value, k.value) for loc, k in wf.TRANSITIONS}
    assert ("new", "arrive") in legal and ("done", "complete") not in legal
