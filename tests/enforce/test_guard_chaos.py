"""Fuzz: dispatchers that end every way there is, at random moments; the Guard never leaks.

Each request's dispatch returns, raises, hangs past the Guard's timeout, ends
cancelled by a third party (it awaited a shared future someone else
cancelled), or swallows a cancellation and returns anyway; the learner
answers, rejects, raises, answers garbage or overruns its deadline; callers cancel
their ``submit`` at random moments, and the Guard is closed at a random
moment, drained or not. Whatever happens: every ``submit`` returns or raises
(no hang), every arrived request has exactly one terminal event, the trace
is well formed and AF-clean, every outcome agrees with the trace, a
`CancelledError` reaches only callers that were cancelled, and no slot,
queue entry or record is left.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard, Outcome
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError
from rvguard.events import Arrive, Complete, Drop, Event, Fail, Proposal, Reject

from ._harness import STATUS_OF, check_af, check_wf, make_contract, terminal_counts

BEHAVIOURS = ("return", "raise", "hang", "orphan", "stubborn")
TIMEOUT = 0.02
LEARNER_TIMEOUT = 0.005


@dataclass(frozen=True)
class Plan:
    behaviour: str
    delay: float  # seconds the dispatch takes before it does its thing
    cancel_at: float | None  # when the caller cancels its submit (None: never)
    assured: bool
    learner: str = "admit"  # what the learner does when asked (only surplus is asked)


plans = st.builds(
    Plan,
    st.sampled_from(BEHAVIOURS),
    st.sampled_from([0.0, 0.001, 0.004]),
    st.none() | st.sampled_from([0.0, 0.002, 0.006, 0.03]),
    st.booleans(),
    st.sampled_from(["admit", "reject", "raise", "garbage", "slow"]),
)


class Learner:
    """Does what each request's plan says, in the Guard's learner thread."""

    def __init__(self, plans: dict[str, Plan]) -> None:
        self.plans = plans

    def propose(self, request: Request, view: object) -> object:
        what = self.plans[request.rid].learner
        if what == "raise":
            raise RuntimeError("learner down")
        if what == "garbage":
            return {"admit": True}
        if what == "slow":
            time.sleep(LEARNER_TIMEOUT * 2)
        return Proposal(admit=what != "reject")


class Backend:
    """Behaves as each request's plan says; ``orphan`` waits on a future a third party cancels."""

    def __init__(self, plans: dict[str, Plan]) -> None:
        self.plans = plans
        self.shared: asyncio.Future[Response] = asyncio.get_running_loop().create_future()

    async def __call__(self, request: Request) -> Response:
        plan = self.plans[request.rid]
        await asyncio.sleep(plan.delay)
        if plan.behaviour == "raise":
            raise ConnectionResetError("reset by peer")
        if plan.behaviour == "hang":
            await asyncio.sleep(3600)
        if plan.behaviour == "orphan":
            return await self.shared
        if plan.behaviour == "stubborn":
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:  # a dispatcher that ignores one cancellation
                await asyncio.sleep(0.001)
        return Response()

    async def third_party(self, rng: random.Random) -> None:
        for _ in range(4):
            await asyncio.sleep(rng.choice([0.001, 0.003, 0.008]))
            self.shared.cancel()
            self.shared = asyncio.get_running_loop().create_future()


async def _scenario(plans: list[Plan], close_at: float, drain: bool, seed: int) -> None:
    contract = make_contract(slots=2, floor=3)
    by_rid = {f"r{i}": p for i, p in enumerate(plans)}
    backend = Backend(by_rid)
    trace: list[Event] = []
    edge = MockDispatcher(backend)
    guard = Guard(
        contract,
        edge,
        learner=Learner(by_rid),
        sinks=[trace.append],
        config=GuardConfig(learner_timeout=LEARNER_TIMEOUT, timeout=TIMEOUT, drain=drain, drain_timeout=0.01),
    )
    await guard.__aenter__()
    tasks = {
        rid: asyncio.create_task(guard.submit(Request(rid, "assured" if p.assured else "opp", 0.0)))
        for rid, p in by_rid.items()
    }
    cancelled: set[str] = set()

    async def cancel(rid: str, at: float) -> None:
        await asyncio.sleep(at)
        if not tasks[rid].done():
            cancelled.add(rid)
            tasks[rid].cancel()

    async def close() -> None:
        await asyncio.sleep(close_at)
        await guard.aclose()

    chaos = [cancel(rid, p.cancel_at) for rid, p in by_rid.items() if p.cancel_at is not None]
    helpers = asyncio.gather(backend.third_party(random.Random(seed)), close(), *chaos)
    done = await asyncio.wait_for(asyncio.gather(*tasks.values(), return_exceptions=True), 2.0)
    await asyncio.wait_for(helpers, 2.0)
    _judge(contract, trace, guard, dict(zip(tasks, done, strict=True)), cancelled)


def _judge(
    contract: object, trace: list[Event], guard: Guard, results: dict[str, object], cancelled: set[str]
) -> None:
    arrived = {e.rid for e in trace if isinstance(e, Arrive)}
    assert terminal_counts(trace) == dict.fromkeys(arrived, 1)
    assert check_wf(trace) == []
    assert check_af(contract, trace) == []  # type: ignore[arg-type]
    last = {e.rid: e for e in trace if isinstance(e, Reject | Complete | Drop | Fail)}
    for rid, got in results.items():
        if isinstance(got, asyncio.CancelledError):
            assert rid in cancelled, rid  # only a caller that was cancelled sees a cancellation
        elif isinstance(got, EnforcementError):
            assert got.status_hint == 503 and rid not in arrived  # closed before it arrived
        else:
            assert isinstance(got, Outcome), (rid, got)
            assert got.status == STATUS_OF[last[rid].kind.value], (rid, got, last[rid])
    stats = guard.statistics()
    assert (stats.in_flight, stats.queue_depth, stats.live, stats.tasks) == (0, 0, 0, 0)
    assert guard.core.statistics().arrived == len(arrived)


@given(
    st.lists(plans, min_size=1, max_size=12),
    st.sampled_from([0.0, 0.003, 0.01, 0.05]),
    st.booleans(),
    st.integers(0, 2**16),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_way_a_dispatch_ends_frees_its_slot_and_ends_the_request_once(
    plans: list[Plan], close_at: float, drain: bool, seed: int
) -> None:
    asyncio.run(_scenario(plans, close_at, drain, seed))
