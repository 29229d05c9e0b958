"""The fake upstream itself: slots, keep-alive, modes, kill and restart."""

from __future__ import annotations

import asyncio

import httpx

from rvguard.gateway.fake import FakeUpstream


async def test_slots_bound_concurrency_and_keep_alive_works() -> None:
    async with FakeUpstream(slots=2, token_delay=0.005) as up, httpx.AsyncClient() as client:
        body = {"prompt": "x", "max_tokens": 4}
        rs = await asyncio.gather(*(client.post(up.url + "/v1/completions", json=body) for _ in range(6)))
        again = await client.post(
            up.url + "/v1/chat/completions", json={"messages": [{"content": "x"}], "max_tokens": 2}
        )
        missing = await client.get(up.url + "/nope")
    assert [r.status_code for r in rs] == [200] * 6 and up.max_active == 2 and up.served == 7
    assert again.json()["choices"][0]["message"]["content"] == "t0 t1 "
    assert missing.status_code == 404


async def test_kill_then_start_on_the_same_port() -> None:
    async with FakeUpstream() as up, httpx.AsyncClient() as client:
        port = up.port
        await up.kill()
        try:
            await client.get(up.url + "/v1/models")
            refused = False
        except httpx.ConnectError:
            refused = True
        await up.start()
        ok = await client.get(up.url + "/v1/models")
    assert refused and up.port == port and ok.status_code == 200
