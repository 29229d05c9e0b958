"""A dead engine that still lists its models: passive detection takes it out; a real answer brings it back.

vLLM whose engine process died (``EngineDeadError``) answers ``GET /v1/models`` 200 and every
completion 500. The first test here (and the first of test_readiness) puts the gateway in front
of such a server written here (`_dead_engine`: a Starlette app, nothing of the gateway's fake) and
uses only settings that main had, so it fails on a gateway whose readiness asks ``/v1/models``
alone: the fleet kept routing to it (11 of 24 requests), ``/readyz`` stayed 200. The rest use
`FakeUpstream` with ``dead`` set (its ``/health`` then answers 503) to check the trace record,
the log line, the series, the trial that brings an engine back, and the health path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from rvguard.check import check_trace
from rvguard.errors import DispatchError, SpecError
from rvguard.gateway.app import serving
from rvguard.gateway.config import KeysConfig
from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.outlier import TRIAL_PROMPT
from rvguard.gateway.settings import GatewaySettings

from ._support import KEYS, SECRET, auth, contract, gateway, read_trace, readyz_until, settings

ROOT = Path(__file__).resolve().parents[2]
TENANTS = {
    "assured": {"floor": 50, "deadline": 5.0, "tier": 0},  # every request here within the floor
    "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
}
BODY = {"model": "fake", "prompt": "hello there", "max_tokens": 4}


@contextlib.asynccontextmanager
async def _dead_engine() -> AsyncIterator[tuple[str, list[str]]]:
    """A server that lists its model and answers every completion 500 (vLLM's dead engine); the
    paths of the completions it was sent."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    hits: list[str] = []

    async def models(_: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    async def completion(request: Request) -> JSONResponse:
        hits.append(request.url.path)
        err = {"message": "EngineCore encountered an issue", "type": "InternalServerError", "code": 500}
        return JSONResponse({"error": err}, status_code=500)

    app = Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/completions", completion, methods=["POST"]),
            Route("/v1/chat/completions", completion, methods=["POST"]),
        ]
    )
    async with serving(app) as url:
        yield url, hits


def _contract() -> Any:
    return contract(tenants=TENANTS)


async def _ready(client: httpx.AsyncClient, url: str) -> None:
    for _ in range(200):
        if (await client.get(url + "/readyz")).status_code == 200:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the gateway never became ready")


async def _rotation_until(fleet: Any, want: list[bool], within: float = 10.0) -> list[bool]:
    """The engines' rotation, polled until it is ``want`` or ``within`` seconds pass (probes run
    on their own interval; a fixed sleep is too short on a loaded machine)."""
    for _ in range(int(within / 0.02)):
        now = [e.in_rotation for e in fleet.engines]
        if now == want:
            break
        await asyncio.sleep(0.02)
    return [e.in_rotation for e in fleet.engines]


async def _complete(client: httpx.AsyncClient, url: str) -> int:
    r = await client.post(url + "/v1/completions", json=BODY, headers=auth("sk-assured"))
    return r.status_code


async def test_a_fleet_stops_placing_on_an_engine_whose_completions_all_fail(tmp_path: Path) -> None:
    """Sequential requests over a dead engine and a healthy one: the dead one gets three (the
    ejection's count) and no more, whatever its /v1/models says at each probe since."""
    async with (
        _dead_engine() as (dead, hits),
        FakeUpstream() as healthy,
    ):
        s = GatewaySettings(
            upstream=(f"dead={dead}", f"ok={healthy.url}"),
            keys=KeysConfig(keys=KEYS, claim_secret=SECRET),
            trace=tmp_path / "t.jsonl",
            probe_interval=0.05,
            route_seed=3,
        )
        async with gateway(_contract(), s) as (_, url), httpx.AsyncClient(timeout=30) as client:
            await _ready(client, url)
            statuses = []
            for _ in range(24):
                statuses.append(await _complete(client, url))
                await asyncio.sleep(0.01)  # probes run between them
            metrics = (await client.get(url + "/metrics")).text
    assert len(hits) == 3, (len(hits), statuses)
    assert statuses.count(200) == 21 and healthy.served == 21, statuses
    assert re.search(r'^rvguard_engine_up\{engine="dead"\} 0\.0$', metrics, re.M)


