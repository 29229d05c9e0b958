"""Whose miss: `rvguard check` attributes SF misses and AF refusals from the trace's own evidence.

Each clause has a compliant trace (from the decision core, or written out) and the smallest edit
that breaks it, seen at the right event: an entitled request demoted without a recorded reason is
an AF violation, with one a declared exception; a lowering the alerts do not record is no
excuse; an SF miss with no broken precondition is the guard's fault, one under a slow service is
not (from the watch's records, or recomputed when there are none); a client's hang-up never is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from types import MappingProxyType

from hypothesis import given
from hypothesis import strategies as st

from rvguard.attribution import Attribution, Break
from rvguard.check import CheckReport, check_trace
from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.enforce.watch import WatchConfig
from rvguard.errors import TraceError
from rvguard.events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Dispatch,
    Drop,
    Event,
    Fail,
    Proposal,
    Reject,
    Watch,
)
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline
from rvguard.verdict import Violation

from .enforce._harness import make_contract

YES = Proposal()


def check(
    events: Sequence[Event], contract: Contract, props: Sequence[str] = ("AF", "SF", "WF")
) -> CheckReport:
    def records(_: str) -> Iterator[tuple[int, Event | TraceError]]:
        yield from enumerate(events, 1)

    return check_trace("mem", contract, properties=list(props), records=records)


def _drive(core: DecisionCore, steps: Sequence[tuple[str, float, Request | str]]) -> list[Event]:
    out: list[Event] = []
    for what, t, arg in steps:
        if what == "arrive":
            assert isinstance(arg, Request)
            out += core.arrive(arg, YES, t)
        else:
            assert isinstance(arg, str)
            out += core.finish(arg, t)
        out += core.drain_alerts()
    return out


def _without(events: list[Event], rid: str, field: str) -> list[Event]:
    """The trace with ``field`` taken off ``rid``'s admit or reject (the mutation)."""
    out: list[Event] = []
    for ev in events:
        if isinstance(ev, Admit | Reject) and ev.rid == rid and field in ev.extra:
            extra = {k: v for k, v in ev.extra.items() if k != field}
            ev = replace(ev, extra=MappingProxyType(extra))
        out.append(ev)
    return out


def test_an_entitled_request_demoted_on_a_pool_refusal_is_a_declared_exception() -> None:
    contract = make_contract(floor=2, excess="demote")
    core = DecisionCore(contract)
    events = _drive(core, [("arrive", 0.0, Request("a", "assured", 0.0, pool="held"))])
    admit = next(e for e in events if isinstance(e, Admit))
    assert admit.basis is Basis.DEMOTED and admit.extra["floor_refused"] == "held"
    report = check(events, contract)
    assert report.holds and [a.condition for a in report.attributed] == ["credit pool refused: held"]
    # mutation: the same demotion without its recorded reason is an AF violation, at the admit
    broken = check(_without(events, "a", "floor_refused"), contract)
    assert [(v.property, v.rid, v.t) for v in broken.violations] == [("AF", "a", 0.0)]
    assert "admitted as demoted" in broken.violations[0].detail and not broken.attributed


def test_af_is_the_same_under_reject_and_demote() -> None:
    """An entitled request the floor refused: a violation under both policies, declared under both."""
    verdicts = []
    for excess in ("reject", "demote"):
        contract = make_contract(floor=2, excess=excess)
        events = _drive(
            DecisionCore(contract), [("arrive", 0.0, Request("a", "assured", 0.0, pool="fenced"))]
        )
        declared = check(events, contract)
        bare = check(_without(events, "a", "floor_refused"), contract)
        verdicts.append(
            (
                [a.violation.rid for a in declared.attributed],
                [v.rid for v in declared.violations],
                [(v.property, v.rid) for v in bare.violations],
            )
        )
    assert verdicts[0] == verdicts[1] == (["a"], [], [("AF", "a")])


def _lowered(excess: str) -> tuple[Contract, list[Event]]:
    """floor 2, degrade 0.5: a 0.9 s service (s_max 0.5) fires the watch; in the next window the
    floor is 1, so the second entitled arrival there is refused the floor on record."""
    contract = make_contract(slots=4, floor=2, s_max=0.5, excess=excess, deadline=3.0)
    core = DecisionCore(contract, watch=WatchConfig(degrade=0.5, sustain=2))
    steps: list[tuple[str, float, Request | str]] = [
        ("arrive", 0.0, Request("a", "assured", 0.0)),
        ("finish", 0.9, "a"),
        ("arrive", 1.1, Request("b", "assured", 1.1)),
        ("arrive", 1.2, Request("c", "assured", 1.2)),
    ]
    return contract, _drive(core, steps)


