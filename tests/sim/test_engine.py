"""The event core: determinism under a seed, and traces every monitor accepts as well-formed."""

from __future__ import annotations

import random

import pytest

from rvguard.events import Dispatch, EventKind
from rvguard.sim.run import MODES, run_once

from ._common import MARQUEE, marquee_arrivals


@pytest.mark.parametrize("mode", MODES)
def test_same_seed_same_trace(mode: str) -> None:
    arrivals = marquee_arrivals(3)
    a = run_once(MARQUEE, arrivals, mode=mode, learner="random", seed=11).result.events
    b = run_once(MARQUEE, marquee_arrivals(3), mode=mode, learner="random", seed=11).result.events
    assert a == b
    assert [e.extra for e in a] == [e.extra for e in b]


def test_different_seed_different_trace() -> None:
    arrivals = marquee_arrivals(3)
    a = run_once(MARQUEE, arrivals, learner="random", seed=1).result.events
    b = run_once(MARQUEE, arrivals, learner="random", seed=2).result.events
    assert a != b


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("learner", ["admit-all", "reject-all", "random", "lsq", "lsq-agnostic"])
def test_every_trace_is_well_formed(mode: str, learner: str) -> None:
    out = run_once(MARQUEE, marquee_arrivals(5, duration=4.0), mode=mode, learner=learner, seed=7)
    assert not [v for v in out.violations if v.property == "WF"]
    times = [e.t for e in out.result.events]
    assert times == sorted(times)
    arrived = sum(1 for e in out.result.events if e.kind is EventKind.ARRIVE)
    assert arrived == out.result.requests


@pytest.mark.parametrize("learner", ["admit-all", "reject-all", "random", "lsq", "lsq-agnostic"])
def test_guarded_runs_pass_af_and_dr(learner: str) -> None:
    for seed in range(3):
        out = run_once(MARQUEE, marquee_arrivals(seed), mode="guarded", learner=learner, seed=seed)
        assert not [v for v in out.violations if v.property in ("AF", "DR", "WF")]


def test_never_more_than_c_in_flight() -> None:
    out = run_once(MARQUEE, marquee_arrivals(1), mode="unguarded", learner="admit-all", seed=0)
    running = 0
    for ev in out.result.events:
        if isinstance(ev, Dispatch):
            running += 1
        elif ev.kind in (EventKind.COMPLETE, EventKind.FAIL):
            running -= 1
        assert running <= MARQUEE.slots
    assert running == 0  # drained


class _Raising:
    """A learner that always raises: the guard must still serve the floor, and the run must not stop."""

    def propose(self, request: object, view: object) -> object:
        raise ValueError("model file missing")


def test_a_raising_learner_rejects_only_the_surplus() -> None:
    from rvguard.enforce.core import DecisionCore
    from rvguard.monitors import Monitor
    from rvguard.sim.backend import ExponentialService
    from rvguard.sim.engine import Simulator

    result = Simulator(
        DecisionCore(MARQUEE), _Raising(), ExponentialService(4.0), random.Random(0), slots=4
    ).run(marquee_arrivals(0))
    monitor = Monitor(MARQUEE, ("AF", "DR", "WF"))
    assert monitor.feed_all(result.events) == []
    rejects = {e.reason for e in result.events if e.kind is EventKind.REJECT}
    assert "learner-error: ValueError" in rejects
    assert any(e.kind is EventKind.ADMIT and e.basis.value == "floor" for e in result.events)
