"""Eviction through the decision core's table (`rvguard.enforce.relief`): running → evicted → done."""

from __future__ import annotations

import pytest

from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError
from rvguard.events import Dispatch, Evict, Fail, Proposal
from rvguard.lifecycle import Stage

from ._harness import check_wf, make_contract


def _core() -> tuple[DecisionCore, list[object]]:
    core = DecisionCore(make_contract(floor=1, slots=2))
    trace: list[object] = []
    for rid, tenant in (("a", "assured"), ("o1", "opp"), ("o2", "opp")):
        trace += core.arrive(Request(rid, tenant, 0.0), Proposal(), 0.0)
    return core, trace


def test_an_evicted_request_keeps_its_slot_until_it_ends_then_the_next_is_dispatched() -> None:
    core, trace = _core()
    assert core.in_flight == 2 and core.queue_depth == 1  # a and o1 run, o2 waits
    out = core.evict("o1", 1.0, 40, "emergency", resource="kv_cache", headroom=0.05, target=0.3, capacity=100)
    assert out == [Evict(1.0, "o1", 40, "emergency", "kv_cache", 0.05, 0.3, 100)]
    assert core._live["o1"].state is Stage.EVICTED  # the core's record says what the trace says
    assert core.in_flight == 2 and core.queue_depth == 1  # nothing dispatched into its slot yet
    core._check()
    end = core.cancel("o1", 1.0, "preempted")
    assert end[0] == Fail(1.0, "o1", "preempted") and Dispatch(1.0, "o2") in end
    assert not core.is_live("o1") and core.in_flight == 2
    core._check()
    stats = core.statistics()
    assert (stats.evicted, stats.failed, stats.dispatched) == (1, 1, 3)
    assert check_wf([*trace, *out, *end]) == []


@pytest.mark.parametrize(
    ("rid", "why"),
    [("a", "floor work"), ("o2", "not running"), ("nobody", "not running")],
)
def test_floor_work_and_what_is_not_running_are_never_evicted(rid: str, why: str) -> None:
    core, _ = _core()
    before = core.statistics()
    with pytest.raises(EnforcementError, match=why) as err:
        core.evict(rid, 1.0, 10, "emergency")
    assert err.value.status_hint == 409
    assert core.statistics() == before  # state unchanged on a refusal
    core._check()


def test_an_evicted_request_can_only_end() -> None:
    core, _ = _core()
    core.evict("o1", 1.0, 40, "voluntary")
    with pytest.raises(EnforcementError, match="not running"):
        core.evict("o1", 1.0, 40, "voluntary")  # no second eviction
    with pytest.raises(EnforcementError, match="not in flight"):
        core.finish("o1", 1.0)  # its dispatch's late answer does not complete it
    assert core.running_basis("o1") is not None  # still preemptible: its stop ends it