def test_a_declared_floor_lowering_is_reported_as_such_and_judged_against_the_recorded_floor() -> None:
    for excess in ("reject", "demote"):
        contract, events = _lowered(excess)
        alerts = [e for e in events if isinstance(e, Watch)]
        assert [(a.condition, a.floor_scale) for a in alerts] == [("service", 0.5)]
        report = check(events, contract, ("AF", "WF"))
        assert report.holds, report.violations
        assert [(a.violation.rid, a.cause, a.condition) for a in report.attributed] == [
            ("c", "declared", "floor lowered to 0.5 × B")
        ]
        # mutation: the alert records no lowering: the refusal is an undeclared AF violation
        bare = [replace(e, floor_scale=None) if isinstance(e, Watch) else e for e in events]
        assert [(v.property, v.rid) for v in check(bare, contract, ("AF", "WF")).violations] == [("AF", "c")]
        # mutation: the alerts record the floor at 1.0 × B, which had room: no excuse either
        roomy = [replace(e, floor_scale=1.0) if isinstance(e, Watch) else e for e in events]
        assert [(v.property, v.rid) for v in check(roomy, contract, ("AF", "WF")).violations] == [("AF", "c")]


def _served(service: float, deadline: float) -> list[Event]:
    return [
        Arrive(0.0, "a", "assured", deadline),
        Admit(0.0, "a", Basis.FLOOR),
        Dispatch(0.0, "a"),
        Complete(service, "a"),
    ]


def test_an_sf_miss_under_a_slow_service_is_a_broken_precondition_watched_or_recomputed() -> None:
    contract = make_contract(s_max=0.5, deadline=1.0)
    alert = Watch(1.2, "service", 1.2, 0.5, 0.5)
    watched = check([*_served(1.2, 1.0), alert], contract)
    assert watched.holds and watched.sf_attribution() == {
        "guard_fault": 0,
        "precondition_broken": 1,
        "client_fault": 0,
    }
    assert [(a.condition, a.since, a.source) for a in watched.attributed] == [("service", 0.5, "watch")]
    # no watch in the trace: the break is recomputed from the request's own service
    recomputed = check(_served(1.2, 1.0), contract)
    assert [(a.condition, a.since, a.source) for a in recomputed.attributed] == [
        ("service", 0.5, "recomputed")
    ]


def test_an_sf_miss_with_every_precondition_held_is_a_guard_fault() -> None:
    contract = make_contract(s_max=0.5, deadline=1.0)
    # mutation of a compliant run: dispatched 0.7 s late with nobody else waiting, served in 0.4 s
    late = [
        Arrive(0.0, "a", "assured", 1.0),
        Admit(0.0, "a", Basis.FLOOR),
        Dispatch(0.7, "a"),
        Complete(1.1, "a"),
    ]
    report = check(late, contract)
    assert [(v.property, v.rid) for v in report.violations] == [("SF", "a")]
    assert report.sf_attribution()["guard_fault"] == 1 and not report.attributed


def test_a_miss_beyond_what_the_deadline_covers_is_a_broken_backlog_precondition() -> None:
    """D = 0.3 s below s_max = 0.5 s covers no backlog at all (`Contract.backlog_bound` 0): one
    admitted request is already more than the deadline covers, recomputed from the trace."""
    tight = make_contract(s_max=0.5, deadline=0.3)
    late = check(_served(0.4, 0.3), tight)
    assert late.holds and late.sf_attribution()["precondition_broken"] == 1
    assert [(a.condition, a.since, a.source) for a in late.attributed] == [("backlog", 0.0, "recomputed")]
    # dropped as doomed (0.25 + L 0.1 > 0.3) under the same break: attributed alike (DR judges the
    # drop); a backend failure never is
    dropped = [*_served(0.4, 0.3)[:3], Drop(0.25, "a", "doomed")]
    report = check(dropped, tight, props=("AF", "SF", "DR", "WF"))
    assert report.holds and [a.condition for a in report.attributed] == ["backlog"]
    failed = check([*_served(0.4, 0.3)[:3], Fail(0.2, "a", "backend")], tight)
    assert [(v.property, v.rid) for v in failed.violations] == [("SF", "a")]
    # mutation: the same late request, or drop, under a deadline that covers it is the guard's
    roomy = make_contract(s_max=0.5, deadline=1.0)  # covers 2 (the request's own D 0.3 is its arrive's)
    assert [(v.property, v.rid) for v in check(dropped, roomy).violations] == [("SF", "a")]
    feasible = check(_served(0.4, 0.3), make_contract(s_max=0.5, deadline=1.0))
    assert [(v.property, v.rid) for v in feasible.violations] == [("SF", "a")]
    assert feasible.sf_attribution()["guard_fault"] == 1 and not feasible.attributed


