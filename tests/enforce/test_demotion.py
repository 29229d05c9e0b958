"""The redline in the decision core: queued surplus demoted while it fires, restored when it clears."""

from __future__ import annotations

import pytest

from rvguard.enforce.core import DecisionCore
from rvguard.enforce.redline import HeadroomSample, RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError, TelemetryFormatError, TraceOrderError
from rvguard.events import Demote, Dispatch, Event, Fail, Proposal, Restore, Sample

from ._harness import make_contract

KV = ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05)
SEQS = ResourceLimit("seqs", h_min=0.3, margin=0.1)
CONFIG = RedlineConfig((KV, SEQS), alpha=1.0)  # α = 1: each sample is Ĥ, so tests read plainly


def _core(slots: int = 1, **kw: object) -> DecisionCore:
    core = DecisionCore(make_contract(slots=slots, floor=2, **kw), redline=CONFIG)  # type: ignore[arg-type]
    core._check()
    return core


def _arrive(core: DecisionCore, rid: str, tenant: str, now: float) -> list[Event]:
    out = core.arrive(Request(rid, tenant, now), Proposal(), now)
    core._check()
    return out


def _sample(
    core: DecisionCore, value: float, t: float, now: float, resource: str = "kv_cache"
) -> list[Event]:
    out = core.observe(HeadroomSample(resource, value, t), now)
    core._check()
    return out


def _kinds(events: list[Event]) -> list[tuple[str, str]]:
    return [(e.kind.value, e.rid) for e in events]


def test_a_fresh_sample_is_traced_and_a_stale_or_duplicate_one_is_not() -> None:
    core = _core()
    assert _sample(core, 0.9, 10.0, 10.5) == [Sample(10.5, "kv_cache", 0.9, 10.0)]
    assert _sample(core, 0.1, 10.0, 11.0) == []  # duplicate timestamp: nothing changes
    assert _sample(core, 0.1, 9.0, 11.0) == []  # stale
    assert core.redline is not None and not core.redline.firing


def test_while_it_fires_queued_surplus_is_held_and_floor_work_still_runs() -> None:
    core = _core(slots=1)
    _arrive(core, "a1", "assured", 0.0)  # runs
    _arrive(core, "o1", "opp", 0.0)
    _arrive(core, "o2", "opp", 0.0)
    out = _sample(core, 0.1, 1.0, 1.0)
    assert out[0] == Sample(1.0, "kv_cache", 0.1, 1.0)
    assert out[1:] == [Demote(1.0, "o1", "kv_cache", 1.0), Demote(1.0, "o2", "kv_cache", 1.0)]
    assert core.held == 2 and core.queue_depth == 0
    _arrive(core, "a2", "assured", 1.1)
    done = core.finish("a1", 1.2)  # the slot goes to floor work, not to the held surplus
    assert _kinds(done) == [("complete", "a1"), ("dispatch", "a2")]
    core._check()


def test_surplus_admitted_while_it_fires_is_demoted_before_any_dispatch() -> None:
    core = _core(slots=2)
    _sample(core, 0.1, 1.0, 1.0)
    out = _arrive(core, "o1", "opp", 1.5)
    assert _kinds(out) == [("arrive", "o1"), ("admit", "o1"), ("demote", "o1")]
    assert core.in_flight == 0  # a free slot, and still not dispatched


def test_clearing_restores_in_rank_order_and_dispatches() -> None:
    core = _core(slots=1)
    _arrive(core, "a1", "assured", 0.0)
    _arrive(core, "o1", "opp", 0.0)
    _arrive(core, "o2", "opp", 0.1)
    _sample(core, 0.1, 1.0, 1.0)
    core.finish("a1", 1.1)
    assert _sample(core, 0.25, 2.0, 2.0)[1:] == []  # above h_min, below h_min + margin: still firing
    out = _sample(core, 0.5, 3.0, 3.0)
    assert out[1:] == [
        Restore(3.0, "o1", "kv_cache", 3.0),
        Restore(3.0, "o2", "kv_cache", 3.0),
        Dispatch(3.0, "o1"),
    ]
    assert core.held == 0 and core.queue_depth == 1
    stats = core.statistics()
    assert (stats.demoted, stats.restored, stats.held) == (2, 2, 0)


