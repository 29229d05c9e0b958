"""Hypothesis: two Guards spending one real Redis pool, arrivals interleaved with store up/down/late
schedules and slow answers that cross window edges — the admits, not just the pool's grants.

`test_credits_interleavings` drives the pool alone; this drives what the gateway runs: each
Guard asks the pool at arrival (`Guard(credits=…)`), the core grants no floor the pool refused,
and an answer that comes back in the next window is asked again there, so a floor admit is
always counted in the window its arrival is stamped in. The oracle tallies the Guards' own
events (floor admits by their arrival's window) and imports nothing from the pool or the judge.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import defaultdict

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rvguard.clock import ManualClock
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.request import Request
from rvguard.events import Admit, Arrive, Basis, Event
from rvguard.fleet.credits import SharedCredits

from ._pool import FaultyStore, pool_contract, replica

_PREFIX = itertools.count()
HALF = {"a": 0.5, "b": 0.5}
# (replica, time step, seconds the pool's answer takes, store mode switched to first, burst)
ARRIVE = st.tuples(
    st.sampled_from(["a", "b"]),
    st.sampled_from([0.0, 0.0, 0.0, 0.1, 0.45, 1.0]),
    st.sampled_from([0.0, 0.0, 0.3, 0.98, 2.5]),
    st.sampled_from([None, None, "up", "down", "late"]),
    st.integers(1, 4),
)


class SlowPool:
    """The Guard's `CreditPool` over one replica's `SharedCredits`, whose answers take ``slow`` s."""

    def __init__(self, pool: SharedCredits, clock: ManualClock) -> None:
        self.pool = pool
        self.clock = clock
        self.slow = 0.0
        self.calls: dict[str, list[tuple[int, str]]] = defaultdict(list)

    def window(self, t: float) -> int:
        return self.pool.window(t)

    async def spend(self, rid: str, tenant: str, weight: float, now: float) -> tuple[int, str]:
        d = await self.pool.spend(tenant, weight, now)
        self.clock.advance(self.slow)  # the answer comes back this much later
        self.slow = 0.0  # only the first try is slow: the retry (next window) answers at once
        self.calls[rid].append((d.window, d.reason))
        return d.window, d.reason


async def _scenario(url: str, floor: int, ops: list[tuple[str, float, float, str | None, int]]) -> None:
    contract = pool_contract(floor)
    clock = ManualClock(2.0)  # after the windows a fresh prefix fences (0 and 1)
    prefix = f"g{next(_PREFIX)}"
    events: list[Event] = []
    pools: dict[str, SlowPool] = {}
    stores: dict[str, FaultyStore] = {}
    guards: dict[str, Guard] = {}
    for name in HALF:
        pool, stores[name] = replica(contract, url, name, HALF, now=0.0, prefix=prefix)
        pools[name] = SlowPool(pool, clock)
        done = MockDispatcher(lambda r: Response(text="ok"))
        guards[name] = Guard(contract, done, sinks=[events.append], clock=clock, credits=pools[name])
        await guards[name].__aenter__()
    await pools["a"].pool.heartbeat(0.0)  # fences windows 0 and 1 of this fresh prefix
    seq = itertools.count()
    try:
        for name, dt, slow, mode, burst in ops:
            clock.advance(dt)
            if mode is not None:
                stores[name].mode = mode
            for _ in range(burst):
                pools[name].slow = slow
                rid = f"{name}-g{next(seq)}"
                await guards[name].submit(Request(rid, "gold", clock.now()))
            _judge(events, pools, floor)
    finally:
        for name in HALF:
            await guards[name].aclose()
            await pools[name].pool.aclose()


def _judge(events: list[Event], pools: dict[str, SlowPool], floor: int) -> None:
    arrived = {e.rid: e.t for e in events if isinstance(e, Arrive)}
    spent: dict[int, int] = defaultdict(int)
    for e in events:
        if isinstance(e, Admit) and e.basis is Basis.FLOOR:
            k = math.floor(arrived[e.rid])  # W = 1
            spent[k] += 1
            window, reason = pools[e.rid[0]].calls[e.rid][-1]
            assert (window, reason) == (k, ""), (e.rid, pools[e.rid[0]].calls[e.rid], k)
    over = {k: n for k, n in spent.items() if n > floor}
    assert not over, f"the Guards admitted more than B={floor} on the floor in windows {over}"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(floor=st.integers(1, 5), ops=st.lists(ARRIVE, min_size=1, max_size=25))
# a slow answer crosses the window edge: asked again in the next window, counted there
@example(2, [("a", 0.0, 0.98, None, 2), ("b", 0.0, 0.0, None, 2), ("a", 0.0, 0.0, None, 1)])
# the store goes away mid-window after pooled grants: the static share is not spent on top
@example(2, [("a", 0.0, 0.0, None, 2), ("b", 0.0, 0.0, "down", 2), ("a", 0.1, 0.0, "down", 2)])
def test_guards_admit_at_most_b_on_the_floor_per_window(redis_url: str, floor: int, ops: list) -> None:
    asyncio.run(_scenario(redis_url, floor, ops))
