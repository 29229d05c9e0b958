"""Hand-built traces: one known violation per property, and the boundary cases."""

from __future__ import annotations

import pytest

from rvguard.contract import Contract
from rvguard.errors import SpecError, TraceOrderError, UnknownTenantError
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Drop, Event, Fail, Reject
from rvguard.monitors import Monitor


def run(
    contract: Contract, events: list[Event], props: tuple[str, ...] = ("AF", "SF", "DR", "WF")
) -> Monitor:
    m = Monitor(contract, props)
    m.feed_all(events)
    return m


def served(rid: str, t: float, done: float, tenant: str = "assured") -> list[Event]:
    return [Arrive(t, rid, tenant), Admit(t, rid, Basis.FLOOR), Dispatch(t, rid), Complete(done, rid)]


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


def test_sf_completion_exactly_at_the_deadline_is_on_time(marquee: Contract) -> None:
    assert run(marquee, served("r", 0.0, 1.82)).violations() == []


def test_sf_late_completion_is_reported_at_the_deadline(marquee: Contract) -> None:
    [v] = run(marquee, served("r", 0.0, 1.83)).violations()
    assert (v.property, v.t) == ("SF", 1.82)
    assert [e.kind.value for e in v.witness] == ["arrive", "admit", "dispatch"]


def test_sf_is_reported_at_the_deadline_instant_even_if_the_next_event_is_much_later(
    marquee: Contract,
) -> None:
    m = Monitor(marquee)
    m.feed_all([Arrive(0.0, "r", "assured"), Admit(0.0, "r", Basis.FLOOR), Dispatch(0.1, "r")])
    assert m.feed(Arrive(500.0, "late-comer", "opportunistic"))[0].t == 1.82
    [v] = m.violations()
    assert (v.property, v.rid, v.t) == ("SF", "r", 1.82)


def test_sf_advance_fires_the_timer_only_after_the_deadline(marquee: Contract) -> None:
    m = Monitor(marquee)
    m.feed_all([Arrive(0.0, "r", "assured"), Admit(0.0, "r", Basis.FLOOR)])
    assert m.advance(1.82) == []
    [v] = m.advance(1.9)
    assert v.t == 1.82


def test_sf_fail_or_drop_of_an_entitled_admitted_request_is_a_violation(marquee: Contract) -> None:
    events = [
        Arrive(0.0, "r", "assured"),
        Admit(0.0, "r", Basis.FLOOR),
        Dispatch(0.0, "r"),
        Fail(0.3, "r", "500"),
    ]
    [v] = run(marquee, events).violations()
    assert (v.property, v.t) == ("SF", 0.3)


def test_sf_ignores_requests_that_are_not_entitled(marquee: Contract) -> None:
    assert run(marquee, served("o", 0.0, 9.0, tenant="opportunistic")).violations() == []


def test_dr_drop_with_t_plus_l_equal_to_d_is_not_doomed(marquee: Contract) -> None:
    # D = 1.82 (relative deadline), L = 0.236: a drop at t = D - L is not doomed
    t = 1.82 - 0.236
    events = [Arrive(0.0, "r", "opportunistic", deadline=t + 0.236), Admit(0.0, "r"), Drop(t, "r", "doomed?")]
    [v] = run(marquee, events).violations()
    assert v.property == "DR" and "not doomed" in v.detail


def test_dr_drop_of_a_doomed_request_is_fine(marquee: Contract) -> None:
    events = [Arrive(0.0, "r", "opportunistic"), Admit(0.0, "r"), Drop(1.6, "r", "doomed")]
    assert run(marquee, events).violations() == []


def test_nd_needs_an_upper_bound(marquee: Contract) -> None:
    with pytest.raises(SpecError, match="upper bound"):
        Monitor(marquee, ("ND",))


def test_nd_reports_a_dispatch_that_may_miss(two_tenants: Contract) -> None:
    events = [Arrive(0.0, "r", "gold"), Admit(0.0, "r", Basis.FLOOR), Dispatch(1.9, "r")]
    [v] = run(two_tenants, events, ("ND",)).violations()
    assert v.property == "ND" and v.t == 1.9


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


def test_out_of_order_time_raises_and_changes_nothing(marquee: Contract) -> None:
    m = Monitor(marquee)
    m.feed(Arrive(1.0, "a", "assured"))
    with pytest.raises(TraceOrderError):
        m.feed(Arrive(0.5, "b", "assured"))
    assert m.statistics().live_requests == 1 and m.now == 1.0


def test_unknown_tenant_raises(marquee: Contract) -> None:
    with pytest.raises(UnknownTenantError, match="'nobody'"):
        Monitor(marquee).feed(Arrive(0.0, "a", "nobody"))


def test_memory_is_bounded_by_live_requests(marquee: Contract) -> None:
    m = Monitor(marquee, retain_finished=10)
    for i in range(2000):
        m.feed_all(served(f"r{i}", i * 0.2, i * 0.2 + 0.1, tenant="opportunistic"))
    s = m.statistics()
    assert s.live_requests == 0 and s.retained_finished == 10 and s.pending_timers == 0


def test_every_table_pair_is_in_the_table_or_rejected() -> None:
    from rvguard.events import EventKind
    from rvguard.monitors import wf

    for loc in wf.Loc:
        for kind in EventKind:
            edges = wf.TRANSITIONS.get((loc, kind))
            assert edges is None or all(e.target in wf.Loc for e in edges)
    legal = {(loc.value, k.value) for loc, k in wf.TRANSITIONS}
    assert ("new", "arrive") in legal and ("done", "complete") not in legal
