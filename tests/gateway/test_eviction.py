"""Emergency eviction through the gateway (the fake upstream's vLLM gauges): past the hard floor the
planner evicts the running surplus request with the largest state, counted from the tokens streamed
so far; its client gets the retry signal (an SSE error event mid-stream, or 503 + Retry-After), the
trace shows ``evict`` (reason ``emergency``) then ``fail(preempted)``, and /metrics counts both the
eviction and the deadline warning of a relief that cannot reach its target."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rvguard.enforce.eviction import EvictionConfig
from rvguard.enforce.redline import RedlineConfig, ResourceLimit
from rvguard.errors import SpecError
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, read_trace, settings, terminal_counts

REDLINE = RedlineConfig((ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0)
LONG = {"model": "fake", "prompt": "long answer", "max_tokens": 90}


async def _until(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(800):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def _settings(up: FakeUpstream, trace: Path, eviction: EvictionConfig):  # type: ignore[no-untyped-def]
    return settings(
        up.url,
        trace,
        redline=REDLINE,
        headroom_url=up.url + "/metrics",
        headroom_interval=0.02,
        eviction=eviction,
        retry_after=2.0,
    )


def _evicted_once(trace: Path) -> dict[str, object]:
    events = read_trace(trace)
    evicts = [e for e in events if e["kind"] == "evict"]
    assert len(evicts) == 1 and evicts[0]["reason"] == "emergency"
    rid = evicts[0]["rid"]
    kinds = [e["kind"] for e in events if e.get("rid") == rid]
    assert kinds[-2:] == ["evict", "fail"]
    assert next(e for e in events if e["kind"] == "fail")["reason"] == "preempted"
    assert set(terminal_counts([e for e in events if "rid" in e]).values()) == {1}
    return evicts[0]


async def test_a_streaming_client_sees_one_stream_end_in_the_error_event(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    lines: list[str] = []
    config = EvictionConfig(k=1, capacity=1000, target=0.9)  # one request cannot reach it: a warning
    async with (
        FakeUpstream(token_delay=0.03, metrics=True) as up,
        gateway(contract(), _settings(up, trace, config)) as (gw, url),
        httpx.AsyncClient(timeout=30) as client,
    ):
        body = {**LONG, "stream": True}
        async with client.stream("POST", url + "/v1/completions", json=body, headers=auth("sk-opp")) as resp:
            assert resp.status_code == 200
            async for line in resp.aiter_lines():
                if line.startswith("data: "):
                    lines.append(line[6:])
                if len(lines) == 5:
                    up.kv_usage = 0.99  # headroom 0.01: below the hard floor
        text = (await client.get(url + "/metrics")).text
        loop = gw.guard.headroom
        assert loop is not None and loop.emergency is not None and loop.emergency.evicted == 1
    assert json.loads(lines[-1])["error"]["code"] == "preempted"
    assert all("choices" in json.loads(x) for x in lines[:-1])
    evict = _evicted_once(trace)
    assert isinstance(evict["state"], int) and evict["state"] >= 5  # the tokens streamed count in S
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert [s.value for s in fams["rvguard_evictions"].samples if s.name.endswith("_total")] == [1.0]
    warnings = fams["rvguard_eviction_deadline_warnings"].samples[0].value
    assert warnings >= 1.0


async def test_a_non_streamed_client_gets_503_with_retry_after(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    config = EvictionConfig(k=2, capacity=100, target=0.3)
    async with (
        FakeUpstream(token_delay=0.03, metrics=True) as up,
        gateway(contract(), _settings(up, trace, config)) as (gw, url),
        httpx.AsyncClient(timeout=30) as client,
    ):
        call = asyncio.ensure_future(client.post(url + "/v1/completions", json=LONG, headers=auth("sk-opp")))
        await _until(lambda: bool(gw.guard.running()), "the surplus request to run")
        await asyncio.sleep(0.1)
        up.kv_usage = 0.99
        resp = await asyncio.wait_for(call, 10.0)
        loop = gw.guard.headroom
        assert loop is not None and loop.emergency is not None and loop.preempted == 0
    assert resp.status_code == 503 and resp.headers["retry-after"] == "2"
    assert resp.json()["error"]["code"] == "preempted"
    _evicted_once(trace)


def test_serve_reads_the_eviction_block_and_needs_headroom() -> None:
    import argparse

    from rvguard.gateway.cli import _headroom

    block = {"staleness": 5.0, "resources": {"kv_cache": {"h_min": 0.2, "hard_floor": 0.05}}}
    c = contract(headroom=block, eviction={"k": 2, "capacity": 4096, "target": 0.3, "link_rate": 1e4})
    args = argparse.Namespace(headroom="", upstream=["http://127.0.0.1:8000/"], headroom_interval=0.5)
    ev = _headroom(args, c)["eviction"]
    assert (ev.k, ev.capacity, ev.target, ev.link_rate) == (2, 4096, 0.3, 1e4)
    assert _headroom(args, contract(headroom=block, eviction={"k": 2}))["eviction"] is None  # EV alone
    with pytest.raises(SpecError, match="needs headroom telemetry"):
        settings("http://127.0.0.1:9", None, eviction=EvictionConfig(1, 100, 0.5))


def test_a_chunks_tokens_are_its_ids_or_one_per_choice_with_text() -> None:
    from rvguard.gateway.upstream import _tokens

    assert _tokens({"choices": [{"text": "a", "token_ids": [1, 2, 3]}]}) == 3
    assert _tokens({"choices": [{"text": "a"}, {"text": ""}]}) == 1
    assert _tokens({"choices": [{"delta": {"content": "x"}}]}) == 1
    assert _tokens({"choices": [], "usage": {}}) == 0
