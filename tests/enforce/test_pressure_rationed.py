"""The Guard's headroom loop, rationed (issue 24): past the hard floor it preempts only the fewest
running surplus requests the floor needs (largest first, floor work never), and a request held while
fresh samples keep the redline firing is answered ``hold-bound`` once it has waited the bound."""

from __future__ import annotations

import asyncio

from rvguard.clock import ManualClock
from rvguard.enforce.dispatchers import MockDispatcher
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.headroom import CallableHeadroomSource
from rvguard.enforce.outcome import Outcome
from rvguard.enforce.pressure import HeadroomLoop
from rvguard.enforce.rationing import ReliefConfig
from rvguard.enforce.redline import HeadroomSample
from rvguard.enforce.request import Request
from rvguard.errors import TelemetryUnavailableError
from rvguard.events import HOLD_BOUND, Event, Fail

from ._harness import check_wf, make_contract
from .test_preemption import check_pr
from .test_pressure import CONFIG, Engine, _until


def _guard(engine: Engine, trace: list[Event], clock: ManualClock, slots: int) -> Guard:
    source = CallableHeadroomSource(lambda: {"kv_cache": engine.headroom}, clock)
    return Guard(
        make_contract(slots=slots),
        MockDispatcher(engine.serve),
        sinks=[trace.append],
        clock=clock,
        headroom=source,
        config=GuardConfig(redline=CONFIG, headroom_interval=3600.0),  # polled by hand
    )


async def test_past_the_hard_floor_only_the_fewest_largest_surplus_are_preempted() -> None:
    engine, trace, clock = Engine(), [], ManualClock()  # type: ignore[var-annotated]
    guard = _guard(engine, trace, clock, slots=4)
    assert guard.headroom is not None
    loop = guard.headroom
    loop.ration_with(ReliefConfig(capacity=1000))
    async with guard:
        calls = {
            rid: asyncio.ensure_future(guard.submit(Request(rid, tenant, 0.0, None, prompt, 16)))
            for rid, tenant, prompt in (
                ("a", "assured", 900),
                ("o1", "opp", 100),
                ("o2", "opp", 30),
                ("o3", "opp", 20),
            )
        }
        await _until(lambda: len(guard.running()) == 4, "all four to run")
        engine.headroom = 0.0  # 0.05 · 1000 = 50 tokens short of the hard floor
        clock.advance(1.0)
        await loop.poll()
        outcome = await asyncio.wait_for(calls["o1"], 1.0)
        assert (
            outcome.status == "preempted"
        )  # o1 (100 tokens) covers it alone; the assured a is never a candidate
        assert sorted(guard.running()) == ["a", "o2", "o3"] and loop.preempted == 1
        await loop.poll()  # no fresh sample since the stop: its relief is still in flight, nothing more
        assert sorted(guard.running()) == ["a", "o2", "o3"]
        for rid in ("a", "o2", "o3"):
            engine.done(rid)
            assert (await calls[rid]).status == "completed"
    check_pr(trace)
    check_wf(trace)


async def test_a_request_held_on_fresh_samples_is_answered_at_the_hold_bound() -> None:
    engine, trace, clock = Engine(), [], ManualClock()  # type: ignore[var-annotated]
    guard = _guard(engine, trace, clock, slots=2)
    assert guard.headroom is not None
    loop = guard.headroom
    loop.ration_with(ReliefConfig(capacity=1000, hold_bound=5.0))
    async with guard:
        engine.headroom = 0.1  # below h_min, above the hard floor: held, nothing preempted
        await loop.poll()
        held = asyncio.ensure_future(guard.submit(Request("o", "opp", 0.0)))
        await _until(lambda: guard.core.held == 1, "o held")
        clock.advance(4.0)
        await loop.poll()  # a fresh sample: the stale-hold limit never applies
        assert not held.done() and guard.core.held == 1
        clock.advance(1.0)
        await loop.poll()
        outcome = await asyncio.wait_for(held, 1.0)
    assert (outcome.status, outcome.reason) == ("failed", HOLD_BOUND)
    [fail] = [e for e in trace if isinstance(e, Fail)]
    assert fail.extra == {"held_since": 0.0} and loop.bounded == 1 and loop.expired == 0
    check_pr(trace)
    check_wf(trace)


class _Scrape:
    """A headroom source whose reads can hang (a slow scrape) or fail (telemetry down)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock, self.headroom, self.mode = clock, 0.1, "answer"
        self.hung = asyncio.Event()  # never set: a hung read waits until cancelled

    async def read(self) -> list[HeadroomSample]:
        if self.mode == "hang":
            await self.hung.wait()
        if self.mode == "fail":
            raise TelemetryUnavailableError("down", source="<test>")
        t = self.clock.now()
        return [HeadroomSample("kv_cache", self.headroom, t)]


async def _held_then(mode: str) -> tuple[Outcome, list[Event], HeadroomLoop]:
    """A request held on fresh samples; then the source's reads ``mode`` ("hang" or "fail") while the
    clock passes the hold bound (1 s; the stale-hold limit, 30 s, never applies)."""
    engine, trace, clock = Engine(), [], ManualClock()  # type: ignore[var-annotated]
    source = _Scrape(clock)
    guard = Guard(
        make_contract(slots=2),
        MockDispatcher(engine.serve),
        sinks=[trace.append],
        clock=clock,
        headroom=source,
        config=GuardConfig(redline=CONFIG, headroom_interval=0.01),  # the loop polls by itself
    )
    loop = guard.headroom
    assert loop is not None
    loop.ration_with(ReliefConfig(capacity=1000, hold_bound=1.0))
    async with guard:
        await _until(lambda: guard.core.redline is not None and guard.core.redline.firing, "firing")
        held = asyncio.ensure_future(guard.submit(Request("o", "opp", clock.now())))
        await _until(lambda: guard.core.held == 1, "o held")
        source.mode = mode
        await asyncio.sleep(0.05)  # the loop is in (or between) reads of the new mode
        clock.advance(1.5)
        outcome = await asyncio.wait_for(held, 2.0)  # a few real polls of 0.01 s
    return outcome, trace, loop


async def test_a_slow_scrape_does_not_delay_the_hold_bound_answer() -> None:
    """Before: the loop checked the bound once per poll, after its read, so a held request waited for
    the scrape too (2.03-2.12 s at a 2 s bound, 0.05 s interval, against vLLM's /metrics answering in
    ~0.07 s; a hung scrape: until its time-out)."""
    outcome, trace, loop = await _held_then("hang")
    assert (outcome.status, outcome.reason) == ("failed", HOLD_BOUND) and loop.bounded == 1
    check_pr(trace)
    check_wf(trace)


async def test_a_failing_scrape_does_not_suspend_the_hold_bound() -> None:
    """Before: a poll whose read failed returned before answering the held (only the stale-hold
    limit, 30 s here, would have ended it)."""
    outcome, trace, loop = await _held_then("fail")
    assert (outcome.status, outcome.reason) == ("failed", HOLD_BOUND) and loop.bounded == 1
    assert loop.errors >= 1 and loop.expired == 0
    check_pr(trace)
    check_wf(trace)
