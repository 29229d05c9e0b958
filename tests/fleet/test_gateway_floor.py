"""The fleet delivers its floor, not only stays within it: bursts at window starts, a paused store.

Two real `Gateway` replicas (``a``, ``b``, shares 0.5: reserves of 1 each), a gold
tenant with B = 3 per window, and bursts of 8 gold requests alternating replicas,
sent together just after a window opens. With the store healthy each burst gets
exactly min(B, 8) = 3 floor admissions fleet-wide; with the store paused (SIGSTOP
on the test's own redis-server) each replica still delivers its own reserve:
exactly 2. The merged traces pass `rvguard check` with only declared
(floor-lowered) AF refusals, in the paused window alone.
The tally is written here from the raw records; it imports neither the pool nor the judge.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from rvguard.check import check_traces
from rvguard.contract import Contract
from rvguard.gateway.fake import FakeUpstream
from tests.gateway._support import auth, contract

from .test_gateway_fleet import replicas

FLOOR = 3
WINDOW = 0.6
OFFERED = 8
# Both replicas, the engine and the client share this test's event loop on a shared, busy
# machine: a Redis call's wall time here includes the loop's other work, so the bound is
# the fleet tests' 0.25 s rather than the default 0.05 s (which a warm connection meets).
TIMEOUT = 0.25


def floor_contract() -> Contract:
    tenants = {
        "assured": {"floor": FLOOR, "deadline": 3.0, "tier": 0},
        "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
    }
    return contract(window=WINDOW, slots=8, tenants=tenants)


async def window_start(skip: int = 0) -> int:
    """Sleep to 10 ms after the next window opens (plus ``skip`` windows); its index."""
    now = time.time()
    k = math.floor(now / WINDOW) + 1 + skip
    await asyncio.sleep(k * WINDOW + 0.01 - now)
    return k


async def burst(client: httpx.AsyncClient, urls: list[str]) -> list[int]:
    """``OFFERED`` assured completions, alternating replicas, all at once."""
    body = {"model": "fake", "prompt": "hello", "max_tokens": 2}

    async def one(url: str) -> int:
        r = await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        return r.status_code

    return list(await asyncio.gather(*(one(urls[i % 2]) for i in range(OFFERED))))


async def ready(client: httpx.AsyncClient, urls: list[str], within: float = 8.0) -> None:
    deadline = time.monotonic() + within
    for url in urls:
        while (r := await client.get(url + "/readyz")).status_code != 200:
            assert time.monotonic() < deadline, r.text
            await asyncio.sleep(0.05)


def floor_admits(traces: list[Path]) -> dict[int, int]:
    records = [json.loads(line) for t in traces for line in t.read_text().splitlines()]
    arrived = {r["rid"]: r["t"] for r in records if r["kind"] == "arrive"}
    out: dict[int, int] = defaultdict(int)
    for r in records:
        if r["kind"] == "admit" and r["basis"] == "floor":
            out[math.floor(arrived[r["rid"]] / WINDOW)] += 1
    return out


async def test_bursts_at_window_starts_get_min_b_offered_and_each_reserve_when_paused(
    redis_server: Any, redis_url: str, tmp_path: Path
) -> None:
    c = floor_contract()
    engine = FakeUpstream(token_delay=0.0)
    await engine.start()
    healthy: list[int] = []
    paused = resumed = -1
    try:
        async with asyncio.timeout(40):
            async with (
                replicas(c, redis_url, [engine], tmp_path, "floor", timeout=TIMEOUT) as reps,
                httpx.AsyncClient(timeout=30) as client,
            ):
                urls = [u for _, u, _ in reps]
                await ready(client, urls)
                await window_start()  # one window past ready: the first join ahead may run late
                for _ in range(3):
                    healthy.append(await window_start())
                    await burst(client, urls)
                redis_server.pause()
                try:  # the first window whose join (a lead before it opens) the pause stops
                    lead = min(WINDOW / 4, 1.0)
                    paused = await window_start(skip=int(time.time() % WINDOW > WINDOW - lead - 0.05))
                    await burst(client, urls)
                finally:
                    redis_server.resume()
                resumed = await window_start(skip=2)
                await burst(client, urls)
    finally:
        await engine.close()
    traces = [t for _, _, t in reps]
    check(c, traces, healthy, paused, resumed)


def check(c: Contract, traces: list[Path], healthy: list[int], paused: int, resumed: int) -> None:
    got = floor_admits(traces)
    assert [got[k] for k in healthy] == [FLOOR] * 3, dict(got)
    assert got[paused] == 2, dict(got)  # each replica's reserve, alone
    assert got[resumed] == FLOOR, dict(got)
    assert max(got.values()) <= FLOOR
    report = check_traces([str(t) for t in traces], c)
    assert not report.bad_lines
    assert all(v.property == "AF" and "floor-lowered" in v.detail for v in report.violations), [
        (v.property, v.detail) for v in report.violations
    ]
    lowered = {math.floor(v.t / WINDOW) for v in report.violations}
    assert lowered <= {paused}, (lowered, paused)


async def test_readyz_says_why_a_replica_refuses_to_pool_and_logs_no_password(
    redis_server: Any, redis_url: str, tmp_path: Path, caplog: Any
) -> None:
    from redis.asyncio import Redis

    admin = Redis.from_url(redis_url, decode_responses=True)
    await admin.config_set("maxmemory-policy", "allkeys-lru")
    engine = FakeUpstream(token_delay=0.0)
    await engine.start()
    try:
        caplog.set_level("INFO")
        secret_url = redis_url.replace("redis://", "redis://default:hunter2@")  # the default user's
        async with (
            replicas(floor_contract(), secret_url, [engine], tmp_path, "refuse", timeout=TIMEOUT) as reps,
            httpx.AsyncClient(timeout=30) as client,
        ):
            r = await client.get(reps[0][1] + "/readyz")
            metrics = (await client.get(reps[0][1] + "/metrics")).text
    finally:
        await admin.config_set("maxmemory-policy", "noeviction")
        await admin.aclose()
        await engine.close()
    assert r.status_code == 503 and "maxmemory-policy is allkeys-lru" in r.json()["error"]["message"]
    assert "rvguard_credit_pooling 0.0" in metrics
    logged = "\n".join(f"{rec.getMessage()} {rec.__dict__}" for rec in caplog.records)
    assert "refusing to pool" in logged and "redis://***@" in logged and "hunter2" not in logged
