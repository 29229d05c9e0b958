"""Streams read by httpx-sse: an upstream that spreads a chunk over several ``data:`` lines is served."""

from __future__ import annotations

import json

import httpx

from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, settings


async def test_multi_line_data_events_are_served_streamed_and_whole() -> None:
    """Before: the first such event failed the request ("malformed chunk", 502)."""
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, None)) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        body = {"prompt": "multiline", "max_tokens": 4}
        plain = await client.post(
            url + "/v1/completions", json={**body, "prompt": "x"}, headers=auth("sk-opp")
        )
        whole = await client.post(url + "/v1/completions", json=body, headers=auth("sk-opp"))
        lines = []
        async with client.stream(
            "POST", url + "/v1/completions", json={**body, "stream": True}, headers=auth("sk-opp")
        ) as r:
            lines = [line async for line in r.aiter_lines()]
    assert plain.status_code == whole.status_code == 200, whole.text
    assert whole.json()["choices"][0]["text"] == plain.json()["choices"][0]["text"]
    events = [line[6:] for line in lines if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and all(line == "" or line.startswith("data: ") for line in lines)
    text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1] if json.loads(e)["choices"])
    assert text == plain.json()["choices"][0]["text"]
