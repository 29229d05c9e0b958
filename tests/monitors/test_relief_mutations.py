"""RL, EV, ER and FR fail when the mechanism they guard is broken: for each clause, a compliant trace
(from the decision core, the eviction planner, the fleet router) and the smallest edit that breaks
exactly that clause, reported at the edited event online and offline, and by the independent oracle."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rvguard.cli import main
from rvguard.clock import ManualClock
from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract, contract_from_mapping
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.eviction import Candidate, EvictionConfig, EvictionPlanner
from rvguard.enforce.redline import HeadroomSample, redline_config
from rvguard.enforce.request import Request
from rvguard.events import (
    Admit,
    Arrive,
    Demote,
    Dispatch,
    Event,
    Evict,
    Proposal,
    Restore,
    Route,
    RouteMode,
    Sample,
)
from rvguard.fleet.router import EngineView, Router
from rvguard.gateway.fleet_trace import FleetTrace
from rvguard.io import write_events
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline

from .brute_force_runbook import eviction, redline, routing

#: h_min 0.4 and hard floor 0.3 on kv: the issue's tie (headroom 0.29) is past the hard floor
SPEC = {
    "window": 1.0,
    "slots": 4,
    "excess": "demote",
    "service": {"s_max": 0.5, "lower": 0.1},
    "tenants": {"assured": {"floor": 2, "deadline": 3.0}, "opp": {"floor": 0, "deadline": 3.0, "tier": 1}},
    "headroom": {
        "alpha": 0.5,
        "dwell": 1,
        "staleness": 1.0,
        "resources": {"kv": {"h_min": 0.4, "margin": 0.1, "hard_floor": 0.3}, "seqs": {"h_min": 0.3}},
    },
    "eviction": {"k": 2, "capacity": 1000, "target": 0.3},
    "fleet": {"staleness": 0.5, "engines": {"e0": 2, "e1": 2}},
}
C: Contract = contract_from_mapping(SPEC)
ORACLES = {"RL": redline, "EV": eviction, "FR": routing}


def _reported(events: list[Event], prop: str) -> list[tuple[str, float]]:
    """``prop``'s violations (rid, t), online; offline and (where there is one) the oracle agree."""
    monitor = Monitor(C, ("WF", prop))
    monitor.feed_all(events)
    online = [(v.rid, v.t) for v in monitor.violations()]
    offline = check_offline(ColumnarTrace.from_events(events), C, ("WF", prop))
    assert [(v.rid, v.t) for v in offline.violations] == online
    if prop in ORACLES:
        assert ORACLES[prop](events, C) == {(prop, rid, t) for rid, t in online}
    return online


def _detail(events: list[Event], prop: str) -> str:
    monitor = Monitor(C, ("WF", prop))
    monitor.feed_all(events)
    return "; ".join(v.detail for v in monitor.violations())


# -- RL: the decision core's own trace, then one edit ----------------------------------------------
def _core_trace() -> list[Event]:
    """Surplus queued behind the slots, the redline fires on kv (o2, o3 demoted), clears (restored)."""
    assert C.headroom is not None
    core = DecisionCore(C, redline=redline_config(C.headroom))
    out: list[Event] = []
    for i in range(4):
        out += core.arrive(Request(f"a{i}", "assured", 0.0), Proposal(), 0.0)
    out += core.arrive(Request("o2", "opp", 0.1), Proposal(), 0.1)
    out += core.arrive(Request("o3", "opp", 0.1), Proposal(), 0.1)
    out += core.observe(HeadroomSample("kv", 0.1, 1.0), 1.0)  # Ĥ 0.1 < 0.4: fires, o2 and o3 held
    out += core.observe(HeadroomSample("kv", 0.95, 1.5), 1.5)  # Ĥ 0.525 ≥ 0.5: clears, restored
    return out


def _at(events: list[Event], kind: type, n: int = 0) -> int:
    return [i for i, e in enumerate(events) if isinstance(e, kind)][n]


def test_the_cores_trace_holds_and_reaches_every_move() -> None:
    trace = _core_trace()
    assert {Demote, Restore, Sample} <= {type(e) for e in trace}
    assert _reported(trace, "RL") == []


