"""The reserved buffer in the decision core: surplus work never holds more than C − R slots (RB).

The oracle is `_harness.check_rb`, a brute-force recount over every prefix of the
trace; it does not import the monitor or the core's counters. Beside RB, every driven
trace is checked for AF, DR and WF, and after every step for the reserve's other half:
the core never idles a slot it may fill (floor work waits only when all C slots are
busy; surplus work only when they are, or when C − R surplus requests run).
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rvguard.enforce.core import DecisionCore
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.learners import AdmitAll
from rvguard.enforce.request import Request
from rvguard.events import Admit, Basis, Dispatch, Event, Proposal

from ._harness import Arrival, check_af, check_dr, check_rb, check_wf, drive, make_contract

YES = Proposal()


def _dispatched(events: list[Event]) -> list[str]:
    return [e.rid for e in events if isinstance(e, Dispatch)]


def test_surplus_holds_at_most_c_minus_r_and_floor_takes_the_reserved_slot() -> None:
    core = DecisionCore(make_contract(slots=3, reserve=1, floor=4))
    started = [_dispatched(core.arrive(Request(f"o{i}", "opp", 0.0), YES, 0.0)) for i in range(3)]
    assert started == [["o0"], ["o1"], []]  # C − R = 2 surplus slots
    assert (core.surplus_in_flight, core.in_flight, core.queue_depth) == (2, 2, 1)
    assert _dispatched(core.arrive(Request("a0", "assured", 0.1), YES, 0.1)) == ["a0"]  # the reserve
    assert core.in_flight == 3
    assert _dispatched(core.finish("a0", 0.2)) == []  # a floor slot freed: surplus still at C − R
    assert _dispatched(core.finish("o0", 0.3)) == ["o2"]  # a surplus slot freed: the waiting one goes
    core._check()


@pytest.mark.parametrize("policy", ["priority", "fifo"])
def test_floor_work_passes_a_blocked_surplus_head(policy: str) -> None:
    """Under FIFO (and with a surplus tenant ranked first) the surplus head is older than the
    floor work behind it; the reserve must not let it block the floor."""
    contract = make_contract(slots=2, reserve=1, floor=4)
    core = DecisionCore(contract, dispatch_policy=policy)  # type: ignore[arg-type]
    core.arrive(Request("o0", "opp", 0.0), YES, 0.0)
    core.arrive(Request("a0", "assured", 0.0), YES, 0.0)  # both slots busy
    core.arrive(Request("o1", "opp", 0.1), YES, 0.1)  # waits: oldest in FIFO order
    core.arrive(Request("a1", "assured", 0.2), YES, 0.2)
    assert _dispatched(core.finish("a0", 0.3)) == ["a1"]  # o1 is blocked by the reserve, a1 passes
    assert _dispatched(core.finish("o0", 0.4)) == ["o1"]


def test_a_reserve_of_all_slots_keeps_surplus_off_the_backend() -> None:
    core = DecisionCore(make_contract(slots=2, reserve=2, floor=4))
    assert _dispatched(core.arrive(Request("o0", "opp", 0.0), YES, 0.0)) == []
    assert _dispatched(core.arrive(Request("a0", "assured", 0.0), YES, 0.0)) == ["a0"]
    assert (core.surplus_in_flight, core.queue_depth) == (0, 1)
    assert [e.kind.value for e in core.cancel("o0", 0.5)] == ["fail"]


def test_demoted_excess_counts_as_surplus() -> None:
    core = DecisionCore(make_contract(slots=2, reserve=1, floor=1, excess="demote"))
    events = core.arrive(Request("a0", "assured", 0.0), YES, 0.0)
    events += core.arrive(Request("a1", "assured", 0.0), YES, 0.0)  # beyond B = 1: demoted
    events += core.arrive(Request("a2", "assured", 0.0), YES, 0.0)  # demoted, and blocked by R
    bases = {e.rid: e.basis for e in events if isinstance(e, Admit)}
    assert bases == {"a0": Basis.FLOOR, "a1": Basis.DEMOTED, "a2": Basis.DEMOTED}
    assert _dispatched(events) == ["a0", "a1"]
    assert core.surplus_in_flight == 1


arrivals = st.lists(
    st.builds(
        Arrival,
        t=st.floats(0, 4).map(lambda x: round(x, 2)),
        tenant=st.sampled_from(["assured", "assured", "opp"]),
        service=st.sampled_from([0.05, 0.2, 0.5, 1.5]),
        proposal=st.builds(Proposal, st.booleans(), st.none(), st.none() | st.floats(-5, 5)),
        max_tokens=st.none() | st.integers(0, 60),
    ),
    max_size=40,
)


class _Occupancy:
    """Who waits and who runs, kept from the core's output alone (no core internals)."""

    def __init__(self, slots: int, reserve: int) -> None:
        self.slots, self.cap = slots, slots - reserve
        self.surplus: set[str] = set()
        self.waiting: set[str] = set()
        self.running: set[str] = set()

    def __call__(self, core: DecisionCore, events: list[Event]) -> None:
        for ev in events:
            if isinstance(ev, Admit):
                self.waiting.add(ev.rid)
                if ev.basis is not Basis.FLOOR:
                    self.surplus.add(ev.rid)
            elif isinstance(ev, Dispatch):
                self.waiting.discard(ev.rid)
                self.running.add(ev.rid)
            elif ev.kind.value in ("complete", "fail", "drop"):
                self.waiting.discard(ev.rid)
                self.running.discard(ev.rid)
        surplus_running = len(self.running & self.surplus)
        assert core.surplus_in_flight == surplus_running <= self.cap
        if len(self.running) < self.slots:  # a slot is free: nothing that may take it waits
            assert not self.waiting - self.surplus, "floor work waits beside a free slot"
            if surplus_running < self.cap:
                assert not self.waiting & self.surplus, "surplus waits below its share"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    arrivals,
    st.integers(1, 4),
    st.data(),
    st.sampled_from(["priority", "fifo"]),
    st.booleans(),
    st.sampled_from(["reject", "demote"]),
)
def test_any_arrivals_any_reserve_the_trace_keeps_rb_af_dr_wf(
    arrs: list[Arrival], slots: int, data: st.DataObject, policy: str, drop: bool, excess: str
) -> None:
    reserve = data.draw(st.integers(0, slots), label="reserve")
    contract = make_contract(slots=slots, reserve=reserve, floor=3, excess=excess, lower=0.1)
    core = DecisionCore(contract, dispatch_policy=policy, deferred_drop=drop)  # type: ignore[arg-type]
    occupancy = _Occupancy(slots, reserve)
    trace = drive(core, arrs, on_step=occupancy)
    assert check_rb(contract, trace) == []
    assert check_af(contract, trace) == []
    assert check_dr(contract, trace) == []
    assert check_wf(trace) == []


