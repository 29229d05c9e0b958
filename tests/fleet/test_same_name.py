"""Two replicas started with the same ``--replica`` name: their rids never collide, the merged
traces can be judged, and the older process stops pooling and says why on /readyz.

Before: replicas "a a b" shared request ids, so `rvguard check` on their traces exited 2 on the
duplicate rid and the fleet could not be judged at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import httpx

from rvguard.check import check_traces
from rvguard.enforce.learners import RejectAll
from rvguard.fleet.credits import CreditsConfig
from rvguard.gateway.app import Gateway, serving
from rvguard.gateway.config import KeysConfig
from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.settings import GatewaySettings
from tests.gateway._support import KEYS, SECRET, auth

from .test_gateway_fleet import SHARES, WINDOW, fleet_contract


def _rids(trace: Path) -> set[str]:
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    return {r["rid"] for r in records if r["kind"] == "arrive"}


async def _until(client: httpx.AsyncClient, url: str, status: int) -> httpx.Response:
    """Poll ``url``'s /readyz until it answers ``status`` (at most 30 windows)."""
    deadline = time.monotonic() + 30 * WINDOW
    while (r := await client.get(url + "/readyz")).status_code != status:
        assert time.monotonic() < deadline, r.text
        await asyncio.sleep(WINDOW / 4)
    return r


async def test_two_processes_named_alike_write_distinct_rids_and_the_older_steps_down(
    redis_url: str, tmp_path: Path
) -> None:
    c = fleet_contract()
    body = {"model": "fake", "prompt": "hello", "max_tokens": 2}
    traces = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    async with contextlib.AsyncExitStack() as stack:
        engine = await stack.enter_async_context(FakeUpstream())
        client = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        urls = []
        for trace in traces:  # one after the other: the second takes the name over
            pool = CreditsConfig(url=redis_url, replica="a", shares=SHARES, timeout=0.25, prefix="same")
            s = GatewaySettings(
                upstream=(engine.url,),
                keys=KeysConfig(keys=KEYS, claim_secret=SECRET),
                trace=trace,
                learner=RejectAll(),
                replica="a",
                credits=pool,
            )
            urls.append(await stack.enter_async_context(serving(Gateway(c, s).app)))
            if len(urls) == 1:  # the second sits out until the first's lease is over: not awaited
                await _until(client, urls[0], 200)
        for url in urls:
            for _ in range(2):
                await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        older = await _until(client, urls[0], 503)  # its next heartbeat finds the name taken
    first, second = _rids(traces[0]), _rids(traces[1])
    assert len(first) == len(second) == 2 and not first & second, (first, second)
    report = check_traces([str(t) for t in traces], c)  # before: a duplicate rid, exit 2
    assert not report.bad_lines and report.metrics.requests == 4
    assert "taken by another live process" in older.json()["error"]["message"]
