"""Every clause of RL, EV, ER and FR fails when broken: a compliant trace of the mechanism (the
decision core's redline, the Guard's emergency channel, the fleet router as the gateway writes its
routes), the smallest explicit edit that breaks one clause, and the property reports it at the
edited event, online and offline alike (and, where test_relief_mutations has one, the oracle).

Clause audit (DESIGN §10's table, §11's last paragraph; the monitors' module docs) — property →
clause → the test that breaks it (``here``: this file; ``relief``: test_relief_mutations.py;
``runbook``: test_runbook_properties.py; ``emergency``: tests/enforce/test_emergency_property.py):

RL
  * a demote cites a sample time no recorded sample has → relief
    (`test_a_demote_citing_a_sample_time_no_sample_has_fails_at_it`, and on hypothesis's core runs
    `test_rl_reports_a_miscited_demote_of_any_core_trace_at_it`)
  * a demote with no sample of its resource recorded → here, `test_rl_demote_with_no_sample`
  * a demote citing a sample older than the staleness bound → here, `test_rl_stale_demote`
  * a demote the cited sample does not justify (Ĥ and projection clear of h_min) → relief
    (`test_a_demote_citing_a_healthy_sample_fails_at_it`)
  * a demote after a later sample cleared the redline → here, `test_rl_demote_after_the_redline_cleared`
  * a demote on a resource the contract states no redline for → here, `test_rl_unstated_resource`
  * a demote of a protected (entitled or floor-admitted) request → here, `test_rl_protected_demoted`
  * a restore citing a stale sample → relief (`test_a_restore_on_a_stale_sample_fails_at_it`)
  * a restore citing a sample no recorded sample has → here, `test_rl_restore_citing_no_sample`
  * a restore while the redline fires → relief (`test_a_restore_while_the_redline_fires_fails_at_it`)
  * the toggle that crosses 2⌈n/(dwell+1)⌉ → relief
    (`test_only_the_toggle_that_crosses_the_bound_is_reported`), on a hand-built trace only: the
    core's short trace has one demote-restore episode per resource, far within its bound
EV
  * more than k evictions in flight → runbook (`test_each_violation_is_caught_with_its_witness`, k = 1,
    hand-built: the Guard's planner holds k, and adding an eviction is not one event's edit)
  * a protected request evicted → here, `test_ev_protected_request_evicted` (the Guard's trace)
  * an emergency eviction recording no resource and headroom → emergency
    (`test_ev_reports_each_mutation_of_the_guards_emergency_evictions_at_it`), relief
  * the recorded headroom is not the Ĥ replayed from the samples → here,
    `test_ev_recorded_headroom_not_the_samples` (the Guard's trace)
  * the trigger (headroom not below the hard floor) → relief
    (`test_ev_reports_an_emergency_eviction_without_its_trigger`, on the planner's tie trace)
  * redundant: credited headroom reaches the target (the exact tie) → relief
    (`test_ev_and_check_report_the_eviction_at_an_exact_credited_tie`), emergency
ER
  * an emergency eviction's relief lands after the node's deadline → relief
    (`test_er_reports_a_plan_whose_relief_lands_after_the_deadline`)
FR
  * a p2c route on a view older than the staleness → here, `test_fr_stale_view`
  * a p2c route with no view at all → here, `test_fr_no_view`
  * a fresh p2c route to an engine with less headroom than another it sampled → relief
    (`test_fr_reports_a_route_against_the_headroom_at_it`)
  * a fresh p2c route to an engine it did not sample → here, `test_fr_unsampled_engine`
  * a siloed route onto a full engine → relief (`test_fr_reports_a_siloed_route_onto_a_full_engine_at_it`)
  * a siloed route onto an engine the fleet block does not list → here, `test_fr_siloed_unlisted_engine`
  * a dispatch with C_e already taken on its engine → runbook (hand-built: the router never sends a
    request to a full engine by a p2c route, and a siloed one is reported at the route first)
  * a late route (after the dispatch) judged on its choice → relief
    (`test_a_late_route_is_legal_and_judged_on_its_choice`)
"""

from __future__ import annotations

import asyncio
import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.events import Admit, Basis, Demote, Event, Evict, Restore, Route, RouteMode, Sample
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline
from rvguard.runbook_spec import HeadroomSpec

from ..enforce.test_emergency_property import _EMERGENCY, OPS, _contract, _run
from .test_relief_mutations import C, _at, _core_trace, _detail, _fleet_trace, _reported


