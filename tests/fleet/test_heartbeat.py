"""The heartbeat's timing: every window is joined and confirmed before it opens, however slow the store.

A store whose every call takes ``cost`` seconds (of a manual clock) stands for a loaded
machine with a healthy Redis. The heartbeat must renew, join and confirm the next window
``lead`` before it opens; it used to reckon its next wake-up from the time read *before* a
heartbeat, so each wake-up slipped by the heartbeat's own duration, and at 0.2 s a call the
join ahead landed after the window opened (a burst there found its reserve held).
No Redis here: the pool script's answers are canned ("joined" for a join).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from rvguard.clock import ManualClock
from rvguard.fleet.credits import CreditsConfig, SharedCredits

from ._pool import pool_contract

WINDOW = 4.0  # lead = min(W / 4, 1 s) = 1 s


class SlowStore:
    """Answers every call after ``cost`` seconds of ``clock``; logs (time, window, confirm) per pool call."""

    def __init__(self, clock: ManualClock, cost: float) -> None:
        self.clock, self.cost = clock, cost
        self.calls: list[tuple[float, int, bool]] = []
        self._holder = ""

    async def call(self, keys: Sequence[str], args: Sequence[str]) -> list[str]:
        self.clock.advance(self.cost)
        self.calls.append((self.clock.now(), int(args[5]), args[10] == "1"))
        return ["joined", "0", "0", "0"]

    async def lease(self, key: str, holder: str, ms: int, *, claim: bool) -> str:
        self.clock.advance(self.cost)
        if not self._holder:
            self._holder = holder
            return "+0"
        return self._holder

    async def ping(self) -> None:
        self.clock.advance(self.cost)

    async def aclose(self) -> None:
        return None


async def heartbeats(start: float, cost: float, until: float) -> SlowStore:
    clock = ManualClock(start)
    cfg = CreditsConfig(url="redis://127.0.0.1:1/0", replica="a", shares={"a": 0.5, "b": 0.5})
    store = SlowStore(clock, cost)
    pool = SharedCredits(pool_contract(4, window=WINDOW), cfg, store, now=clock.now())
    await pool.warm(clock.now)

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        if clock.now() > until:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await pool.run(clock, sleep=sleep)
    return store


@pytest.mark.parametrize("cost", [0.0, 0.05, 0.2, 0.3])
async def test_each_window_is_confirmed_before_it_opens(cost: float) -> None:
    """Up to 3 calls a heartbeat (lease, join, confirm) within the 1 s lead: each window confirmed ahead."""
    store = await heartbeats(start=5.2, cost=cost, until=30.0)  # starts in window 1: never confirmed
    confirmed = {k: t for t, k, confirm in store.calls if confirm}
    assert sorted(confirmed) == list(range(2, 8)), store.calls
    late = {k: t for k, t in confirmed.items() if t >= k * WINDOW}
    assert not late, (late, store.calls)