def test_an_upstream_ejection_excuses_no_sf_miss() -> None:
    """The gateway's ``upstream-ejected`` alert (an upstream out for failed requests) is no
    precondition of SF: a miss during it stays the guard's fault, as with no alert at all."""
    contract = make_contract(s_max=0.5, deadline=1.0)
    out = Watch(
        0.1, "upstream-ejected", 3.0, 3.0, extra=MappingProxyType({"engine": "e0", "detail": "http 500"})
    )
    late = [
        Arrive(0.0, "a", "assured", 1.0),
        Admit(0.0, "a", Basis.FLOOR),
        out,
        Dispatch(0.7, "a"),
        Complete(1.1, "a"),
    ]
    report = check(late, contract)
    assert [(v.property, v.rid) for v in report.violations] == [("SF", "a")]
    assert report.sf_attribution()["guard_fault"] == 1 and not report.attributed


def test_a_client_hang_up_is_a_client_fault_never_the_guards() -> None:
    contract = make_contract(s_max=0.5, deadline=1.0)
    events = [*_served(0.0, 1.0)[:3], Fail(0.2, "a", "client-error: disconnect")]
    report = check(events, contract)
    assert report.holds and report.sf_attribution() == {
        "guard_fault": 0,
        "precondition_broken": 0,
        "client_fault": 1,
    }
    # mutation: the same end blamed on the backend is the guard's SF violation
    backend = check([*events[:3], Fail(0.2, "a", "backend")], contract)
    assert [(v.property, v.rid, v.t) for v in backend.violations] == [("SF", "a", 0.2)]


def test_the_demoted_clause_is_judged_alike_online_and_offline() -> None:
    """An entitled request demoted: AF at its admit on both paths; admitted as surplus (a baseline
    with no floor) or on the floor: nothing on either."""
    contract = make_contract(floor=2, excess="demote")
    for basis, bad in ((Basis.DEMOTED, True), (Basis.SURPLUS, False), (Basis.FLOOR, False)):
        events: list[Event] = [Arrive(0.0, "a", "assured"), Admit(0.5, "a", basis), Dispatch(0.5, "a")]
        events.append(Complete(0.7, "a"))
        online = Monitor(contract, ("AF", "WF"), retain_finished=None)
        online.feed_all(events)
        offline = check_offline(ColumnarTrace.from_events(events), contract, ("AF", "WF"))
        assert offline.vectorised
        assert [v.key for v in offline.violations] == [v.key for v in online.violations()]
        assert [v.key for v in online.violations()] == ([(0.5, "AF", "a")] if bad else []), basis
        assert [len(v.witness) for v in offline.violations] == [len(v.witness) for v in online.violations()]


@given(
    st.lists(
        st.tuples(st.floats(0, 10), st.floats(0, 3), st.sampled_from(["service", "backlog"])), max_size=8
    ),
    st.floats(0, 10),
    st.floats(0, 3),
)
def test_a_miss_is_blamed_on_the_earliest_break_that_overlaps_its_span(
    spans: list[tuple[float, float, str]], arrive: float, relative: float
) -> None:
    """The O(log n) search agrees with a plain scan written from the rule: a break [since, until]
    overlaps [arrival − relative deadline, deadline]; the earliest-starting one is named."""
    evidence = Attribution(make_contract())
    evidence.breaks = [Break(c, s, s + d, "recomputed") for s, d, c in spans]
    deadline = arrive + relative
    miss = Violation(
        "SF", "a", deadline, (Arrive(arrive, "a", "assured", deadline),), context={"deadline": deadline}
    )
    faults, attributed = evidence.split([miss])
    start = arrive - relative
    overlapping = sorted(
        (b for b in evidence.breaks if b.since <= deadline and b.until >= start), key=lambda b: b.since
    )
    if not overlapping:
        assert faults == [miss] and attributed == []
    else:
        assert faults == [] and attributed[0].since == overlapping[0].since
