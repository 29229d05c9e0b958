"""A blocking ``async def propose`` cannot stall the Guard, and a stalled loop shows in the trace.

Before: a coroutine learner ran on the Guard's loop, so one that called ``time.sleep`` (or a
synchronous HTTP client) held every request: an assured request took 1.87 s (deadline 1.5 s)
while its trace said 0.027 s, and nothing in the trace showed why.
"""

from __future__ import annotations

import asyncio
import time

from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.learners import LoadView
from rvguard.enforce.request import Request
from rvguard.events import Event, Proposal, Stall, event_from_dict, event_to_dict
from rvguard.monitors import Monitor

from ._harness import make_contract


class _BlockingCoroutine:
    """An async learner that blocks its loop (a sync HTTP client, ``time.sleep``)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.asked = 0

    async def propose(self, request: Request, view: LoadView) -> Proposal:
        self.asked += 1
        time.sleep(self.seconds)
        return Proposal(admit=True)


async def ok(request: Request) -> Response:
    await asyncio.sleep(0.01)
    return Response(output_tokens=1)


async def test_a_blocking_async_learner_does_not_delay_an_assured_request() -> None:
    contract = make_contract(floor=1)
    trace: list[Event] = []
    learner = _BlockingCoroutine(1.0)
    guard = Guard(
        contract,
        MockDispatcher(ok),
        learner=learner,
        sinks=[trace.append],
        config=GuardConfig(learner_timeout=0.1, stall_threshold=0.2),
    )
    async with guard as g:
        start = time.monotonic()
        opp = asyncio.ensure_future(g.submit(Request("o", "opp", 0.0)))
        await asyncio.sleep(0.02)  # the learner is now blocked on the opportunistic question
        assured = await g.submit(Request("a", "assured", 0.0))
        took = time.monotonic() - start
        refused = await opp
        second = await g.submit(Request("o2", "opp", 0.0))  # its loop still blocked: answered at once
    assert assured.status == "completed" and took < 0.5, took
    assert (refused.status, refused.reason) == ("rejected", "learner-timeout")
    assert (second.status, second.reason) == ("rejected", "learner-timeout") and learner.asked == 1
    assert not [e for e in trace if isinstance(e, Stall)]  # the Guard's loop never stalled


async def _blocking(request: Request) -> Response:
    time.sleep(0.4)
    return Response(output_tokens=1)


async def test_a_stalled_loop_is_a_stall_record_the_checker_reads() -> None:
    contract = make_contract(floor=1)
    trace: list[Event] = []
    async with Guard(
        contract, MockDispatcher(_blocking), sinks=[trace.append], config=GuardConfig(stall_threshold=0.2)
    ) as g:
        await g.submit(Request("a", "assured", 0.0))
        await asyncio.sleep(0.2)  # the watchdog's next wake-up sees the stall
    stalls = [e for e in trace if isinstance(e, Stall)]
    assert len(stalls) == 1 and stalls[0].lag >= 0.3 and stalls[0].since <= stalls[0].t
    assert g.stalls.stalls == 1 and g.stalls.longest >= 0.3
    record = event_to_dict(stalls[0])
    assert "rid" not in record and event_from_dict(record) == stalls[0]
    monitor = Monitor(contract, properties=("AF", "WF"))
    monitor.feed_all(trace)
    assert monitor.violations() == []


async def test_no_watchdog_by_default_in_the_library() -> None:
    async with Guard(make_contract(floor=1), MockDispatcher(_blocking)) as g:
        await g.submit(Request("a", "assured", 0.0))
        await asyncio.sleep(0.1)
    assert g.stalls.stalls == 0