def test_a_demote_citing_a_healthy_sample_fails_at_it() -> None:
    """The cited sample edited to 95 % headroom (h_min 40 %): the first demote is unjustified."""
    trace = _core_trace()
    s = _at(trace, Sample)
    cited = trace[s]
    assert isinstance(cited, Sample)
    trace[s] = Sample(cited.t, cited.resource, 0.95, cited.sample_time)
    d = trace[_at(trace, Demote)]
    assert _reported(trace, "RL")[0] == (d.rid, d.t)
    assert "does not justify a demotion: Ĥ = 0.95" in _detail(trace, "RL")


def test_a_demote_citing_a_sample_time_no_sample_has_fails_at_it() -> None:
    trace = _core_trace()
    i = _at(trace, Demote, 1)
    d = trace[i]
    assert isinstance(d, Demote)
    trace[i] = Demote(d.t, d.rid, d.resource, d.sample_time - 0.25)
    assert _reported(trace, "RL") == [(d.rid, d.t)]
    assert "that no recorded sample has" in _detail(trace, "RL")


def test_a_restore_on_a_stale_sample_fails_at_it() -> None:
    """The clearing sample stamped 5 s before its reading (staleness 1 s): stale telemetry never restores."""
    trace = _core_trace()
    s = _at(trace, Sample, 1)
    clear = trace[s]
    assert isinstance(clear, Sample)
    old = clear.sample_time - 0.4  # still newer than the firing sample: fresh for the redline
    trace[s] = Sample(clear.t + 1.0, clear.resource, clear.value, old)
    trace[s + 1 :] = [
        type(e)(e.t + 1.0, e.rid, e.resource, old) if isinstance(e, Restore) else e for e in trace[s + 1 :]
    ]
    r = trace[_at(trace, Restore)]
    assert _reported(trace, "RL")[0] == (r.rid, r.t)
    assert "stale telemetry never restores" in _detail(trace, "RL")


def test_a_restore_while_the_redline_fires_fails_at_it() -> None:
    """The clearing sample edited to leave Ĥ below h_min: the restores come while kv fires."""
    trace = _core_trace()
    s = _at(trace, Sample, 1)
    clear = trace[s]
    assert isinstance(clear, Sample)
    trace[s] = Sample(clear.t, clear.resource, 0.2, clear.sample_time)
    r = trace[_at(trace, Restore)]
    assert _reported(trace, "RL")[0] == (r.rid, r.t)
    assert "the redline still fires on 'kv'" in _detail(trace, "RL")


def test_only_the_toggle_that_crosses_the_bound_is_reported() -> None:
    """One fresh sample (bound 2): demote, restore and demote again of o1 are toggles 1-3; a demote of
    o2 right after is no toggle (same episode), and a second crossing needs the count back within it."""
    events: list[Event] = [
        Sample(0.0, "kv", 0.1, 0.0),
        *[x for rid in ("o1", "o2") for x in (Arrive(0.0, rid, "opp"), Admit(0.0, rid))],
        Demote(0.0, "o1", "kv", 0.0),
        Restore(0.1, "o1", "kv", 0.0),  # the redline still fires: this restore fails on that
        Demote(0.2, "o1", "kv", 0.0),  # toggle 3 > 2: the crossing
        Demote(0.2, "o2", "kv", 0.0),  # no toggle: not reported again
    ]
    found = _reported(events, "RL")
    assert found == [("o1", 0.1), ("o1", 0.2)]
    assert "3 toggles of 'kv' in 1 fresh samples" in _detail(events, "RL")


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.1, 0.3]),
            st.sampled_from(["arrive", "sample", "finish"]),
            st.sampled_from([0.05, 0.2, 0.5, 0.9]),
        ),
        max_size=40,
    ),
    st.data(),
)
def test_rl_reports_a_miscited_demote_of_any_core_trace_at_it(
    script: list[tuple[float, str, float]], data: st.DataObject
) -> None:
    """Hypothesis drives the core; one of its demotes is made to cite a time no sample has."""
    assert C.headroom is not None
    core = DecisionCore(C, redline=redline_config(C.headroom))
    trace: list[Event] = []
    for i in range(4):  # the slots busy with floor work: surplus queues, where the redline acts
        trace += core.arrive(Request(f"a{i}", "assured", 0.0), Proposal(), 0.0)
    trace += core.arrive(Request("r0", "opp", 0.0), Proposal(), 0.0)
    trace += core.observe(HeadroomSample("kv", 0.05, 0.0), 0.0)  # fires: r0 demoted
    now, n = 0.0, 1
    for step, op, value in script:
        now += step
        if op == "arrive":
            trace += core.arrive(Request(f"r{n}", "opp" if n % 3 else "assured", now), Proposal(), now)
            n += 1
        elif op == "sample":
            trace += core.observe(HeadroomSample("kv", value, now), now)
        elif n and core.running_basis(rid := f"r{int(value * 10) % n}") is not None:
            trace += core.finish(rid, now)
    assert _reported(trace, "RL") == []
    demotes = [i for i, e in enumerate(trace) if isinstance(e, Demote)]
    assume(demotes)
    i = data.draw(st.sampled_from(demotes))
    d = trace[i]
    assert isinstance(d, Demote)
    trace[i] = Demote(d.t, d.rid, d.resource, d.sample_time - 0.01)
    assert _reported(trace, "RL") == [(d.rid, d.t)]


