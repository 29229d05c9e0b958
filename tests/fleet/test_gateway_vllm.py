"""The gateway over two real vLLM CPU engines: one dies mid-stream, its greedy stream resumes on the other.

The client's text must be the uninterrupted run's (asked of the surviving engine directly),
and the trace must show one terminal event per request and no failure. The killed engine is
started again afterwards (the two engines serve the whole session).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from rvguard.gateway.app import Gateway, serving
from rvguard.gateway.config import KeysConfig
from rvguard.gateway.settings import GatewaySettings
from tests.gateway._support import KEYS, SECRET, auth, contract, read_trace, terminal_counts

TOKENS = 600
BODY: dict[str, Any] = {
    "model": "tiny",
    "prompt": "A request arrives, is admitted",
    "max_tokens": TOKENS,
    "temperature": 0,
    "ignore_eos": True,
    "stream": True,
}


async def _text(client: httpx.AsyncClient, url: str, headers: dict[str, str], seen: list[int]) -> str:
    text = ""
    async with client.stream("POST", url + "/v1/completions", json=BODY, headers=headers) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                seen.append(1)
                text += "".join(c.get("text") or "" for c in json.loads(line[6:])["choices"])
    return text


async def test_a_greedy_stream_resumes_on_the_other_engine(two_engines: Any, tmp_path: Path) -> None:
    a, b = two_engines
    c = contract(slots=4, output_cap=TOKENS)
    s = GatewaySettings(
        upstream=(f"e0={a.url}", f"e1={b.url}"),
        keys=KeysConfig(keys=KEYS, claim_secret=SECRET),
        trace=tmp_path / "t.jsonl",
        route_seed=3,
        probe_interval=0.5,
        engine_slots={"e0": 1, "e1": 1},  # one stream per engine whatever the views (a scrape may time out)
    )
    gw = Gateway(c, s)
    try:
        async with httpx.AsyncClient(timeout=300) as client:
            reference = await _text(client, b.url, {}, [])  # uninterrupted, straight to the survivor
            async with serving(gw.app) as url:
                while gw.fleet is None or any(e.telemetry == "unknown" for e in gw.fleet.engines):
                    await asyncio.sleep(0.05)  # the first scrapes of /metrics (before: siloed routing)
                seen: list[list[int]] = [[], []]
                streams = [
                    asyncio.ensure_future(_text(client, url, auth("sk-opp"), seen[i])) for i in range(2)
                ]
                while min(map(len, seen)) < 5:
                    await asyncio.sleep(0.02)
                assert gw.fleet is not None and [e.in_flight for e in gw.fleet.engines] == [1, 1]
                await asyncio.to_thread(a.kill)
                texts = await asyncio.gather(*streams)
                relocated = gw.fleet.relocated
    finally:
        await asyncio.to_thread(a.start)
    assert len(reference) > 0 and texts == [reference, reference]
    assert relocated == 1
    events = read_trace(tmp_path / "t.jsonl")
    assert set(terminal_counts(events).values()) == {1}
    assert not [e for e in events if e["kind"] == "fail"]