# -- RL: the decision core's own trace (relief's `_core_trace`), then one edit ----------------------
def test_rl_demote_with_no_sample() -> None:
    """The firing sample left out: the demotes cite a resource with no sample recorded."""
    trace = _core_trace()
    del trace[_at(trace, Sample)]
    d = trace[_at(trace, Demote)]
    assert _reported(trace, "RL")[0] == (d.rid, d.t)
    assert "no sample of 'kv' was recorded before the demote" in _detail(trace, "RL")


def test_rl_stale_demote() -> None:
    """The firing sample stamped 1.5 s before its reading (staleness 1 s), the demotes citing it."""
    trace = _core_trace()
    s = _at(trace, Sample)
    fired = trace[s]
    assert isinstance(fired, Sample)
    old = fired.sample_time - 1.5
    trace[s] = Sample(fired.t, fired.resource, fired.value, old)
    trace = [dataclasses.replace(e, sample_time=old) if isinstance(e, Demote) else e for e in trace]
    d = trace[_at(trace, Demote)]
    assert _reported(trace, "RL")[0] == (d.rid, d.t)
    assert "1.5 s old > staleness 1 s (too old to act on)" in _detail(trace, "RL")


def test_rl_demote_after_the_redline_cleared() -> None:
    """A clearing sample (Ĥ 0.525 ≥ h_min + margin after a dwell of one) inserted between the firing
    sample and the demotes: the demotes cite a sample that fired, but the redline no longer does."""
    trace = _core_trace()
    s = _at(trace, Sample)
    fired = trace[s]
    assert isinstance(fired, Sample)
    trace.insert(s + 1, Sample(fired.t, fired.resource, 0.95, fired.sample_time + 0.01))
    d = trace[_at(trace, Demote)]
    assert _reported(trace, "RL")[0] == (d.rid, d.t)
    assert "a later sample of 'kv' cleared the redline before the demotion" in _detail(trace, "RL")


def test_rl_unstated_resource() -> None:
    """The firing sample and the demotes renamed to a resource the contract's block does not state."""
    trace = [
        dataclasses.replace(e, resource="disk") if isinstance(e, Sample | Demote) else e
        for e in _core_trace()
        if not isinstance(e, Restore)
    ]
    d = trace[_at(trace, Demote)]
    assert _reported(trace, "RL")[0] == (d.rid, d.t)
    assert "the contract states no redline for resource 'disk'" in _detail(trace, "RL")


def test_rl_protected_demoted() -> None:
    """The first demoted request's admit edited to basis floor: a protected request demoted."""
    trace = _core_trace()
    d = trace[_at(trace, Demote)]
    i = next(i for i, e in enumerate(trace) if isinstance(e, Admit) and e.rid == d.rid)
    trace[i] = Admit(trace[i].t, d.rid, Basis.FLOOR)
    assert _reported(trace, "RL") == [(d.rid, d.t)]
    assert "a floor-entitled or assured request was demoted" in _detail(trace, "RL")


def test_rl_restore_citing_no_sample() -> None:
    trace = _core_trace()
    i = _at(trace, Restore)
    r = trace[i]
    assert isinstance(r, Restore)
    trace[i] = dataclasses.replace(r, sample_time=r.sample_time - 0.01)
    assert _reported(trace, "RL") == [(r.rid, r.t)]
    assert "the restore cites a sample of 'kv'" in _detail(trace, "RL")


# -- EV: the Guard's own emergency evictions, then one edit ------------------------------------------
def _with_redline(contract: Contract) -> Contract:
    """The contract the Guard ran under, with the redline it ran (its ``headroom`` block stated), so
    EV judges the trigger and the recorded headroom against the trace's samples."""
    spec = HeadroomSpec.model_validate(
        {
            "alpha": 1.0,
            "horizon": 1.0,
            "staleness": 1e6,
            "resources": {"kv_cache": {"h_min": 0.2, "margin": 0.1, "hard_floor": 0.05}},
        }
    )
    return contract.model_copy(update={"headroom": spec})


def _ev(trace: list[Event], contract: Contract) -> list[tuple[str, float, str]]:
    online = Monitor(contract, ("WF", "EV"))
    online.feed_all(trace)
    found = [(v.rid, v.t, v.detail) for v in online.violations()]
    offline = check_offline(ColumnarTrace.from_events(trace), contract, ("WF", "EV"))
    assert [(v.rid, v.t, v.detail) for v in offline.violations] == found
    return found


