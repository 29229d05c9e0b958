"""Rationed relief in the decision core (issue 24): restores as the headroom allows, the held first,
and a request held past the hold bound answered ``fail(hold-bound)``; RL, PR and WF hold on the trace."""

from __future__ import annotations

from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.rationing import ReliefConfig
from rvguard.enforce.redline import HeadroomSample, redline_config
from rvguard.enforce.request import Request
from rvguard.events import HOLD_BOUND, Demote, Dispatch, Event, Fail, Proposal, Restore
from rvguard.monitors import Monitor
from rvguard.runbook_spec import HeadroomSpec, ResourceSpec

from ._harness import make_contract

PROMPT, CAP = 100, 48  # each request holds at most 148 tokens
CAPACITY = 1000


def _contract() -> Contract:
    block = HeadroomSpec(
        alpha=1.0,
        staleness=10.0,
        resources={"kv_cache": ResourceSpec(h_min=0.2, margin=0.1, hard_floor=0.05)},
    )
    return make_contract(slots=6, floor=2, deadline=100.0, output_cap=CAP).model_copy(
        update={"headroom": block}
    )


class _Run:
    def __init__(self, *, rationed: bool, hold_bound: float = 30.0) -> None:
        self.contract = _contract()
        assert self.contract.headroom is not None
        self.core = DecisionCore(self.contract, redline=redline_config(self.contract.headroom))
        if rationed:
            self.core.ration(ReliefConfig(CAPACITY, hold_bound=hold_bound))
        self.trace: list[Event] = []

    def take(self, events: list[Event]) -> list[Event]:
        self.core._check()
        self.trace += events
        return events

    def arrive(self, rid: str, now: float, tenant: str = "opp") -> list[Event]:
        request = Request(rid, tenant, now, None, PROMPT, CAP)
        return self.take(self.core.arrive(request, Proposal(admit=True), now))

    def sample(self, value: float, now: float, growth: int | None = None) -> list[Event]:
        return self.take(self.core.observe(HeadroomSample("kv_cache", value, now), now, growth=growth))

    def violations(self) -> list[str]:
        mon = Monitor(self.contract, ("PR", "RL", "WF"))
        for ev in self.trace:
            mon.feed(ev)
        return [f"{v.property} {v.rid}" for v in mon.violations()]


def _held(run: _Run, n: int) -> None:
    """``n`` surplus requests held by a firing redline (nothing running)."""
    run.sample(0.1, 1.0)  # fires
    for i in range(n):
        assert any(isinstance(e, Demote) for e in run.arrive(f"o{i}", 1.0))
    assert run.core.held == n


def _rids(events: list[Event], kind: type) -> list[str]:
    return [e.rid for e in events if isinstance(e, kind)]


def test_unrationed_the_clear_redline_restores_every_held_request_at_once() -> None:
    run = _Run(rationed=False)
    _held(run, 4)
    out = run.sample(0.5, 2.0)
    assert _rids(out, Restore) == ["o0", "o1", "o2", "o3"] and run.core.held == 0
    assert run.violations() == []


def test_rationed_it_restores_only_what_fits_above_h_min_then_the_held_before_newcomers() -> None:
    run = _Run(rationed=True)
    _held(run, 4)
    # room (0.5 − 0.2)·1000 = 300 tokens: two requests of 148 fit, a third would not
    out = run.sample(0.5, 2.0, growth=0)
    assert _rids(out, Restore) == ["o0", "o1"] and _rids(out, Dispatch) == ["o0", "o1"]
    assert run.core.held == 2
    # a newcomer waits behind the held: surplus running is at what the allowance granted
    assert _rids(run.arrive("new", 2.5), Dispatch) == []
    # a slot the allowance granted comes free: it goes to the first held request, not the newcomer
    out = run.take(run.core.finish("o0", 3.0))
    assert _rids(out, Restore) == ["o2"] and _rids(out, Dispatch) == ["o2"]
    assert next(e for e in out if isinstance(e, Restore)).sample_time == 2.0  # the last fresh sample
    assert run.violations() == []


def test_rationed_the_growth_still_to_come_is_room_already_taken() -> None:
    run = _Run(rationed=True)
    _held(run, 4)
    out = run.sample(0.5, 2.0, growth=160)  # 300 − 160 = 140 tokens: not even one request
    assert _rids(out, Restore) == [] and run.core.held == 4
    out = run.sample(0.9, 3.0, growth=0)  # 700 tokens: all four (592)
    assert _rids(out, Restore) == ["o0", "o1", "o2", "o3"]
    assert run.violations() == []


def test_a_request_held_past_the_hold_bound_is_answered_and_floor_work_never_is() -> None:
    run = _Run(rationed=True, hold_bound=5.0)
    run.sample(0.1, 1.0)
    run.arrive("a", 1.0, tenant="assured")  # floor work runs whatever the redline says
    run.arrive("o0", 1.0)
    run.arrive("o1", 3.0)
    assert run.core.held == 2
    assert run.take(run.core.expire_held(5.9)) == []
    out = run.take(run.core.expire_held(6.0))
    assert out == [Fail(6.0, "o0", HOLD_BOUND, {"held_since": 1.0})]
    out = run.take(run.core.expire_held(8.0))
    assert _rids(out, Fail) == ["o1"] and run.core.held == 0
    assert run.core.is_live("a")
    assert run.violations() == []


def test_unrationed_nothing_is_answered_at_a_hold_bound() -> None:
    run = _Run(rationed=False)
    _held(run, 2)
    assert run.core.expire_held(1000.0) == [] and run.core.held == 2


def test_a_request_held_before_rationing_began_is_bounded_from_the_first_look() -> None:
    run = _Run(rationed=False)
    _held(run, 1)
    run.core.ration(ReliefConfig(CAPACITY, hold_bound=5.0))
    assert run.take(run.core.expire_held(3.0)) == []  # its bound starts here, not at its demote
    assert run.take(run.core.expire_held(7.9)) == []
    out = run.take(run.core.expire_held(8.0))
    assert out == [Fail(8.0, "o0", HOLD_BOUND, {"held_since": 3.0})]
    assert run.violations() == []


def test_surplus_queued_behind_the_held_dispatches_when_the_last_held_expires() -> None:
    """The live redline test's wedge (CI, 2026-12-06): held requests too large for the room above
    h_min are never restored; surplus that came after them queues behind them; when the hold bound
    ends the last held one, the queued surplus must go then, with the slots free and the redline
    clear, not at the next arrival or completion (there was none: its clients were waiting on it)."""
    run = _Run(rationed=True, hold_bound=5.0)
    _held(run, 2)
    out = run.sample(0.31, 2.0, growth=0)  # clear (above h_min + margin 0.3), room 110 < 148: none
    assert _rids(out, Restore) == [] and run.core.held == 2
    assert _rids(run.arrive("late", 3.0), Dispatch) == []  # queued behind the held
    out = run.take(run.core.expire_held(6.0))
    assert _rids(out, Fail) == ["o0", "o1"]
    assert _rids(out, Dispatch) == ["late"]  # mutation: without the fill it stays queued for ever
    assert run.violations() == []
