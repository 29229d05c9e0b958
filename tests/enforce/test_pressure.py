"""The Guard's headroom loop: samples traced, surplus demoted and restored, running surplus
preempted past the hard floor (floor work never), telemetry errors counted without stopping."""

from __future__ import annotations

import asyncio

import pytest

from rvguard.clock import ManualClock
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.headroom import CallableHeadroomSource
from rvguard.enforce.redline import HeadroomSample, RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError, TelemetryFormatError
from rvguard.events import Event

from ._harness import check_af, check_wf, make_contract
from .test_preemption import check_pr

CONFIG = RedlineConfig((ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0)


class Engine:
    """A backend whose requests finish when told, and a headroom gauge the test sets."""

    def __init__(self) -> None:
        self.headroom = 0.9
        self.release: dict[str, asyncio.Event] = {}

    async def serve(self, request: Request) -> Response:
        gate = self.release.setdefault(request.rid, asyncio.Event())
        await gate.wait()
        return Response(text="ok")

    def done(self, rid: str) -> None:
        self.release.setdefault(rid, asyncio.Event()).set()


async def _until(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(400):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def _kinds(trace: list[Event], rid: str) -> list[str]:
    return [e.kind.value for e in trace if e.rid == rid]


async def test_demote_while_it_fires_restore_when_it_clears() -> None:
    engine, trace, clock = Engine(), [], ManualClock()
    source = CallableHeadroomSource(lambda: {"kv_cache": engine.headroom}, clock)
    contract = make_contract(slots=1)
    async with Guard(
        contract,
        MockDispatcher(engine.serve),
        sinks=[trace.append],
        clock=clock,
        headroom=source,
        config=GuardConfig(redline=CONFIG, headroom_interval=0.01),
    ) as guard:
        a = asyncio.ensure_future(guard.submit(Request("a", "assured", 0.0)))
        await _until(lambda: "a" in guard.running(), "a to run")
        o = asyncio.ensure_future(guard.submit(Request("o", "opp", 0.0)))
        await _until(lambda: guard.core.queue_depth == 1, "o queued")
        engine.headroom = 0.1
        clock.advance(1.0)
        await _until(lambda: guard.core.held == 1, "o demoted")
        engine.done("a")
        assert (await a).status == "completed"
        await asyncio.sleep(0.05)
        assert "o" not in guard.running()  # a free slot, and the redline still holds it
        engine.headroom = 0.9
        clock.advance(1.0)
        await _until(lambda: "o" in guard.running(), "o restored and dispatched")
        engine.done("o")
        assert (await o).status == "completed"
    assert _kinds(trace, "o") == ["arrive", "admit", "demote", "restore", "dispatch", "complete"]
    samples = [e for e in trace if e.kind.value == "sample"]
    assert samples and len({e.sample_time for e in samples}) == len(samples)  # fresh ones only
    assert guard.headroom is not None and guard.headroom.samples >= len(samples)
    requests = [e for e in trace if e.rid]  # the harness's brute-force checkers read request events
    assert check_wf(requests) == [] and check_af(contract, requests) == []


async def test_past_the_hard_floor_running_surplus_is_preempted_and_floor_work_is_not() -> None:
    engine, trace, clock = Engine(), [], ManualClock()
    source = CallableHeadroomSource(lambda: {"kv_cache": engine.headroom}, clock)
    contract = make_contract(slots=2)
    async with Guard(
        contract,
        MockDispatcher(engine.serve),
        sinks=[trace.append],
        clock=clock,
        headroom=source,
        config=GuardConfig(redline=CONFIG, headroom_interval=0.01, retry_after=3.0),
    ) as guard:
        a = asyncio.ensure_future(guard.submit(Request("a", "assured", 0.0)))
        o = asyncio.ensure_future(guard.submit(Request("o", "opp", 0.0)))
        await _until(lambda: len(guard.running()) == 2, "both running")
        engine.headroom = 0.01
        clock.advance(1.0)
        out = await asyncio.wait_for(o, 5.0)
        assert (out.status, out.retry_after) == ("preempted", 3.0)
        assert "a" in guard.running()
        engine.done("a")
        assert (await a).status == "completed"
    assert guard.headroom is not None and guard.headroom.preempted == 1
    requests = [e for e in trace if e.rid]
    assert check_pr(requests) == [] and check_wf(requests) == []
    [stop] = [e for e in requests if e.rid == "o" and e.kind.value == "fail"]
    assert stop.extra == {"resource": "kv_cache"}  # the deciding resource, named on the record


async def test_a_telemetry_error_is_counted_and_the_loop_goes_on() -> None:
    answers = iter([{"kv_cache": 2.0}, {"kv_cache": 0.5}])
    clock = ManualClock()

    def read() -> dict[str, float]:
        clock.advance(1.0)
        return next(answers, {"kv_cache": 0.5})

    trace: list[Event] = []
    async with Guard(
        make_contract(),
        MockDispatcher(Engine().serve),
        sinks=[trace.append],
        clock=clock,
        headroom=CallableHeadroomSource(read, clock),
        config=GuardConfig(redline=CONFIG, headroom_interval=0.01),
    ) as guard:
        await _until(lambda: any(e.kind.value == "sample" for e in trace), "a good sample")
    loop = guard.headroom
    assert loop is not None and loop.errors >= 1 and isinstance(loop.last_error, TelemetryFormatError)


class _Flaky:
    """A source of the embedder's own that raises what it likes, once, then reads a low headroom."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.calls = 0

    async def read(self) -> list[HeadroomSample]:
        self.calls += 1
        self.clock.advance(1.0)
        if self.calls == 1:
            raise RuntimeError("the exporter's client broke")
        return [HeadroomSample("kv_cache", 0.1, self.clock.now())]


async def test_any_exception_from_a_poll_is_counted_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A source raising something other than a TelemetryError used to end the loop's task quietly:
    the redline then stayed on its last reading until the Guard closed."""
    clock = ManualClock()
    trace: list[Event] = []
    async with Guard(
        make_contract(),
        MockDispatcher(Engine().serve),
        sinks=[trace.append],
        clock=clock,
        headroom=_Flaky(clock),
        config=GuardConfig(redline=CONFIG, headroom_interval=0.01),
    ) as guard:
        await _until(lambda: any(e.kind.value == "sample" for e in trace), "a sample after the failure")
    loop = guard.headroom
    assert loop is not None and loop.errors == 1 and isinstance(loop.last_error, RuntimeError)
    assert any("the exporter's client broke" in r.getMessage() for r in caplog.records)


def test_a_source_without_a_redline_is_refused() -> None:
    with pytest.raises(EnforcementError, match="needs a redline"):
        Guard(
            make_contract(),
            MockDispatcher(Engine().serve),
            headroom=CallableHeadroomSource(dict, ManualClock()),
        )
