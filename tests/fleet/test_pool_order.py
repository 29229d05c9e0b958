"""A floor credit the shared pool granted is admitted on the floor, whatever this replica's own order.

Before: the core counted entitlement in the order the pool's answers came back on this replica,
so when one replica's concurrent calls were answered out of order, its fourth answer (B = 3)
could be the pool's second arrival, granted, and still be refused as ``excess``: a burst of 8
over two `rvguard serve` replicas with a healthy Redis got 2 floor admissions, not 3, and the
merged check reported the refusal ("floor-entitled request (by the pool's order) refused").

The pool here is a stand-in (no Redis): it grants the first B calls in the order they reach it
and answers them in reverse order. The tally reads the Guard's own events only.
"""

from __future__ import annotations

import asyncio

from rvguard.clock import ManualClock
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.request import Request
from rvguard.events import Admit, Basis, Event, Reject

from ..enforce._harness import make_contract

FLOOR = 3
OFFERED = 4


class ReversePool:
    """Grants the first ``FLOOR`` spends in call order; answers them last-called first."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self._answer: dict[str, asyncio.Event] = {}

    def window(self, t: float) -> int:
        return int(t // 1.0)

    async def spend(self, rid: str, tenant: str, weight: float, now: float) -> tuple[int, str]:
        self.order.append(rid)
        place = len(self.order)
        gate = self._answer[rid] = asyncio.Event()
        await gate.wait()
        return self.window(now), "" if place <= FLOOR else "excess"

    async def release_in_reverse(self) -> None:
        while len(self._answer) < OFFERED:
            await asyncio.sleep(0)
        for rid in reversed(self.order):
            self._answer[rid].set()
            for _ in range(20):  # let that submit reach the core before the next answer
                await asyncio.sleep(0)


async def test_a_pool_grant_is_a_floor_admit_even_past_b_in_local_order() -> None:
    events: list[Event] = []
    pool = ReversePool()
    clock = ManualClock(0.5)
    done = MockDispatcher(lambda r: Response(text="ok"))
    contract = make_contract(floor=FLOOR, slots=8)
    async with Guard(contract, done, sinks=[events.append], clock=clock, credits=pool) as guard:
        submits = [
            asyncio.ensure_future(guard.submit(Request(f"a{i}", "assured", 0.5))) for i in range(OFFERED)
        ]
        await pool.release_in_reverse()
        await asyncio.gather(*submits)
    floor = sorted(e.rid for e in events if isinstance(e, Admit) and e.basis is Basis.FLOOR)
    refused = {e.rid: e.reason for e in events if isinstance(e, Reject)}
    granted = sorted(pool.order[:FLOOR])
    assert floor == granted, (floor, refused, pool.order)
    assert refused == {pool.order[FLOOR]: "excess"}