def _declared_alert(rec: dict[str, Any]) -> None:
    """Valid against specs/trace.schema.json, every field one its alert branch declares."""
    schema = json.loads((ROOT / "specs" / "trace.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(rec)
    (branch,) = [b for b in schema["allOf"] if b["if"]["properties"]["kind"].get("const") == "alert"]
    assert set(rec) <= {"t", "kind"} | set(branch["then"]["properties"]), rec


async def test_ejection_and_return_are_traced_logged_and_counted_and_a_trial_brings_it_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rvguard.gateway")
    trace = tmp_path / "t.jsonl"
    async with FakeUpstream() as engine:
        s = settings(engine.url, trace, probe_interval=0.05, eject_for=0.3)
        async with gateway(_contract(), s) as (_, url), httpx.AsyncClient(timeout=30) as client:
            await _ready(client, url)
            engine.dead = True
            assert [await _complete(client, url) for _ in range(3)] == [502] * 3
            out = (await client.get(url + "/metrics")).text
            await asyncio.sleep(0.5)  # past eject_for: the trials (POST, max_tokens 1) fail too
            assert (await client.get(url + "/readyz")).status_code == 503
            served = engine.served
            engine.dead = False
            for _ in range(100):  # the next trial (the time out doubled: 0.6 s) succeeds
                if (await client.get(url + "/readyz")).status_code == 200:
                    break
                await asyncio.sleep(0.05)
            back = (await client.get(url + "/metrics")).text
            trials = [b for b in engine.bodies if b.get("prompt") == TRIAL_PROMPT]
            assert await _complete(client, url) == 200
    name = f"127.0.0.1:{engine.port}"
    assert re.search(rf'^rvguard_upstream_ejected\{{engine="{re.escape(name)}"\}} 1\.0$', out, re.M)
    assert re.search(rf'^rvguard_upstream_ejected\{{engine="{re.escape(name)}"\}} 0\.0$', back, re.M)
    assert re.search(rf'^rvguard_upstream_ejections_total\{{engine="{re.escape(name)}"\}} 1\.0$', back, re.M)
    assert served == 0 and len(trials) == 1  # back by the gateway's own trial, no client's request
    # the upstream's alerts; the fake answers in under a millisecond, so the watch may also say
    # service-low (below DR's lower bound L) for the last request, which is not what this test judges
    alerts = [r for r in read_trace(trace) if r["kind"] == "alert" and r["condition"].startswith("upstream-")]
    assert [a["condition"] for a in alerts] == ["upstream-ejected", "upstream-restored"], alerts
    ejected, restored = alerts
    assert ejected["engine"] == name and ejected["value"] == 3 and ejected["bound"] == 3
    assert "http 500" in ejected["detail"] and "EngineCore" in ejected["detail"]
    assert restored["detail"] == "trial: POST /v1/completions answered 200"
    for rec in alerts:
        _declared_alert(rec)
    warned = [r for r in caplog.records if getattr(r, "event", "") == "upstream_ejected"]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING and name in warned[0].getMessage()
    assert any(getattr(r, "event", "") == "upstream_still_ejected" for r in caplog.records)
    report = check_trace(str(trace), _contract())
    assert not report.bad_lines  # the checker reads the new conditions


async def test_a_request_that_succeeds_brings_it_back_at_once(tmp_path: Path) -> None:
    async with FakeUpstream() as engine:
        s = settings(engine.url, None, probe_interval=0.05, eject_after=2)
        async with gateway(_contract(), s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            await _ready(client, url)
            engine.dead = True
            assert [await _complete(client, url) for _ in range(2)] == [502, 502]
            assert (await client.get(url + "/readyz")).status_code == 503
            engine.dead = False
            assert await _complete(client, url) == 200  # forwarded all the same, and it answered
            assert (await client.get(url + "/readyz")).status_code == 200
            assert gw.readiness.ejected() == ""


async def test_client_errors_reset_the_count(tmp_path: Path) -> None:
    """Two 500s, a 4xx, two 500s: never three failures in a row, never ejected."""
    async with FakeUpstream() as engine:
        s = settings(engine.url, None, probe_interval=0.05)
        async with gateway(_contract(), s) as (_, url), httpx.AsyncClient(timeout=30) as client:
            await _ready(client, url)
            for prompt in ("500 a", "500 b", "400 c", "500 d", "500 e"):
                body = {**BODY, "prompt": prompt}
                await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
            assert (await client.get(url + "/readyz")).status_code == 200


async def test_the_health_path_finds_the_dead_engine_at_once_and_brings_it_back(tmp_path: Path) -> None:
    """``upstream_health="/health"`` (vLLM's): its 503 takes a fleet engine out with no request
    lost to it, and its 200 (after eject_for, for an ejected one) brings it back."""
    async with FakeUpstream() as a, FakeUpstream() as b:
        s = GatewaySettings(
            upstream=(f"a={a.url}", f"b={b.url}"),
            keys=KeysConfig(keys=KEYS, claim_secret=SECRET),
            probe_interval=0.05,
            upstream_health="/health",
            eject_for=0.2,
        )
        async with gateway(_contract(), s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            await _ready(client, url)
            a.dead = True
            assert gw.fleet is not None
            rotation = await _rotation_until(gw.fleet, [False, True])  # a probe's GET /health: 503
            assert rotation == [False, True]
            assert [await _complete(client, url) for _ in range(6)] == [200] * 6
            assert b.served == 6
            a.dead = False
            assert await _rotation_until(gw.fleet, [True, True]) == [True, True]


async def test_with_the_health_path_an_ejected_engine_returns_when_it_says_200(tmp_path: Path) -> None:
    """Ejected for failed requests while its /health says 200 (a fault /health does not see):
    back at the first probe past eject_for, not before."""
    async with FakeUpstream() as engine:
        s = settings(engine.url, None, probe_interval=0.05, upstream_health="/health", eject_for=0.4)
        async with gateway(_contract(), s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            await _ready(client, url)
            bodies = [{**BODY, "prompt": "500 x"}] * 3
            for body in bodies:
                await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
            assert (await client.get(url + "/readyz")).status_code == 503
            await asyncio.sleep(0.15)
            assert (await client.get(url + "/readyz")).status_code == 503  # /health's 200: too early
            assert (await readyz_until(client, url, 200)).status_code == 200
            assert gw.readiness.ejected() == ""


def test_the_settings_refuse_a_bad_health_path_or_ejection() -> None:
    for over in ({"upstream_health": "health"}, {"eject_after": -1}, {"eject_for": 0.0}):
        with pytest.raises(SpecError):
            settings("http://127.0.0.1:9", None, **over)
    assert settings("http://127.0.0.1:9", None, eject_after=0).outlier.after == 0


def test_serve_takes_the_health_path_and_the_ejection_settings() -> None:
    import argparse

    from rvguard.gateway.cli import _add_serve, _upstream_health

    p = argparse.ArgumentParser()
    _add_serve(p)
    args = p.parse_args(["spec.yaml", "--upstream", "http://127.0.0.1:9"])
    assert _upstream_health(args) == {"upstream_health": "/v1/models", "eject_after": 3, "eject_for": 10.0}
    args = p.parse_args(
        [
            "spec.yaml",
            "--upstream",
            "u",
            "--upstream-health",
            "/health",
            "--eject-after",
            "5",
            "--eject-for",
            "2",
        ]
    )
    assert _upstream_health(args) == {"upstream_health": "/health", "eject_after": 5, "eject_for": 2.0}


async def test_a_health_path_that_is_not_200_makes_the_probe_fail() -> None:
    from rvguard.gateway.outlier import healthy
    from rvguard.gateway.upstream import UpstreamDispatcher

    async with FakeUpstream() as engine:
        d = UpstreamDispatcher(engine.url, contract=_contract())
        try:
            await healthy(d, "/health")
            engine.dead = True
            with pytest.raises(DispatchError, match="GET /health answered 503"):
                await healthy(d, "/health")
        finally:
            await d.aclose()
