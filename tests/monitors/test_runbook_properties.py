"""PR, RL, EV, ER and FR: online = offline = an independent brute force; each violation caught with
a witness."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.cli import main
from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.errors import SpecError
from rvguard.events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Demote,
    Dispatch,
    Event,
    Evict,
    Fail,
    Relocate,
    Restore,
    Route,
    RouteMode,
    Sample,
)
from rvguard.io import write_events
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline
from rvguard.monitors.rl import toggle_bound

from .brute_force_runbook import eviction, preemption, redline, relief, routing
from .strategies import eviction_traces, small_contract, wellformed_traces

PROPS = ("PR", "RL", "EV", "ER", "FR")
CONTRACTS = {
    "count": small_contract("count"),
    "tokens": small_contract("tokens", epoch=0.3),
    # the credited-headroom rule judged on the contract's target and capacity, not the records'
    "stated": small_contract("count", eviction={"k": 2, "capacity": 64, "target": 0.5}),
}
TRACES = st.booleans().flatmap(lambda runbook: wellformed_traces(runbook=runbook, max_steps=50))
ORACLES = {"PR": preemption, "RL": redline, "EV": eviction, "ER": relief, "FR": routing}


def _online(events: list[Event], c: Contract, props: tuple[str, ...] = PROPS) -> Monitor:
    m = Monitor(c, ("WF", *props))
    m.feed_all(events)
    return m


def _key(v: object) -> tuple[object, ...]:
    w = [(e.kind.value, e.rid, e.t) for e in v.witness]  # type: ignore[attr-defined]
    return (v.property, v.rid, v.t, v.detail, dict(v.context), w)  # type: ignore[attr-defined]


@settings(max_examples=400, deadline=None)
@given(TRACES, st.sampled_from(sorted(CONTRACTS)))
def test_online_is_the_brute_force_statement(events: list[Event], credit: str) -> None:
    c = CONTRACTS[credit]
    found = {(v.property, v.rid, v.t) for v in _online(events, c).violations()}
    assert not {f for f in found if f[0] == "WF"}
    expected = set().union(*(oracle(events, c) for oracle in ORACLES.values()))
    assert found == expected


@settings(max_examples=300, deadline=None)
@given(TRACES, st.sampled_from(sorted(CONTRACTS)))
def test_online_and_offline_agree_with_witnesses(events: list[Event], credit: str) -> None:
    c = CONTRACTS[credit]
    props = ("AF", "SF", "DR", "RB", *PROPS)
    online = _online(events, c, props)
    offline = check_offline(ColumnarTrace.from_events(events), c, ("WF", *props))
    assert offline.vectorised == all(e.kind.value in _DESIGN2 for e in events)
    assert [_key(v) for v in online.violations()] == [_key(v) for v in offline.violations]
    for v in online.violations():  # a witness is the request's own events; PR, RL, EV, FR: the bad one last
        assert all(e.rid == v.rid for e in v.witness)
        if v.property in PROPS:
            assert v.witness[-1].t == v.t


@settings(max_examples=300, deadline=None)
@given(eviction_traces(), st.sampled_from(sorted(CONTRACTS)))
def test_ev_with_its_credited_headroom_rule_is_the_brute_force_online_and_offline(
    events: list[Event], name: str
) -> None:
    """Traces dense in evictions (k, protected requests, and emergency evictions recording their
    headroom, target and capacity, landed or not by fresh samples): online = the exact-fraction
    brute force = offline, witnesses included."""
    c = CONTRACTS[name]
    online = _online(events, c, ("EV", "ER"))
    assert {(v.property, v.rid, v.t) for v in online.violations()} == eviction(events, c) | relief(events, c)
    offline = check_offline(ColumnarTrace.from_events(events), c, ("WF", "EV", "ER"))
    assert [_key(v) for v in online.violations()] == [_key(v) for v in offline.violations]


_DESIGN2 = {"arrive", "admit", "reject", "dispatch", "complete", "drop", "fail"}


def _emergency(t: float, rid: str, state: int, headroom: float, target: float = 0.5) -> Evict:
    return Evict(t, rid, state, "emergency", resource="kv", headroom=headroom, target=target, capacity=100)


def _served(rid: str, t: float, tenant: str, basis: Basis) -> list[Event]:
    return [Arrive(t, rid, tenant), Admit(t, rid, basis), Dispatch(t, rid)]


C = small_contract()


@pytest.mark.parametrize(
    ("events", "prop", "detail"),
    [
        # PR: an entitled (floor-admitted) request evicted, or failed 'preempted'
        ([*_served("a", 0.0, "a", Basis.FLOOR), Evict(0.1, "a", 9)], "PR", "was evicted"),
        ([*_served("a", 0.0, "a", Basis.FLOOR), Fail(0.1, "a", "preempted")], "PR", "'preempted'"),
        # PR: any end the guard caused, not only 'preempted': a shutdown of an entitled request
        ([*_served("a", 0.0, "a", Basis.DEMOTED), Fail(0.1, "a", "shutdown")], "PR", "'shutdown'"),
        ([*_served("a", 0.0, "a", Basis.FLOOR), Fail(0.1, "a", "SystemExit")], "PR", "ended by the guard"),
        # EV: k = 1, a second eviction in flight
        (
            _served("o1", 0.0, "o", Basis.SURPLUS)
            + _served("o2", 0.0, "o", Basis.SURPLUS)
            + [Evict(0.1, "o1", 5), Evict(0.2, "o2", 7)],
            "EV",
            "2 evictions in flight > k = 1",
        ),
        # EV: an emergency eviction while the credited headroom (0.1 measured + 50/100 of o1's
        # eviction, not landed: no sample since) already reaches the target 0.5
        (
            _served("o1", 0.0, "o", Basis.SURPLUS)
            + _served("o2", 0.0, "o", Basis.SURPLUS)
            + [
                Sample(0.0, "kv", 0.1, 0.0),  # Ĥ = 0.1: what the evictions record
                _emergency(0.1, "o1", 50, 0.1),
                Fail(0.1, "o1", "preempted"),
                _emergency(0.2, "o2", 10, 0.1),
            ],
            "EV",
            "credited headroom already reaches the target 0.5: measured 0.1 + 50 state tokens",
        ),
        # FR: a p2c route on a view 1 s old (staleness 0.25), and e0 (C_e = 1) taken twice
        ([Arrive(1.0, "o", "o"), Route(1.0, "o", "e1", 0.0)], "FR", "1 s old > staleness 0.25"),
        (
            [
                Arrive(0.0, "o1", "o"),
                Route(0.0, "o1", "e0", 0.0),
                Admit(0.0, "o1"),
                Dispatch(0.0, "o1"),
                Arrive(0.1, "o2", "o"),
                Route(0.1, "o2", "e0", 0.1),
                Admit(0.1, "o2"),
                Dispatch(0.1, "o2"),
            ],
            "FR",
            "2 in flight on engine 'e0' > C_e = 1",
        ),
        # RL: a demotion on a stale sample, a demotion of a floor request, too many toggles
        (
            [
                Sample(0.0, "kv", 0.1, 0.0),
                Arrive(1.0, "o", "o"),
                Admit(1.0, "o"),
                Demote(1.0, "o", "kv", 0.0),
            ],
            "RL",
            "1 s old > staleness 0.5",
        ),
        (
            [
                Sample(0.0, "kv", 0.1, 0.0),
                Arrive(0.0, "a", "a"),
                Admit(0.0, "a", Basis.FLOOR),
                Demote(0.1, "a", "kv", 0.0),
            ],
            "RL",
            "assured request was demoted",
        ),
        # RL: a demotion citing a healthy sample (95 % headroom, h_min 20 %), one citing a sample
        # time no recorded sample has, a restore on a stale sample, a restore while the redline fires
        (
            [
                Sample(0.0, "kv", 0.95, 0.0),
                Arrive(0.0, "o", "o"),
                Admit(0.0, "o"),
                Demote(0.1, "o", "kv", 0.0),
            ],
            "RL",
            "the cited sample does not justify a demotion: Ĥ = 0.95",
        ),
        (
            [
                Sample(0.0, "kv", 0.1, 0.0),
                Arrive(0.0, "o", "o"),
                Admit(0.0, "o"),
                Demote(0.1, "o", "kv", 0.05),
            ],
            "RL",
            "cites a sample of 'kv' at 0.05 that no recorded sample has",
        ),
        (
            [
                Sample(0.0, "kv", 0.1, 0.0),
                Arrive(0.0, "o", "o"),
                Admit(0.0, "o"),
                Demote(0.0, "o", "kv", 0.0),
                Sample(5.0, "kv", 1.0, 0.5),
                Sample(5.0, "kv", 1.0, 0.6),
                Restore(5.0, "o", "kv", 0.6),
            ],
            "RL",
            "4.4 s old > staleness 0.5 s (stale telemetry never restores)",
        ),
        (
            [
                Sample(0.0, "kv", 0.1, 0.0),
                Arrive(0.0, "o", "o"),
                Admit(0.0, "o"),
                Demote(0.0, "o", "kv", 0.0),
                Restore(0.1, "o", "kv", 0.0),
            ],
            "RL",
            "the redline still fires on 'kv' (a restore needs it clear)",
        ),
    ],
)
def test_each_violation_is_caught_with_its_witness(events: list[Event], prop: str, detail: str) -> None:
    [v] = [v for v in _online(events, C).violations() if v.property == prop]
    assert v.property == prop and detail in v.detail
    assert v.witness[-1] == events[-1]  # the bad prefix ends with the violating event
    assert list(v.witness) == [e for e in events if e.rid == v.rid]
    assert ORACLES[prop](events, C) == {(prop, v.rid, v.t)}
    offline = check_offline(ColumnarTrace.from_events(events), C, ("WF", prop))
    assert [_key(x) for x in offline.violations] == [_key(v)]


def test_surplus_preemption_eviction_and_fresh_routes_hold() -> None:
    events = [
        Sample(0.0, "kv", 0.1, 0.0),
        Arrive(0.0, "o", "o"),
        Route(0.0, "o", "e0", 0.0, RouteMode.P2C),
        Admit(0.0, "o"),
        Demote(0.1, "o", "kv", 0.0),
        Sample(0.2, "kv", 1.0, 0.2),  # Ĥ = 0.37 ≥ h_min + margin: the redline clears
        Restore(0.2, "o", "kv", 0.2),
        Dispatch(0.2, "o"),
        # four empty readings take Ĥ from 0.37 to 0.37·0.7⁴ ≈ 0.089, below the hard floor 0.125
        *[Sample(0.3, "kv", 0.0, 0.25 + i / 100) for i in range(4)],
        _emergency(0.3, "o", 40, 0.37 * 0.7**4),
        Relocate(0.3, "o", "e1"),
        Dispatch(0.3, "o"),
        Complete(0.4, "o"),
        Arrive(0.5, "p", "o"),
        Route(0.5, "p", "e0", None, RouteMode.SILOED),
        Admit(0.5, "p"),
        Dispatch(0.5, "p"),
        Fail(0.6, "p", "preempted"),
    ]
    assert _online(events, C).violations() == []


@pytest.mark.parametrize(
    "reason", ["cancelled", "timeout", "client-error: http 400", "backend", "CancelledError: engine"]
)
def test_pr_leaves_the_engines_and_the_clients_ends_of_a_protected_request_to_sf(reason: str) -> None:
    """A protected request that the engine failed or its client gave up on was not ended by the guard."""
    events = [*_served("a", 0.0, "a", Basis.FLOOR), Fail(0.1, "a", reason)]
    assert [v for v in _online(events, C).violations() if v.property == "PR"] == []
    assert preemption(events, C) == set()


@pytest.mark.parametrize("reason", ["preempted", "shutdown"])
def test_an_assured_tenants_demoted_excess_may_be_preempted_or_shut_down(reason: str) -> None:
    """Tenant a's floor is 2: its third arrival in the window is burst excess, admitted demoted (not
    entitled): surplus work, which the guard may end; the first two are protected however admitted."""
    events: list[Event] = []
    for i in range(3):
        events += _served(f"a{i}", 0.0, "a", Basis.DEMOTED)
    events += [Fail(0.1, "a2", reason), Fail(0.2, "a1", reason)]
    online = _online(events, C)
    assert [(v.property, v.rid) for v in online.violations()] == [("PR", "a1")]
    offline = check_offline(ColumnarTrace.from_events(events), C, ("WF", *PROPS))
    assert [_key(v) for v in offline.violations] == [_key(v) for v in online.violations()]


def _two_emergencies(between: list[Event], second_headroom: float = 0.1) -> list[Event]:
    return [
        *_served("o1", 0.0, "o", Basis.SURPLUS),
        *_served("o2", 0.0, "o", Basis.SURPLUS),
        Sample(0.0, "kv", 0.1, 0.0),  # Ĥ = 0.1: what the evictions record
        _emergency(0.5, "o1", 50, 0.1),
        Fail(0.5, "o1", "preempted"),
        *between,
        _emergency(1.0, "o2", 10, second_headroom),
    ]


@pytest.mark.parametrize(
    ("between", "redundant"),
    [
        ([], True),  # o1's relief is still credited: 0.1 + 0.5 reaches 0.5
        ([Sample(0.7, "kv", 0.1, 0.7)], False),  # a fresh sample taken after it: landed
        ([Sample(0.7, "seqs", 0.1, 0.7)], True),  # another resource's sample lands nothing
        ([Sample(0.7, "kv", 0.1, 0.4)], True),  # taken before the eviction: not its measure
        ([Sample(0.7, "kv", 0.1, 0.0)], True),  # a duplicate of the last sample (stale)
    ],
)
def test_an_eviction_stays_credited_until_a_fresh_sample_taken_after_it(
    between: list[Event], redundant: bool
) -> None:
    events = _two_emergencies(between)
    found = [v for v in _online(events, C).violations() if v.property == "EV"]
    assert [(v.rid, v.t) for v in found] == ([("o2", 1.0)] if redundant else [])
    assert eviction(events, C) == {("EV", v.rid, v.t) for v in found}
    if redundant:
        assert found[0].context["credited_evictions"] == ["o1"]
        assert found[0].context["credited_state"] == 50


def test_the_credited_rule_reads_the_contracts_target_before_the_records() -> None:
    """The record says target 0.5 (0.1 + 25/100 < 0.5: fine); the contract states 0.35, which
    the credited headroom reaches exactly (on the decimals): redundant."""
    events = [
        *_served("o1", 0.0, "o", Basis.SURPLUS),
        *_served("o2", 0.0, "o", Basis.SURPLUS),
        _emergency(0.5, "o1", 25, 0.1),
        Fail(0.5, "o1", "preempted"),
        _emergency(1.0, "o2", 10, 0.1),
    ]
    assert [v for v in _online(events, C).violations() if v.property == "EV"] == []
    stated = small_contract(eviction={"k": 1, "capacity": 100, "target": 0.35})
    [v] = [v for v in _online(events, stated).violations() if v.property == "EV"]
    assert v.rid == "o2" and "reaches the target 0.35" in v.detail
    assert eviction(events, stated) == {("EV", "o2", 1.0)}


@pytest.mark.parametrize(
    "second",
    [
        Evict(1.0, "o2", 10, "voluntary", resource="kv", headroom=0.9, target=0.5, capacity=100),
        Evict(1.0, "o2", 10, "voluntary"),  # a voluntary one needs no headroom (its trigger is the crossover)
        Evict(1.0, "o2", 10, ""),  # nor a move off a dead engine
        Evict(1.0, "o2", 10, "emergency", resource="kv", headroom=0.1),  # no target nor capacity anywhere
    ],
)
def test_what_is_not_judged_on_the_emergency_clauses(second: Evict) -> None:
    events = [*_served("o2", 0.0, "o", Basis.SURPLUS), second]
    assert _online(events, C).violations() == []
    assert eviction(events, C) == set()


def test_the_toggle_bound() -> None:
    assert [toggle_bound(n, 1) for n in range(6)] == [0, 2, 2, 4, 4, 6]
    assert [toggle_bound(n, 3) for n in (0, 1, 4, 5)] == [0, 2, 2, 4]


@pytest.mark.parametrize(("prop", "block"), [("RL", "headroom"), ("EV", "eviction")])
def test_a_property_without_its_contract_block_is_refused_naming_it(prop: str, block: str) -> None:
    with pytest.raises(SpecError, match=f"property {prop} needs the contract's {block} block") as info:
        Monitor(small_contract(runbook=False), (prop,))
    assert info.value.field == block
    Monitor(small_contract(runbook=False), ("PR", "FR"))  # PR needs nothing more; FR reads the routes' bounds


def test_the_cli_selects_them_and_reports_the_witness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.parquet"
    write_events(
        trace, [*_served("a", 0.0, "a", Basis.FLOOR), Evict(0.1, "a", 9), Fail(0.2, "a", "preempted")]
    )
    spec = tmp_path / "c.yaml"
    spec.write_text(
        "window: 1\nslots: 2\nservice: {s_max: 0.5, lower: 0.1}\n"
        "tenants: {a: {floor: 2, deadline: 1}}\neviction: {k: 1}\n",
        encoding="utf-8",
    )
    assert main(["check", str(trace), "--contract", str(spec), "--properties", "PR,EV,WF", "--json"]) == 1
    out = capsys.readouterr().out
    assert out.count('"property": "PR"') == 2 and out.count('"property": "EV"') == 1


def test_merged_replica_traces_leave_rl_and_ev_to_each_replica(tmp_path: Path) -> None:
    """Each replica's redline reads its own engines and keeps its own k: judged per replica trace."""
    from rvguard.check import check_traces

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_events(a, [Sample(0.0, "kv", 0.1, 0.0), *_served("A/o1", 0.0, "o", Basis.SURPLUS)])
    write_events(b, [*_served("B/o1", 0.0, "o", Basis.SURPLUS), Evict(0.1, "B/o1", 4)])
    report = check_traces([str(a), str(b)], C, properties=["AF", "WF", "PR", "RL", "EV"])
    assert "RL" not in report.properties and "EV" not in report.properties and "PR" in report.properties
    assert check_traces([str(b)], C, properties=["EV", "RL"]).properties == ("EV", "RL")
