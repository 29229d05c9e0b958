"""SF: deadlines, the timer edge, exemptions."""

from __future__ import annotations

from rvguard.contract import Contract
from rvguard.events import Admit, Arrive, Basis, Dispatch, Fail
from rvguard.monitors import Monitor

from ._helpers import run, served


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
    events = served("o", 0.0, 9.0, tenant="opportunistic")
    assert run(marquee, events, ("SF", "WF")).violations() == []


def test_sf_exempts_a_fail_the_client_caused_but_not_a_late_one(marquee: Contract) -> None:
    """A backend's 4xx for the client's own mistake (reason ``client-error``) is not the service's miss."""
    start = [Arrive(0.0, "r", "assured"), Admit(0.0, "r", Basis.FLOOR), Dispatch(0.1, "r")]
    for reason in ("client-error", "client-error: http 400"):
        m = Monitor(marquee)
        m.feed_all([*start, Fail(0.2, "r", reason)])
        assert m.advance(10.0) == [] and m.violations() == []
    for reason in ("err", "client-errors", "DispatchError: client-error"):  # only the exact prefix counts
        m = Monitor(marquee)
        m.feed_all([*start, Fail(0.2, "r", reason)])
        assert [v.property for v in m.violations()] == ["SF"]
    m = Monitor(marquee)  # after the deadline the timer has fired already: still a miss
    m.feed_all([*start, Fail(2.0, "r", "client-error: http 400")])
    assert [(v.property, v.t) for v in m.violations()] == [("SF", 1.82)]
