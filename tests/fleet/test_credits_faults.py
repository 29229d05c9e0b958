"""The shared pool under real faults of a real Redis: killed and restarted, paused (SIGSTOP/SIGCONT).

Two replicas spend in real time (windows of 0.25 s) while the store is
broken mid-run; the tally of their grants must stay within B in every
window, the outage must be lived on static shares (declared), and the
replicas must be back on the shared pool once the store answers again.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable

from rvguard.clock import MonotonicClock
from rvguard.fleet.credits import CreditDecision, CreditsConfig, RedisStore, SharedCredits

from ._pool import pool_contract

FLOOR = 4
WINDOW = 0.25
HALF = {"a": 0.5, "b": 0.5}


Decisions = list[tuple[float, CreditDecision]]


async def _run(url: str, fault: Callable[[], None], heal: Callable[[], None]) -> Decisions:
    contract = pool_contract(FLOOR, window=WINDOW)
    clock = MonotonicClock()
    pools = []
    for name in HALF:
        cfg = CreditsConfig(url=url, replica=name, shares=HALF, timeout=0.05, probe=0.05, prefix="faults")
        pools.append(SharedCredits(contract, cfg, RedisStore(url, timeout=0.05), now=clock.now()))
    beats = [asyncio.create_task(p.run(clock)) for p in pools]
    decisions: list[tuple[float, CreditDecision]] = []
    plan = {0.8: fault, 1.6: heal}
    try:
        while (now := clock.now()) < 2.6:
            for at in [at for at in plan if now >= at]:
                plan.pop(at)()
            for pool in pools:
                decisions.append((now, await pool.spend("gold", 1.0, clock.now())))
            await asyncio.sleep(0.01)
    finally:
        for task in beats:
            task.cancel()
        await asyncio.gather(*beats, return_exceptions=True)
        for pool in pools:
            await pool.aclose()
    return decisions


def _judge(decisions: Decisions) -> None:
    spent: dict[int, int] = defaultdict(int)
    for _, d in decisions:
        spent[d.window] += d.granted
    assert spent and max(spent.values()) <= FLOOR, dict(spent)
    during = [d for t, d in decisions if 0.9 <= t < 1.6]
    after = [d for t, d in decisions if t >= 2.2]
    assert during and all(d.mode == "static" for d in during)
    assert any(d.granted for d in during)  # the static shares were spent
    assert any(d.reason == "floor-lowered" for d in during)  # and the refusals declared
    assert any(d.mode == "shared" and d.granted for d in after)  # back on the pool


async def test_redis_killed_mid_run_and_restarted(redis_server, redis_url: str) -> None:
    decisions = await _run(redis_url, redis_server.kill, redis_server.start)
    _judge(decisions)
    fenced = [d for t, d in decisions if t >= 1.6 and d.mode == "static"]
    assert fenced  # the restarted store lost its state: its first windows are fenced


async def test_redis_paused_then_resumed(redis_server, redis_url: str) -> None:
    try:
        decisions = await _run(redis_url, redis_server.pause, redis_server.resume)
    finally:
        redis_server.resume()
    _judge(decisions)