def test_the_deciding_resource_and_its_own_sample_time_are_named() -> None:
    core = _core(slots=1)
    _arrive(core, "a1", "assured", 0.0)
    _sample(core, 0.9, 1.0, 1.0)  # kv fine
    _arrive(core, "o1", "opp", 1.5)
    out = _sample(core, 0.1, 2.0, 2.5, resource="seqs")  # seqs below its 0.3
    assert out[1:] == [Demote(2.5, "o1", "seqs", 2.0)]


def test_running_surplus_is_never_touched_and_nothing_is_evicted() -> None:
    core = _core(slots=2)
    _arrive(core, "o1", "opp", 0.0)  # running
    out = _sample(core, 0.0, 1.0, 1.0)
    assert _kinds(out) == [("sample", "")]
    assert core.in_flight == 1 and core.running_basis("o1") is not None
    crossing = core.hard_floor_crossed()
    assert crossing is not None and crossing.resource == "kv_cache"  # the runtime's cue to preempt


def test_a_held_request_can_be_cancelled_and_is_failed_at_shutdown() -> None:
    core = _core(slots=1)
    _arrive(core, "a1", "assured", 0.0)
    _arrive(core, "o1", "opp", 0.0)
    _arrive(core, "o2", "opp", 0.0)
    _sample(core, 0.1, 1.0, 1.0)
    assert core.cancel("o1", 1.5) == [Fail(1.5, "o1", "cancelled")]
    core._check()
    assert core.fail_queued(2.0) == [Fail(2.0, "o2", "shutdown")]
    core._check()
    assert core.held == 0


def test_misuse_is_refused_and_changes_nothing() -> None:
    with pytest.raises(EnforcementError, match="no redline"):
        DecisionCore(make_contract()).observe(HeadroomSample("kv_cache", 0.5, 0.0), 0.0)
    core = _core()
    _sample(core, 0.9, 5.0, 5.0)
    with pytest.raises(TelemetryFormatError):
        core.observe(HeadroomSample("gpu", 0.1, 6.0), 6.0)
    with pytest.raises(TraceOrderError):
        core.observe(HeadroomSample("kv_cache", 0.1, 6.0), 4.0)
    assert core.redline is not None and not core.redline.firing
    assert _sample(core, 0.1, 6.0, 6.0)[0] == Sample(6.0, "kv_cache", 0.1, 6.0)  # the same sample, now fine


def test_no_demotion_cites_a_sample_older_than_staleness_and_surplus_waits_meanwhile() -> None:
    core = DecisionCore(make_contract(slots=2, floor=2), redline=CONFIG, staleness=5.0)
    _sample(core, 0.1, 1.0, 1.0)  # fires
    stale = _arrive(core, "o1", "opp", 7.0)  # the last sample is 6 s old: no demotion may cite it
    assert _kinds(stale) == [("arrive", "o1"), ("admit", "o1")]
    assert core.in_flight == 0 and core.held == 0  # and it is not dispatched either: the redline fires
    assert _kinds(_arrive(core, "a1", "assured", 7.0))[-1] == ("dispatch", "a1")  # floor work flows
    out = _sample(core, 0.1, 8.0, 8.0)  # a fresh sample, still firing: now it is demoted
    assert out[1:] == [Demote(8.0, "o1", "kv_cache", 8.0)]
    out = _sample(core, 0.9, 9.0, 9.0)
    assert _kinds(out)[1:] == [("restore", "o1"), ("dispatch", "o1")]


def test_an_entitled_request_admitted_as_excess_is_neither_demoted_nor_preemptible() -> None:
    from rvguard.enforce.preemption import Preemption

    core = DecisionCore(make_contract(slots=1, floor=2, excess="demote"), redline=CONFIG)
    _arrive(core, "a0", "assured", 0.0)  # runs
    refused = Request("a1", "assured", 0.0, pool="pool-refused")  # entitled, but the shared pool said no
    out = core.arrive(refused, Proposal(), 0.0)
    assert [(e.kind.value, getattr(e, "basis", None)) for e in out][1][1].value == "demoted"
    assert core.protected("a1") and not core.protected("nobody")
    out = _sample(core, 0.1, 1.0, 1.0)
    assert _kinds(out) == [("sample", "")]  # fires, and a1 is not demoted
    core.finish("a0", 1.5)
    assert core.in_flight == 0  # it waits while the redline fires
    out = _sample(core, 0.9, 2.0, 2.0)
    assert _kinds(out)[1:] == [("dispatch", "a1")]
    with pytest.raises(EnforcementError, match="floor-entitled"):
        Preemption(core).notice("a1", 2.0)