def _guards_trace(ops: list[tuple[object, ...]], k: int, target: float) -> tuple[list[Event], Contract, int]:
    """A compliant Guard trace (its prefix drives the channel to evict), the contract with its redline,
    and the index of its last emergency eviction."""
    trace = asyncio.run(_run([*_EMERGENCY, *ops], k, 1.0, target, True))
    contract = _with_redline(_contract(k, target))
    assert _ev(trace, contract) == []
    i = max(i for i, e in enumerate(trace) if isinstance(e, Evict) and e.reason == "emergency")
    return trace, contract, i


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.integers(2, 3), st.sampled_from([0.3, 0.6]))
def test_ev_recorded_headroom_not_the_samples(ops: list[tuple[object, ...]], k: int, target: float) -> None:
    """The eviction's recorded headroom moved halfway to the hard floor: still below it (the trigger
    holds), but not the Ĥ its samples give."""
    trace, contract, i = _guards_trace(ops, k, target)
    e = trace[i]
    assert isinstance(e, Evict) and e.headroom is not None and e.headroom < 0.05
    trace[i] = dataclasses.replace(e, headroom=(e.headroom + 0.05) / 2)
    [(rid, t, detail)] = _ev(trace, contract)
    assert (rid, t) == (e.rid, e.t)
    assert f"but the samples recorded before it give Ĥ = {e.headroom:g}" in detail


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.integers(2, 3), st.sampled_from([0.3, 0.6]))
def test_ev_protected_request_evicted(ops: list[tuple[object, ...]], k: int, target: float) -> None:
    """The evicted request's admit edited to basis floor: the channel took a protected request."""
    trace, contract, i = _guards_trace(ops, k, target)
    e = trace[i]
    a = next(j for j, x in enumerate(trace) if isinstance(x, Admit) and x.rid == e.rid)
    trace[a] = Admit(trace[a].t, e.rid, Basis.FLOOR)
    [(rid, t, detail)] = _ev(trace, contract)
    assert (rid, t) == (e.rid, e.t)
    assert "a floor-entitled or assured request was evicted" in detail


# -- FR: the router's routes as the gateway writes them (relief's `_fleet_trace`), then one edit -----
SEEDS = st.integers(0, 2**16)


def _first_p2c(trace: list[Event]) -> int:
    return next(i for i, e in enumerate(trace) if isinstance(e, Route) and e.mode is RouteMode.P2C)


@settings(max_examples=15, deadline=None)
@given(SEEDS)
def test_fr_stale_view(seed: int) -> None:
    trace = _fleet_trace(seed)
    i = _first_p2c(trace)
    r = trace[i]
    assert isinstance(r, Route) and r.view_time is not None
    trace[i] = dataclasses.replace(r, view_time=r.t - 0.75)  # staleness 0.5
    assert _reported(trace, "FR")[0] == (r.rid, r.t)
    assert "decided on a view 0.75 s old > staleness 0.5 s" in _detail(trace, "FR")


@settings(max_examples=15, deadline=None)
@given(SEEDS)
def test_fr_no_view(seed: int) -> None:
    trace = _fleet_trace(seed)
    i = _first_p2c(trace)
    r = trace[i]
    assert isinstance(r, Route)
    trace[i] = dataclasses.replace(r, view_time=None)
    assert _reported(trace, "FR")[0] == (r.rid, r.t)
    assert "a p2c route with no view_time" in _detail(trace, "FR")


@settings(max_examples=15, deadline=None)
@given(SEEDS)
def test_fr_unsampled_engine(seed: int) -> None:
    """The route's record of what it compared edited to leave out the engine it chose."""
    trace = _fleet_trace(seed)
    i = _first_p2c(trace)
    r = trace[i]
    assert isinstance(r, Route)
    sampled = {e: h for e, h in r.extra["sampled"].items() if e != r.engine}
    assert sampled
    trace[i] = Route(r.t, r.rid, r.engine, r.view_time, r.mode, extra={**r.extra, "sampled": sampled})
    assert _reported(trace, "FR")[0] == (r.rid, r.t)
    assert f"routed to {r.engine!r}, which it did not sample" in _detail(trace, "FR")


def test_fr_siloed_unlisted_engine() -> None:
    """The last siloed route edited onto an engine the contract's fleet does not list."""
    trace = _fleet_trace(7)
    i = max(i for i, e in enumerate(trace) if isinstance(e, Route))
    r = trace[i]
    assert isinstance(r, Route) and r.mode is RouteMode.SILOED
    trace[i] = Route(r.t, r.rid, "e9", r.view_time, r.mode, extra=r.extra)
    assert _reported(trace, "FR")[0] == (r.rid, r.t)
    assert "engine 'e9', which the contract's fleet does not list" in _detail(trace, "FR")
    assert C.fleet is not None and "e9" not in C.fleet.engines
