"""Surfaces not tried before: the SDK's own retry against a redline that stays below its hard
floor, and routing when one engine's /metrics lies. Fake upstreams only (rvguard.gateway.fake)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import openai

from rvguard.enforce.redline import RedlineConfig, ResourceLimit
from rvguard.gateway.fake import FakeUpstream

from ._support import contract, gateway, read_trace, settings, terminal_counts

REDLINE = RedlineConfig((ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0)
LONG = {"model": "fake", "prompt": "long answer", "max_tokens": 60}


async def _until(predicate, what: str, tries: int = 1000) -> None:  # type: ignore[no-untyped-def]
    for _ in range(tries):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


async def test_the_sdk_retry_of_a_preemption_is_held_not_preempted_again(tmp_path: Path) -> None:
    """503 + x-should-retry: true, the SDK retries after retry-after-ms; with the engine still past
    its hard floor the retry is admitted as surplus and held by the redline (never dispatched, so
    never preempted again): one retry, not a storm, and served once the cache frees up."""
    import httpx

    trace = tmp_path / "t.jsonl"
    seen: list[tuple[int, str | None]] = []  # each answer the SDK got: status, x-should-retry

    async def answered(r: httpx.Response) -> None:
        seen.append((r.status_code, r.headers.get("x-should-retry")))

    async with FakeUpstream(token_delay=0.03, metrics=True) as up:
        s = settings(
            up.url,
            trace,
            redline=REDLINE,
            headroom_url=up.url + "/metrics",
            headroom_interval=0.02,
            retry_after=0.05,
        )
        async with (
            gateway(contract(), s) as (gw, url),
            httpx.AsyncClient(event_hooks={"response": [answered]}, timeout=30) as http,
            openai.AsyncOpenAI(
                base_url=url + "/v1", api_key="sk-opp", max_retries=5, timeout=30, http_client=http
            ) as sdk,
        ):
            call = asyncio.ensure_future(sdk.completions.create(**LONG))
            await _until(lambda: bool(gw.guard.running()), "the surplus request to run")
            up.kv_usage = 0.99  # headroom 0.01: below the hard floor, and it stays there
            await _until(lambda: gw.guard.core.held == 1, "the SDK's retry to arrive and be held")
            await asyncio.sleep(1.0)  # a second below the floor: 50 retry-after periods
            assert gw.guard.core.held == 1 and not call.done()
            up.kv_usage = 0.0
            answer = await asyncio.wait_for(call, 20.0)
    assert answer.choices[0].text.startswith("t0")
    assert seen == [(503, "true"), (200, None)]  # the preemption said "retry"; the SDK did, once
    events = read_trace(trace)
    arrivals = [e for e in events if e["kind"] == "arrive"]
    assert len(arrivals) == 2  # the request and one retry: no storm
    assert [e["reason"] for e in events if e["kind"] == "fail"] == ["preempted"]
    assert [e["rid"] for e in events if e["kind"] == "demote"] == [arrivals[1]["rid"]]
    assert set(terminal_counts([e for e in events if "rid" in e]).values()) == {1}


async def test_an_engine_whose_metrics_lie_gets_no_more_than_its_slots_and_is_found_out(
    tmp_path: Path,
) -> None:
    """Three engines, C_e = 2 each; e0's /metrics claims an idle engine (KV 0 %, 0 running) whatever
    it holds, so the router's view prefers it: placement still never exceeds its C_e (the view is
    capped by the gateway's own count), and two scrapes that report fewer requests than the gateway
    has on it find it out (its view is then its free slots)."""
    from rvguard.gateway.config import KeysConfig
    from rvguard.gateway.settings import GatewaySettings

    from ._support import KEYS, SECRET, auth

    ups = [FakeUpstream(token_delay=0.02, metrics=True) for _ in range(3)]
    for up in ups:
        await up.start()
    liar, honest = ups[0], ups[1:]
    liar.kv_usage, liar.running_reported = 0.0, 0
    for up in honest:
        up.kv_usage = 0.6
    engines = tuple(f"e{i}={u.url}" for i, u in enumerate(ups))
    s = GatewaySettings(
        upstream=engines,
        keys=KeysConfig(keys=KEYS, claim_secret=SECRET),
        trace=tmp_path / "t.jsonl",
        route_seed=11,
        telemetry_interval=0.05,
    )
    body = {"model": "fake", "prompt": "hello there", "max_tokens": 20}
    try:
        import httpx

        async with gateway(contract(slots=2), s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            assert gw.fleet is not None
            await _until(lambda: all(e.telemetry == "metrics" for e in gw.fleet.engines), "first scrapes")
            answers = await asyncio.gather(
                *(client.post(url + "/v1/completions", json=body, headers=auth("sk-opp")) for _ in range(24))
            )
            found = gw.fleet.engines[0]
            assert all(a.status_code == 200 for a in answers)
            assert found.liar and found.telemetry == "slots"
            assert not any(e.liar for e in gw.fleet.engines[1:])
    finally:
        for up in ups:
            await up.close()
    assert all(u.max_active <= 2 for u in ups)  # C_e, the liar's too
    events = read_trace(tmp_path / "t.jsonl")
    assert set(terminal_counts([e for e in events if "rid" in e]).values()) == {1}