# -- EV: the exact tie, in the planner and in check --------------------------------------------------
def test_the_planner_refuses_the_eviction_at_an_exact_credited_tie() -> None:
    """Headroom 0.29, target 0.3, capacity 1000: one eviction of 10 tokens credits exactly 0.30, so a
    second is redundant (binary floats made (0.3 − 0.29)·1000 − 10 = 9e-15 > 0 and issued it)."""
    planner = EvictionPlanner(EvictionConfig(k=2, capacity=1000, target=0.3))
    plan = planner.emergency(0.0, 0.29, [Candidate("x", 10, 0), Candidate("y", 10, 0)])
    assert [e.rid for e in plan.evict] == ["x"]
    assert planner.emergency(0.1, 0.29, [Candidate("x", 10, 0), Candidate("y", 10, 0)]).evict == ()


def _tie() -> list[Event]:
    running = [
        x for rid in ("x", "y") for x in (Arrive(0.0, rid, "opp"), Admit(0.0, rid), Dispatch(0.0, rid))
    ]
    return [
        Sample(0.0, "kv", 0.29, 0.0),
        *running,
        Evict(0.1, "x", 10, "emergency", resource="kv", headroom=0.29, target=0.3, capacity=1000),
        Evict(0.2, "y", 10, "emergency", resource="kv", headroom=0.29, target=0.3, capacity=1000),
    ]


