"""PR on the Guard's own traces: the ends the Guard causes are judged, the engine's and the client's not.

The Guard writes ``fail`` with a reason saying who ended the request (`rvguard.enforce.guard`'s
module doc): ``shutdown`` (its own ``aclose``), ``preempted`` (its preemption), ``cancelled`` (the
caller), the exception's text or ``timeout`` (the engine). PR reports the first two for a protected
request, at the ``fail``, and only those.
"""

from __future__ import annotations

import asyncio

from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.request import Request
from rvguard.events import Event, Fail
from rvguard.monitors import Monitor

from ._harness import make_contract


def _pr(contract: object, trace: list[Event]) -> list[tuple[str, float, str]]:
    monitor = Monitor(contract, ("WF", "PR"))  # type: ignore[arg-type]
    monitor.feed_all(trace)
    assert not [v for v in monitor.violations() if v.property == "WF"]
    return [(v.rid, v.t, v.witness[-1].reason) for v in monitor.violations()]  # type: ignore[attr-defined]


async def test_a_shutdown_that_ends_entitled_requests_is_a_pr_violation_at_each_fail() -> None:
    contract = make_contract(slots=1, floor=2)

    async def hang(request: Request) -> Response:
        await asyncio.sleep(3600)
        return Response()

    trace: list[Event] = []
    guard = Guard(contract, MockDispatcher(hang), sinks=[trace.append], config=GuardConfig(drain=False))
    async with guard:
        rids = ["a0", "a1", "a2", "o0"]  # a0, a1 entitled (B = 2); a2 excess, refused; o0 surplus
        tenant = {"a": "assured", "o": "opp"}
        tasks = [asyncio.create_task(guard.submit(Request(r, tenant[r[0]], 0.0))) for r in rids]
        await asyncio.sleep(0.01)
    await asyncio.gather(*tasks)
    fails = {e.rid: e for e in trace if isinstance(e, Fail)}
    assert {r: e.reason for r, e in fails.items()} == dict.fromkeys(("a0", "a1", "o0"), "shutdown")
    assert sorted(_pr(contract, trace)) == sorted((r, fails[r].t, "shutdown") for r in ("a0", "a1"))


async def test_the_engines_failure_and_the_callers_cancel_are_not_the_guards() -> None:
    contract = make_contract(slots=2, floor=4)
    started = asyncio.Event()

    async def backend(request: Request) -> Response:
        if request.rid == "boom":
            raise RuntimeError("engine fell over")
        started.set()
        await asyncio.sleep(3600)
        return Response()

    trace: list[Event] = []
    async with Guard(contract, MockDispatcher(backend), sinks=[trace.append]) as guard:
        boom = await guard.submit(Request("boom", "assured", 0.0))
        task = asyncio.create_task(guard.submit(Request("gone", "assured", 0.0)))
        await started.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert boom.status == "failed"
    assert {e.rid: e.reason for e in trace if isinstance(e, Fail)} == {
        "boom": "RuntimeError: engine fell over",
        "gone": "cancelled",
    }
    assert _pr(contract, trace) == []
