"""A preempted request through the gateway: 503 + Retry-After, or an SSE error mid-stream; never a hang.

Against the fake upstream (which counts a stream its client closed as
``aborted``, as vLLM aborts the sequence) with httpx and the official `openai` SDK.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import openai
import pytest
from openai.types import Completion

from rvguard.errors import EnforcementError
from rvguard.gateway.app import Gateway
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, read_trace, settings, terminal_counts

LONG = {"model": "fake", "prompt": "long answer", "max_tokens": 90}


async def _running(gw: Gateway) -> str:
    for _ in range(400):
        if gw.guard.running():
            return gw.guard.running()[0]
        await asyncio.sleep(0.005)
    raise AssertionError("nothing ever ran")


async def _wait_aborted(up: FakeUpstream) -> None:
    for _ in range(400):
        if up.aborted:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the upstream never saw the stream closed")


def _preempted_once(trace: Path) -> list[dict[str, object]]:
    events = read_trace(trace)
    fails = [e for e in events if e["kind"] == "fail"]
    assert [f["reason"] for f in fails] == ["preempted"]
    assert set(terminal_counts(events).values()) == {1}
    return events


async def _read(stream: openai.AsyncStream[Completion], gw: Gateway, got: list[str]) -> None:
    """Read the SDK's stream into ``got``, preempting the request after two chunks."""
    async for chunk in stream:
        got.append(chunk.choices[0].text)
        if len(got) == 2:
            gw.guard.preempt(await _running(gw))


async def test_a_non_streamed_client_gets_503_with_retry_after(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    async with (
        FakeUpstream(token_delay=0.05) as up,
        gateway(contract(), settings(up.url, trace, retry_after=2.5)) as (gw, url),
        httpx.AsyncClient(timeout=10) as client,
    ):
        call = asyncio.ensure_future(client.post(url + "/v1/completions", json=LONG, headers=auth("sk-opp")))
        gw.guard.preempt(await _running(gw), grace=0.05)
        resp = await asyncio.wait_for(call, 5.0)
        await _wait_aborted(up)
    assert resp.status_code == 503
    assert (resp.headers["retry-after-ms"], resp.headers["retry-after"]) == ("2500", "3")
    assert resp.headers["x-should-retry"] == "true"
    assert resp.json()["error"]["code"] == "preempted"
    _preempted_once(trace)


async def test_a_streaming_client_gets_an_error_event_mid_stream(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    body = {**LONG, "stream": True}
    lines: list[str] = []
    async with (
        FakeUpstream(token_delay=0.05) as up,
        gateway(contract(), settings(up.url, trace)) as (gw, url),
        httpx.AsyncClient(timeout=10) as client,
        client.stream("POST", url + "/v1/completions", json=body, headers=auth("sk-opp")) as resp,
    ):
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                lines.append(line[6:])
            if len(lines) == 2:
                gw.guard.preempt(resp.headers["x-rvguard-rid"])
        await _wait_aborted(up)
    assert lines[-1] != "[DONE]"
    assert json.loads(lines[-1])["error"]["code"] == "preempted"
    assert all("choices" in json.loads(x) for x in lines[:-1])
    _preempted_once(trace)


async def test_the_openai_sdk_raises_mid_stream_and_retries_a_non_streamed_one(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    async with (
        FakeUpstream(token_delay=0.02) as up,
        gateway(contract(), settings(up.url, trace, retry_after=0.05)) as (gw, url),
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-opp", max_retries=0) as once,
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-opp", max_retries=2) as retrying,
    ):
        got: list[str] = []
        stream = await once.completions.create(**LONG, stream=True)
        with pytest.raises(openai.APIError, match="preempted"):
            await _read(stream, gw, got)
        call = asyncio.ensure_future(retrying.completions.create(**{**LONG, "max_tokens": 20}))
        gw.guard.preempt(await _running(gw))
        answer = await asyncio.wait_for(call, 10.0)  # the SDK's own retry, after retry-after-ms
    assert got == ["t0 ", "t1 "]
    assert answer.choices[0].text.startswith("t0 t1")
    events = read_trace(trace)
    assert [e["reason"] for e in events if e["kind"] == "fail"] == ["preempted", "preempted"]
    assert sum(e["kind"] == "complete" for e in events) == 1
    assert set(terminal_counts(events).values()) == {1}


async def test_an_assured_request_is_refused_preemption(tmp_path: Path) -> None:
    body = {**LONG, "max_tokens": 10}
    async with (
        FakeUpstream(token_delay=0.01) as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (gw, url),
        httpx.AsyncClient(timeout=10) as client,
    ):
        call = asyncio.ensure_future(
            client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        )
        with pytest.raises(EnforcementError, match="admitted on the floor"):
            gw.guard.preempt(await _running(gw))
        resp = await asyncio.wait_for(call, 5.0)
    assert resp.status_code == 200
