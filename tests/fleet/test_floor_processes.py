"""The fleet burst of the floor, as an operator runs it: two real `rvguard serve` processes.

`test_gateway_floor` runs both replicas as `Gateway` objects on the test's own event loop and
skips the first window after they are ready. Here each replica is its own process
(``rvguard serve --replica a|b --credits redis://… --share 0.5``, the CLI's defaults otherwise),
a gold tenant has B = 3 a window, and 8 gold requests alternating replicas are sent together 10 ms
after a window opens (sent again in the next window when a loaded machine delays it past its own:
`landed_burst`): in the **first** window after both answer ``/readyz`` 200, in two more with
the store healthy (each exactly min(B, 8) = 3 floor admissions fleet-wide), in one with the store
paused (SIGSTOP: each replica's reserve, 1, so exactly 2), and in one after it resumes (3 again).
The merged traces pass `rvguard check` with declared (floor-lowered) AF refusals only, in the
paused window. The tally is the raw records'; it imports neither the pool nor the judge.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from rvguard.check import check_traces
from rvguard.gateway.fake import FakeUpstream
from tests.gateway._support import contract, serve_process

from .test_gateway_floor import FLOOR, OFFERED, burst, ready

WINDOW = 1.0


async def window_start(skip: int = 0) -> int:
    """Sleep to 10 ms after the next window opens on Unix time (plus ``skip`` windows); its index."""
    now = time.time()
    k = int(now // WINDOW) + 1 + skip
    await asyncio.sleep(k * WINDOW + 0.01 - now)
    return k


async def landed_burst(client: httpx.AsyncClient, urls: list[str], traces: list[Path], skip: int = 0) -> int:
    """A burst 10 ms into a window (``skip`` windows on) whose arrivals all reach the replicas in that
    window; its index. The premise of the count, checked: on a machine loaded enough, requests sent
    10 ms into a window were seen reaching a replica 5.7 s later (its ``arrival-gap`` alert), spread
    over later windows, each then holding part of the burst. Such a burst is sent again, in the next
    window, up to three times; a burst that landed is judged exactly (the traces are written a line
    at a time, so its arrivals are on disk when its answers are in)."""
    for _ in range(3):
        before = {rid for rid, _t in arrivals(traces)}
        k = await window_start(skip)
        await burst(client, urls)
        landed = [t for rid, t in arrivals(traces) if rid not in before]
        assert len(landed) == OFFERED, landed
        if all(int(t // WINDOW) == k for t in landed):
            return k
        seen = sorted({int(t // WINDOW) for t in landed})
        print(f"\na burst sent in window {k} reached the replicas in {seen}: sent again")
        skip = 0
    raise AssertionError("three bursts in a row reached the replicas outside the window they were sent in")


def _records(traces: list[Path]) -> list[dict[str, Any]]:
    """Every record of the traces so far (their segment headers included)."""
    return [json.loads(line) for t in traces for line in t.read_text().splitlines()]


def arrivals(traces: list[Path]) -> list[tuple[str, float]]:
    """(rid, time) of every arrival in the traces so far."""
    return [(r["rid"], r["t"]) for r in _records(traces) if r.get("kind") == "arrive"]


def floor_admits(traces: list[Path]) -> Counter[int]:
    """Floor admissions per window of their arrival, from the raw records."""
    records = _records(traces)
    arrived = {r["rid"]: r["t"] for r in records if r["kind"] == "arrive"}
    return Counter(
        int(arrived[r["rid"]] // WINDOW) for r in records if r["kind"] == "admit" and r["basis"] == "floor"
    )


async def test_two_serve_processes_deliver_min_b_offered_from_the_first_window_and_each_reserve_paused(
    redis_server: Any, redis_url: str, tmp_path: Path
) -> None:
    tenants = {
        "assured": {"floor": FLOOR, "deadline": 3.0, "tier": 0},
        "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
    }
    c = contract(window=WINDOW, slots=8, tenants=tenants)
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    common = ("--learner", "reject-all", "--credits", redis_url, "--share", "a=0.5", "--share", "b=0.5")
    windows: dict[str, list[int]] = {"healthy": []}
    async with FakeUpstream(token_delay=0.0) as engine, httpx.AsyncClient(timeout=30) as client:
        with contextlib.ExitStack() as stack:
            (url_a, trace_a), (url_b, trace_b) = (
                stack.enter_context(serve_process(c, engine.url, d, *common, "--replica", name))
                for d, name in zip(dirs, "ab", strict=True)
            )
            urls, traces = [url_a, url_b], [trace_a, trace_b]
            await ready(client, urls, within=30.0)
            for _ in range(3):  # the first window after ready, and two more
                windows["healthy"].append(await landed_burst(client, urls, traces))
            redis_server.pause()
            try:  # a join made before the pause may cover the next window: skip it
                windows["paused"] = [await landed_burst(client, urls, traces, skip=1)]
            finally:
                redis_server.resume()
            windows["resumed"] = [await landed_burst(client, urls, traces, skip=2)]
    got = floor_admits(traces)
    print(f"\nfloor admissions per window: { {k: [got[w] for w in ws] for k, ws in windows.items()} }")
    assert [got[k] for k in windows["healthy"]] == [FLOOR] * 3, dict(got)
    assert [got[k] for k in windows["paused"]] == [2], dict(got)
    assert [got[k] for k in windows["resumed"]] == [FLOOR], dict(got)
    report = check_traces([str(t) for t in traces], c)
    assert not report.bad_lines
    assert all(v.property == "AF" and "floor-lowered" in v.detail for v in report.violations), [
        (v.property, v.detail) for v in report.violations
    ]
    assert {int(v.t // WINDOW) for v in report.violations} <= set(windows["paused"])
