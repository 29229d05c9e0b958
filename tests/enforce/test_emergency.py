"""The emergency eviction channel in the Guard: past the hard floor the planner picks the few running
surplus requests to evict (S descending, credited headroom, k, the link bucket), each traced as
``evict`` before it is stopped ``preempted``; floor work never; the deadline warning counted.

EV is checked here by an independent brute force (`check_ev`), not by the monitor."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from dataclasses import replace

import pytest

from rvguard.clock import ManualClock
from rvguard.enforce.dispatchers import MockDispatcher
from rvguard.enforce.emergency import EMERGENCY, node_deadline
from rvguard.enforce.eviction import EvictionConfig
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.headroom import CallableHeadroomSource
from rvguard.enforce.redline import RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError
from rvguard.events import Admit, Event, Evict, Fail, Relocate

from ._harness import check_af, check_wf, make_contract
from .test_preemption import check_pr
from .test_pressure import Engine, _until

CONFIG = RedlineConfig((ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0)


def check_ev(trace: Sequence[Event], k: int) -> list[str]:
    """EV by brute force: an eviction is in flight from its ``evict`` to the request's next
    ``relocate`` or ``fail``; never more than k at once; only a request admitted surplus/demoted."""
    bad, flight, basis = [], set(), {}
    for ev in trace:
        if isinstance(ev, Admit):
            basis[ev.rid] = ev.basis.value
        elif isinstance(ev, Evict):
            flight.add(ev.rid)
            if len(flight) > k:
                bad.append(f"{ev.rid}: {len(flight)} evictions in flight > k = {k}")
            if basis.get(ev.rid) not in ("surplus", "demoted"):
                bad.append(f"{ev.rid}: evicted, admitted as {basis.get(ev.rid)}")
        elif isinstance(ev, Relocate | Fail):
            flight.discard(ev.rid)
    return bad


def _guard(
    engine: Engine, trace: list[Event], clock: ManualClock, config: EvictionConfig, **kw: object
) -> Guard:
    source = CallableHeadroomSource(lambda: {"kv_cache": engine.headroom}, clock)
    return Guard(
        make_contract(slots=4, floor=1),
        MockDispatcher(engine.serve),
        sinks=[trace.append],
        clock=clock,
        headroom=source,
        config=replace(GuardConfig(redline=CONFIG, headroom_interval=0.005, eviction=config), **kw),  # type: ignore[arg-type]
    )


def _evicts(trace: Sequence[Event]) -> list[tuple[str, int, str]]:
    return [(e.rid, e.state, e.reason) for e in trace if isinstance(e, Evict)]


async def test_the_largest_state_goes_first_and_no_redundant_eviction_while_relief_is_credited() -> None:
    engine, trace, clock = Engine(), [], ManualClock()
    config = EvictionConfig(k=2, capacity=100, target=0.4)
    async with _guard(engine, trace, clock, config, retry_after=2.0) as guard:
        a = asyncio.ensure_future(guard.submit(Request("a", "assured", 0.0, prompt_tokens=90)))
        subs = {
            rid: asyncio.ensure_future(guard.submit(Request(rid, "opp", 0.0, prompt_tokens=p)))
            for rid, p in (("x", 40), ("y", 10), ("z", 20))
        }
        await _until(lambda: len(guard.running()) == 4, "all running")
        loop = guard.headroom
        assert loop is not None and loop.emergency is not None
        loop.emergency.progress("y", 50)  # y: S = 60, the largest surplus state; a (90) is floor work
        engine.headroom = 0.01  # gap to the target: (0.4 − 0.01)·100 = 39 tokens: y alone covers it
        clock.advance(1.0)
        out = await asyncio.wait_for(subs["y"], 5.0)
        assert (out.status, out.reason, out.retry_after) == ("preempted", "preempted", 2.0)
        for _ in range(20):  # polls on the same sample: y's relief is credited, nothing more goes
            await loop.poll()
        assert _evicts(trace) == [("y", 60, EMERGENCY)]
        assert [e.rid for e in loop.emergency.planner.in_flight] == ["y"]
        engine.headroom = 0.04  # a fresh sample after y's stop, still low: y has landed, and the
        clock.advance(1.0)  # gap, 36 tokens, takes x (40) alone
        out = await asyncio.wait_for(subs["x"], 5.0)
        assert out.status == "preempted"
        assert _evicts(trace) == [("y", 60, EMERGENCY), ("x", 40, EMERGENCY)]
        engine.headroom = 0.9
        clock.advance(1.0)
        await loop.poll()
        assert loop.emergency.planner.in_flight == ()
        for rid in ("a", "z"):
            engine.done(rid)
        assert (await a).status == "completed" and (await subs["z"]).status == "completed"
    y = [e.kind.value for e in trace if e.rid == "y"]
    assert y[-2:] == ["evict", "fail"]  # written before it was stopped
    decided = [(e.resource, e.headroom, e.target, e.capacity) for e in trace if isinstance(e, Evict)]
    assert decided == [("kv_cache", 0.01, 0.4, 100), ("kv_cache", 0.04, 0.4, 100)]  # for EV's credit rule
    requests = [e for e in trace if e.rid]
    assert check_ev(requests, 2) == [] and check_pr(requests) == [] and check_wf(requests) == []
    assert check_af(guard.contract, requests) == []
    assert loop.emergency.evicted == 2 and loop.preempted == 0
    # the trace and the core's own record agree: every evict went through the core's table
    stats = guard.core.statistics()
    assert stats.evicted == len(_evicts(trace)) == 2
    preempted = [e for e in trace if e.kind.value == "fail" and e.reason == "preempted"]
    assert guard.preemption.stopped == len(preempted)


async def test_at_most_k_in_flight_even_when_the_target_needs_more() -> None:
    engine, trace, clock = Engine(), [], ManualClock()
    config = EvictionConfig(k=1, capacity=100, target=0.9)
    async with _guard(engine, trace, clock, config) as guard:
        subs = [
            asyncio.ensure_future(guard.submit(Request(f"o{i}", "opp", 0.0, prompt_tokens=10 + i)))
            for i in range(3)
        ]
        await _until(lambda: len(guard.running()) == 3, "all running")
        engine.headroom = 0.0
        clock.advance(1.0)
        await _until(lambda: len(_evicts(trace)) == 1, "one eviction")
        loop = guard.headroom
        assert loop is not None and loop.emergency is not None
        for _ in range(10):
            await loop.poll()
        assert _evicts(trace) == [("o2", 12, EMERGENCY)]  # k = 1: the next waits for a fresh sample
        assert loop.emergency.warnings >= 1  # 33 tokens cannot reach 90: the plan says so
        clock.advance(1.0)
        await _until(lambda: len(_evicts(trace)) == 2, "the second after the first landed")
        for rid in ("o0", "o1", "o2"):
            engine.done(rid)
        await asyncio.gather(*subs)
    assert check_ev([e for e in trace if e.rid], 1) == []


async def test_floor_work_is_never_evicted_and_the_shortfall_is_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine, trace, clock = Engine(), [], ManualClock()
    config = EvictionConfig(k=4, capacity=100, target=0.5)
    async with _guard(engine, trace, clock, config) as guard:
        a = asyncio.ensure_future(guard.submit(Request("a", "assured", 0.0, prompt_tokens=80)))
        await _until(lambda: guard.running() == ["a"], "a running")
        engine.headroom = 0.0
        with caplog.at_level(logging.WARNING, logger="rvguard.enforce"):
            clock.advance(1.0)
            loop = guard.headroom
            assert loop is not None and loop.emergency is not None
            await _until(lambda: loop.emergency.warnings >= 1, "the warning")  # type: ignore[union-attr]
        assert "cannot relieve the node in time" in caplog.text
        assert "cannot bring credited headroom to the target" in loop.emergency.last_warning
        engine.done("a")
        assert (await a).status == "completed"
    assert _evicts(trace) == []


async def test_a_late_relief_is_warned_against_the_trend_deadline() -> None:
    engine, trace, clock = Engine(), [], ManualClock()
    redline = RedlineConfig(
        (ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0, horizon=1.0
    )
    config = EvictionConfig(k=1, capacity=100, target=0.5, overhead=30.0)  # each eviction takes 30 s
    async with _guard(engine, trace, clock, config, redline=redline) as guard:
        subs = [
            asyncio.ensure_future(guard.submit(Request(f"o{i}", "opp", 0.0, prompt_tokens=30)))
            for i in range(3)
        ]
        await _until(lambda: len(guard.running()) == 3, "all running")
        engine.headroom = 0.3
        clock.advance(1.0)
        await asyncio.sleep(0.02)
        engine.headroom = 0.04  # falling 0.26 a second: zero headroom 0.15 s after this sample
        clock.advance(1.0)
        loop = guard.headroom
        assert loop is not None and loop.emergency is not None
        await _until(lambda: loop.emergency.warnings >= 1, "the warning")  # type: ignore[union-attr]
        assert "after the node's deadline" in loop.emergency.last_warning
        assert len(_evicts(trace)) == 1  # it still acts: the warning says the relief alone is late
        for i in range(3):
            engine.done(f"o{i}")
        await asyncio.gather(*subs)


def test_node_deadline_reads_the_trend() -> None:
    assert node_deadline(0.04, 0.04 - 0.26, 1.0, 2.0) == pytest.approx(2.0 + 0.04 / 0.26)
    assert math.isinf(node_deadline(0.04, 0.05, 1.0, 2.0))  # rising
    assert math.isinf(node_deadline(0.04, 0.0, 0.0, 2.0))  # no horizon: no slope to read


def test_an_eviction_channel_needs_a_headroom_source() -> None:
    with pytest.raises(EnforcementError, match="needs a headroom source"):
        Guard(
            make_contract(),
            MockDispatcher(Engine().serve),
            config=GuardConfig(eviction=EvictionConfig(1, 100, 0.5)),
        )


def test_the_contracts_block_states_the_channel_and_bounds_its_k() -> None:
    from rvguard.enforce.eviction import eviction_config
    from rvguard.enforce.headroom import CallableHeadroomSource as Source
    from rvguard.errors import SpecError
    from rvguard.runbook_spec import EvictionSpec

    spec = EvictionSpec(k=2, capacity=4096, target=0.3, overhead=0.5, link_rate=1e4, link_burst=2048)
    assert eviction_config(spec) == EvictionConfig(2, 4096, 0.3, 0.5, 1e4, 2048)
    assert eviction_config(EvictionSpec(k=2)) is None and eviction_config(None) is None
    with pytest.raises(ValueError, match="capacity and target come together"):
        EvictionSpec(k=2, capacity=4096)
    contract = make_contract().model_copy(update={"eviction": spec})
    clock = ManualClock()
    guard = Guard(
        contract,
        MockDispatcher(Engine().serve),
        headroom=Source(dict, clock),
        config=GuardConfig(redline=CONFIG),
    )
    assert guard.headroom is not None and guard.headroom.emergency is not None  # from the block
    assert guard.headroom.emergency.planner.config.capacity == 4096
    with pytest.raises(SpecError, match=r"k = 3 exceeds the contract's eviction.k = 2"):
        Guard(
            contract,
            MockDispatcher(Engine().serve),
            headroom=Source(dict, clock),
            config=GuardConfig(redline=CONFIG, eviction=EvictionConfig(3, 100, 0.5)),
        )
    for config, field in (
        (EvictionConfig(2, 4096, 0.5), "target"),
        (EvictionConfig(2, 8192, 0.3), "capacity"),
    ):
        with pytest.raises(SpecError, match=f"exceeds the contract's eviction.{field}") as info:
            Guard(
                contract,
                MockDispatcher(Engine().serve),
                headroom=Source(dict, clock),
                config=GuardConfig(redline=CONFIG, eviction=config),
            )
        assert info.value.field == f"eviction.{field}"
    Guard(  # a smaller target and capacity credit more and evict less: within what EV judges
        contract,
        MockDispatcher(Engine().serve),
        headroom=Source(dict, clock),
        config=GuardConfig(redline=CONFIG, eviction=EvictionConfig(2, 1024, 0.2)),
    )
