"""Baselines: unguarded FIFO obeys the learner; the GAIE flow controller orders by mapped band."""

from __future__ import annotations

import pytest

from rvguard.enforce.request import Request
from rvguard.events import Admit, Dispatch, Proposal, Reject
from rvguard.sim.baselines import FifoBaseline, FlowController, RateLimiter
from rvguard.sim.run import run_once

from ._common import MARQUEE, marquee_arrivals


def _req(i: int, tenant: str, t: float = 0.0) -> Request:
    return Request(f"r{i}", tenant, t, max_tokens=16)


def test_unguarded_rejects_entitled_when_learner_says_so() -> None:
    b = FifoBaseline(MARQUEE)
    ev = b.arrive(_req(0, "assured"), Proposal(admit=False), 0.0)
    assert isinstance(ev[1], Reject)
    out = run_once(MARQUEE, marquee_arrivals(0, duration=3.0), mode="unguarded", learner="reject-all")
    assert any(v.property == "AF" for v in out.violations)  # the floor is not enforced


def test_fifo_dispatch_order_and_slot_limit() -> None:
    b = FifoBaseline(MARQUEE)
    dispatched = []
    for i in range(6):
        tenant = "opportunistic" if i < 5 else "assured"
        dispatched += [e.rid for e in b.arrive(_req(i, tenant), Proposal(), 0.0) if isinstance(e, Dispatch)]
    assert dispatched == ["r0", "r1", "r2", "r3"]
    assert b.in_flight == 4 and b.queue_depth == 2
    nxt = [e.rid for e in b.finish("r0", 1.0) if isinstance(e, Dispatch)]
    assert nxt == ["r4"]  # arrival order, not tier
    with pytest.raises(ValueError, match="not in flight"):
        b.finish("r0", 1.0)


@pytest.mark.parametrize(("swap", "first"), [(False, "r5"), (True, "r4")])
def test_flow_controller_bands(swap: bool, first: str) -> None:
    f = FlowController(MARQUEE, swap=swap)
    for i in range(5):
        f.arrive(_req(i, "opportunistic"), Proposal(), 0.0)
    ev = f.arrive(_req(5, "assured"), Proposal(), 0.0)
    assert isinstance(ev[1], Admit)
    nxt = [e.rid for e in f.finish("r0", 1.0) if isinstance(e, Dispatch)]
    assert nxt == [first]


def test_gaie_fault_hurts_assured() -> None:
    arrivals = marquee_arrivals(2)
    ok = run_once(MARQUEE, arrivals, mode="gaie", learner="admit-all").metrics.admitted_miss
    bad = run_once(MARQUEE, arrivals, mode="gaie-swapped", learner="admit-all").metrics.admitted_miss
    assert ok is not None and bad is not None and bad > ok + 0.3


def test_rate_limiter_per_class_and_flat() -> None:
    per_class = RateLimiter(MARQUEE, caps={"assured": 2, "opportunistic": 1})
    flat = RateLimiter(MARQUEE, flat=2)
    kinds = {"class": [], "flat": []}  # type: dict[str, list[str]]
    for i, tenant in enumerate(["opportunistic", "opportunistic", "assured", "assured", "assured"]):
        for name, lim in (("class", per_class), ("flat", flat)):
            kinds[name].append(type(lim.arrive(_req(i, tenant, 0.1 * i), Proposal(), 0.1 * i)[1]).__name__)
    assert kinds["class"] == ["Admit", "Reject", "Admit", "Admit", "Reject"]  # each class its own budget
    assert kinds["flat"] == ["Admit", "Admit", "Reject", "Reject", "Reject"]  # the flood crowds assured out
    # a new window refills the budget
    assert isinstance(flat.arrive(_req(9, "assured", 1.0), Proposal(), 1.0)[1], Admit)
    with pytest.raises(ValueError, match="exactly one"):
        RateLimiter(MARQUEE)
