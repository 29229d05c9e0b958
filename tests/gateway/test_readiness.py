"""``/readyz`` (`rvguard.gateway.readiness`): an upstream ejected for failed requests is no upstream
ready, whatever its ``/v1/models`` says; a fleet is not ready once every engine is out, and says which.

The first test fails on a gateway whose readiness asks ``/v1/models`` alone (it answered 200 there).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from rvguard.gateway.config import KeysConfig
from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.settings import GatewaySettings

from ._support import KEYS, SECRET, auth, gateway, settings
from .test_outlier import BODY, _complete, _contract, _dead_engine, _ready


async def test_readyz_answers_503_once_every_completion_fails_though_the_models_answer(
    tmp_path: Path,
) -> None:
    async with (
        _dead_engine() as (engine, hits),
        gateway(_contract(), settings(engine, tmp_path / "t.jsonl", probe_interval=0.05)) as (_, url),
        httpx.AsyncClient(timeout=30) as client,
    ):
        await _ready(client, url)
        statuses = [await _complete(client, url) for _ in range(3)]
        await asyncio.sleep(0.2)  # several probes, each answered 200 by /v1/models
        r = await client.get(url + "/readyz")
        again = await _complete(client, url)  # still forwarded: there is nowhere else
    assert len(hits) == 4 and all(s >= 500 for s in statuses) and again >= 500, (statuses, again)
    assert r.status_code == 503, r.text
    message = r.json()["error"]["message"]
    assert "upstream (ejected: 3 failed requests in a row" in message and "http 500" in message, message
    assert r.json()["checks"]["upstream"] is False


async def test_a_fleet_with_every_engine_ejected_is_not_ready_and_says_which() -> None:
    async with FakeUpstream() as a, FakeUpstream() as b:
        s = GatewaySettings(
            upstream=(f"a={a.url}", f"b={b.url}"),
            keys=KeysConfig(keys=KEYS, claim_secret=SECRET),
            probe_interval=0.05,
            eject_after=1,
        )
        async with gateway(_contract(), s) as (_, url), httpx.AsyncClient(timeout=30) as client:
            await _ready(client, url)
            a.dead = b.dead = True
            first = [await _complete(client, url) for _ in range(2)]  # one to each, each ejects its engine
            r = await client.get(url + "/readyz")
            last = await client.post(url + "/v1/completions", json=BODY, headers=auth("sk-assured"))
    assert first == [502, 502] and r.status_code == 503, (first, r.text)
    message = r.json()["error"]["message"]
    assert "engine a ejected: 1 failed request in a row" in message and "engine b ejected" in message
    assert last.status_code == 502 and "every engine is down or ejected" in last.text