def test_ev_and_check_report_the_eviction_at_an_exact_credited_tie(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _tie()
    assert _reported(events, "EV") == [("y", 0.2)]
    assert _reported(events[:-1], "EV") == []
    path, spec = tmp_path / "t.jsonl", tmp_path / "c.json"
    write_events(path, events)
    spec.write_text(json.dumps(SPEC), encoding="utf-8")
    assert main(["check", str(path), "--contract", str(spec), "--properties", "EV", "--json"]) == 1
    assert capsys.readouterr().out.count('"property": "EV"') == 1


@pytest.mark.parametrize(
    ("edit", "detail"),
    [
        ({"resource": None, "headroom": None}, "records no resource and headroom"),
        ({"headroom": 0.3}, "is not below its hard floor 0.3"),  # the trigger, at its boundary
        ({"resource": "seqs"}, "of 'seqs' is not below its hard floor 0"),  # a resource with no hard floor
    ],
)
def test_ev_reports_an_emergency_eviction_without_its_trigger(edit: dict[str, object], detail: str) -> None:
    x = _tie()[-2]
    assert isinstance(x, Evict)
    fields = {"resource": x.resource, "headroom": x.headroom, "target": x.target, "capacity": x.capacity}
    events = [*_tie()[:-2], Evict(x.t, x.rid, x.state, x.reason, **{**fields, **edit})]  # type: ignore[arg-type]
    assert _reported(events, "EV") == [("x", 0.1)]
    assert detail in _detail(events, "EV")


def test_er_reports_a_plan_whose_relief_lands_after_the_deadline() -> None:
    x = _tie()[-2]
    assert isinstance(x, Evict)
    on_time = Evict(
        x.t,
        x.rid,
        x.state,
        x.reason,
        x.resource,
        x.headroom,
        x.target,
        x.capacity,
        extra={"lands_at": 1.0, "deadline": 1.0},
    )
    late = Evict(
        x.t,
        x.rid,
        x.state,
        x.reason,
        x.resource,
        x.headroom,
        x.target,
        x.capacity,
        extra={"lands_at": 1.5, "deadline": 1.0},
    )
    assert _reported([*_tie()[:-2], on_time], "ER") == []
    assert _reported([*_tie()[:-2], late], "ER") == [("x", 0.1)]
    assert "lands at 1.5, after the node's deadline 1" in _detail([*_tie()[:-2], late], "ER")


# -- FR: the router's own routes, then one edit -----------------------------------------------------
def _fleet_trace(seed: int) -> list[Event]:
    """Six requests routed by the router on fresh views (engine headroom differing), written as the
    gateway writes them, then dispatched; then two siloed on a stale view."""
    router = Router(random.Random(seed), staleness=0.5)
    writer = FleetTrace(None, ManualClock(), staleness=0.5, slots={"e0": 2, "e1": 2})
    heads = {"e0": 0.7, "e1": 0.4}
    held = {"e0": 0, "e1": 0}
    out: list[Event] = []
    for i in range(4):
        t = 1.0 + i / 8
        views = [EngineView(e, heads[e], t - 0.125 if i < 2 else t - 1.0, held[e], 2) for e in ("e0", "e1")]
        decision = router.route(f"r{i}", views, t)
        assert decision.engine is not None
        held[decision.engine] += 1
        out += [
            Arrive(t, f"r{i}", "opp"),
            Admit(t, f"r{i}"),
            writer._route(t, f"r{i}", decision.engine, decision),
        ]
        out.append(Dispatch(t, f"r{i}"))
    return out


@given(st.integers(0, 2**16))
@settings(max_examples=20, deadline=None)
def test_fr_reports_a_route_against_the_headroom_at_it(seed: int) -> None:
    trace = _fleet_trace(seed)
    assert _reported(trace, "FR") == []
    i = _at(trace, Route)
    r = trace[i]
    assert isinstance(r, Route) and r.mode is RouteMode.P2C
    assert r.engine == "e0"  # both sampled (two free engines): more headroom wins
    trace[i] = Route(r.t, r.rid, "e1", r.view_time, r.mode, extra=r.extra)
    # first at the edit (the later siloed routes, decided on the true counts, may now overfill e1)
    assert _reported(trace, "FR")[0] == (r.rid, r.t)
    assert "routed to 'e1' with headroom 0.4 while 'e0' had 0.7" in _detail(trace, "FR")


def test_fr_reports_a_siloed_route_onto_a_full_engine_at_it() -> None:
    """r0 and r1 go to e0 (more headroom), filling its two slots; r2 and r3 are siloed (the views
    went stale) onto e1. The edit sends r3 onto e0: a siloed route spending a full engine's slots."""
    trace = _fleet_trace(7)
    routes = [e for e in trace if isinstance(e, Route)]
    assert [(r.engine, r.mode.value) for r in routes] == [("e0", "p2c")] * 2 + [("e1", "siloed")] * 2
    assert _reported(trace, "FR") == []
    i = max(i for i, e in enumerate(trace) if isinstance(e, Route))
    r = trace[i]
    assert isinstance(r, Route)
    trace[i] = Route(r.t, r.rid, "e0", r.view_time, r.mode, extra=r.extra)
    assert _reported(trace, "FR")[0] == (r.rid, r.t)
    assert "a siloed route onto a full engine (2 already in flight on engine 'e0'" in _detail(trace, "FR")


def test_a_late_route_is_legal_and_judged_on_its_choice() -> None:
    """A dispatch that waited for a slot is routed after it: legal, and still judged on the headroom."""
    sampled = {"sampled": {"e0": 0.7, "e1": 0.4}}
    ok = [
        Arrive(1.0, "r", "opp"),
        Admit(1.0, "r"),
        Dispatch(1.0, "r"),
        Route(1.0, "r", "e0", 0.9, extra=sampled),
    ]
    assert _reported(ok, "FR") == []
    bad = [*ok[:-1], Route(1.0, "r", "e1", 0.9, extra=sampled)]
    assert _reported(bad, "FR") == [("r", 1.0)]