def test_the_oracle_sees_a_violation() -> None:
    """The brute-force oracle is not vacuous: a hand-made trace with C − R + 1 surplus running."""
    contract = make_contract(slots=2, reserve=1)
    trace = DecisionCore(make_contract(slots=2)).arrive(Request("o0", "opp", 0.0), YES, 0.0)
    trace += DecisionCore(make_contract(slots=2)).arrive(Request("o1", "opp", 0.0), YES, 0.0)
    assert len(check_rb(contract, trace)) == 1


async def test_the_guard_inherits_the_reserve() -> None:
    contract = make_contract(slots=2, reserve=1, floor=4)
    gate = asyncio.Event()

    async def slow(request: Request) -> Response:
        await gate.wait()
        return Response()

    trace: list[Event] = []
    async with Guard(contract, MockDispatcher(slow), learner=AdmitAll(), sinks=[trace.append]) as guard:
        opp = [asyncio.create_task(guard.submit(Request(f"o{i}", "opp", 0.0))) for i in range(3)]
        await asyncio.sleep(0.01)
        assured = asyncio.create_task(guard.submit(Request("a", "assured", 0.0)))
        await asyncio.sleep(0.01)
        assert (guard.core.in_flight, guard.core.surplus_in_flight) == (2, 1)
        gate.set()
        outs = await asyncio.gather(*opp, assured)
    assert [o.status for o in outs] == ["completed"] * 4
    assert check_rb(contract, trace) == []
