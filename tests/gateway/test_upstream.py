"""UpstreamDispatcher: forced fields, relayed chunks, failures as DispatchError with a status."""

from __future__ import annotations

import asyncio

import pytest

from rvguard.enforce.dispatchers import DispatchError, Stream
from rvguard.enforce.request import Request
from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.upstream import END, Channel, Chunk, UpstreamDispatcher, forced_body

from ._support import contract


def test_forced_body_overrides_what_the_floor_depends_on() -> None:
    client = {
        "prompt": "p",
        "max_tokens": 9999,
        "max_completion_tokens": 5,
        "priority": -5,
        "n": 3,
        "best_of": 4,
    }
    client |= {"stream": False, "stream_options": {"x": 1}, "temperature": 0.2}
    out = forced_body(client, max_tokens=16, priority=1)
    assert out == {
        "prompt": "p",
        "temperature": 0.2,
        "max_tokens": 16,
        "priority": 1,
        "n": 1,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert client["max_tokens"] == 9999  # the client's dict is not changed


def req(prompt: str, tenant: str = "opportunistic", max_tokens: int | None = 4) -> Request:
    body = {"prompt": prompt, "max_tokens": max_tokens}
    return Request(
        "r1", tenant, 0.0, max_tokens=max_tokens, payload={"endpoint": "completions", "body": body}
    )


async def test_relays_chunks_and_builds_the_response() -> None:
    async with FakeUpstream() as up:
        d = UpstreamDispatcher(up.url, contract=contract())
        ch, counts = Channel(), []
        stream = Stream(ch.chunk, counts.append)
        resp = await d.dispatch(req("hi", tenant="assured", max_tokens=96), stream=stream)  # capped
        await d.aclose()
    assert up.bodies[0]["max_tokens"] == 96 and up.bodies[0]["priority"] == 0
    assert resp.output_tokens == 96 and resp.text.startswith("t0 t1 ")
    assert resp.raw["choices"][0]["finish_reason"] == "length" and resp.raw["id"].startswith("fake-")
    assert resp.first_token is not None and resp.total is not None and resp.total >= resp.first_token
    items = []
    while not ch._q.empty():
        items.append(await ch.get())
    assert all(isinstance(i, Chunk) for i in items) and len(items) == 97
    assert [i.usage_only for i in items if isinstance(i, Chunk)].count(True) == 1
    assert counts == list(range(1, 97))  # the tokens generated so far, after each chunk with one
    ch.put(END)
    assert await ch.get() is END


async def test_streams_share_a_kept_connection_and_other_calls_open_their_own() -> None:
    """Streamed dispatches (the lean reader) reuse the connection the last one left (`lean.Connections`);
    the httpx calls (``/v1/models``) keep none: their pool can hand out a connection it is closing."""
    async with FakeUpstream() as up:
        d = UpstreamDispatcher(up.url, contract=contract())
        for _ in range(3):
            await d.dispatch(req("hi"))
            assert (await d.get_json("/v1/models"))[0] == 200
            await asyncio.sleep(0.01)  # the stream's body ends in the background: then it is kept
        await d.aclose()
    assert up.served == 3 and up.connections == 1 + 3


async def test_a_stream_cut_by_its_client_closes_its_connection_and_the_engine_sees_the_abort() -> None:
    async with FakeUpstream(token_delay=0.02) as up:
        d = UpstreamDispatcher(up.url, contract=contract())
        task = asyncio.ensure_future(d.dispatch(req("hi", max_tokens=50)))
        while up.active == 0:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):
            if up.aborted:
                break
            await asyncio.sleep(0.01)
        await d.dispatch(req("hi"))
        await d.aclose()
    assert up.aborted == 1 and up.connections == 2


@pytest.mark.parametrize(
    ("prompt", "status"), [("reset", 502), ("500", 500), ("400", 400), ("midfail", 502), ("miderror", 500)]
)
async def test_failures_carry_a_status(prompt: str, status: int) -> None:
    async with FakeUpstream() as up:
        d = UpstreamDispatcher(up.url, contract=contract())
        with pytest.raises(DispatchError) as info:
            await d.dispatch(req(prompt))
        await d.aclose()
    assert info.value.status_hint == status


async def test_silent_upstream_is_504_and_refused_connection_502() -> None:
    async with FakeUpstream() as up:
        d = UpstreamDispatcher(up.url, contract=contract(), read_timeout=0.2)
        with pytest.raises(DispatchError) as hang:
            await d.dispatch(req("hang"))
        status, models = await d.get_json("/v1/models")
        await up.kill()
        with pytest.raises(DispatchError) as refused:
            await d.dispatch(req("hi"))
        with pytest.raises(DispatchError):
            await d.get_json("/v1/models")
        await d.aclose()
    assert hang.value.status_hint == 504 and refused.value.status_hint == 502
    assert status == 200 and models["data"][0]["id"] == "fake"


async def test_unicode_line_separators_inside_chunks_do_not_cut_them() -> None:
    """U+2028 / U+0085 raw in a chunk's JSON: SSE splits at LF only (httpx's aiter_lines cut it)."""
    async with FakeUpstream() as up:
        d = UpstreamDispatcher(up.url, contract=contract())
        resp = await d.dispatch(req("linesep", max_tokens=5))
        await d.aclose()
    assert resp.output_tokens == 5 and resp.text == "".join(f"t{i}\u2028\x85 " for i in range(5))
