"""AF: hand-built traces, entitlement boundaries."""

from __future__ import annotations

from rvguard.contract import Contract
from rvguard.events import Arrive, Event, Reject

from ._helpers import run


def test_af_rejecting_an_entitled_request_is_a_violation(marquee: Contract) -> None:
    m = run(marquee, [Arrive(0.1, "r1", "assured"), Reject(0.2, "r1", "learner said no")])
    [v] = m.violations()
    assert (v.property, v.rid, v.t) == ("AF", "r1", 0.2)
    assert [e.kind.value for e in v.witness] == ["arrive", "reject"]
    assert v.context["window"] == 0 and v.context["rank"] == 1


def test_af_the_floor_plus_first_arrival_is_not_entitled(marquee: Contract) -> None:
    events: list[Event] = [Arrive(0.01 * i, f"r{i}", "assured") for i in range(7)]
    events.append(Reject(0.5, "r6", "excess"))
    assert run(marquee, events).violations() == []
    events.append(Reject(0.5, "r5", "excess"))
    [v] = run(marquee, events).violations()
    assert v.rid == "r5" and v.context["rank"] == 6


def test_arrival_exactly_on_a_window_edge_belongs_to_the_new_window(marquee: Contract) -> None:
    # six arrivals fill window 0; one at exactly t0 + W is the first of window 1: entitled
    events: list[Event] = [Arrive(0.1 * i, f"r{i}", "assured") for i in range(6)]
    events += [Arrive(1.0, "edge", "assured"), Reject(1.0, "edge", "no")]
    [v] = run(marquee, events).violations()
    assert v.rid == "edge" and v.context["window"] == 1 and v.context["rank"] == 1


def test_opportunistic_rejection_is_fine(marquee: Contract) -> None:
    assert run(marquee, [Arrive(0.0, "o", "opportunistic"), Reject(0.0, "o", "x")]).violations() == []
