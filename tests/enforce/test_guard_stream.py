"""Streaming is part of the dispatcher protocol (issue 24): the Guard hands a `StreamingDispatcher`
one `Stream` per dispatch — the caller's chunk callback and relief's S counter — so no one writes a
channel or a progress callback into the dispatcher from outside."""

from __future__ import annotations

import asyncio

import pytest

from rvguard.clock import ManualClock
from rvguard.enforce.dispatchers import (
    CallableDispatcher,
    MockDispatcher,
    Response,
    Stream,
    VLLMDispatcher,
    is_streaming,
)
from rvguard.enforce.eviction import EvictionConfig
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.headroom import CallableHeadroomSource
from rvguard.enforce.redline import RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError
from rvguard.events import Event
from rvguard.gateway.upstream import UpstreamDispatcher

from ._harness import make_contract
from .test_pressure import _until


class _Streamer:
    """Streams three one-token chunks, telling the stream it is given; holds until ``release``."""

    def __init__(self) -> None:
        self.streams: dict[str, Stream | None] = {}
        self.release = asyncio.Event()
        self.release.set()

    async def dispatch(self, request: Request, *, stream: Stream | None = None) -> Response:
        self.streams[request.rid] = stream
        for i in range(3):
            await asyncio.sleep(0)
            if stream is not None and stream.tokens is not None:
                stream.tokens(i + 1)
            if stream is not None and stream.chunk is not None:
                stream.chunk(f'{{"rid": "{request.rid}", "i": {i}}}', False)
        await self.release.wait()
        return Response(text="abc", output_tokens=3)


class _Positional:
    async def dispatch(self, request: Request, stream: Stream | None = None) -> Response:
        return Response()


async def _serve(request: Request) -> Response:
    return Response()


def test_a_streaming_dispatcher_is_told_by_its_signature() -> None:
    c = make_contract()
    assert is_streaming(_Streamer()) and is_streaming(UpstreamDispatcher("http://127.0.0.1:9", contract=c))
    assert not is_streaming(MockDispatcher(lambda r: Response()))
    assert not is_streaming(CallableDispatcher(_serve))
    assert not is_streaming(VLLMDispatcher("http://127.0.0.1:9", model="m", contract=c))
    assert not is_streaming(_Positional())  # ``stream`` must be keyword-only


async def test_each_dispatch_tells_its_own_caller_its_chunks() -> None:
    d, trace = _Streamer(), []
    got: dict[str, list[tuple[str, bool]]] = {"a": [], "b": []}
    async with Guard(make_contract(slots=4, floor=4), d, sinks=[trace.append]) as guard:
        outs = await asyncio.gather(
            *(
                guard.submit(Request(rid, "assured", 0.0), on_chunk=lambda *c, rid=rid: got[rid].append(c))
                for rid in got
            ),
            guard.submit(Request("c", "assured", 0.0)),
        )
    assert [o.status for o in outs] == ["completed"] * 3
    for rid, chunks in got.items():
        assert chunks == [(f'{{"rid": "{rid}", "i": {i}}}', False) for i in range(3)]
    assert d.streams["c"] is None  # nobody reads its stream (and no relief counts S): the request alone
    stream = d.streams["a"]
    assert stream is not None and stream.tokens is None  # no relief: nothing counts the tokens


async def test_a_chunk_reader_needs_a_dispatcher_that_streams() -> None:
    trace: list[Event] = []
    async with Guard(make_contract(), MockDispatcher(lambda r: Response()), sinks=[trace.append]) as guard:
        with pytest.raises(EnforcementError, match="StreamingDispatcher"):
            await guard.submit(Request("a", "assured", 0.0), on_chunk=lambda data, usage: None)
    assert trace == [] and guard.statistics().submitted == 0


async def test_relief_counts_s_from_the_stream_of_every_request_streamed_or_not() -> None:
    """Before, the gateway wrote ``progress`` into its dispatcher; the Guard now hands the counter
    to each dispatch, whether or not the client reads the chunks."""
    d, clock, trace = _Streamer(), ManualClock(), []
    d.release.clear()
    redline = RedlineConfig((ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0)
    config = GuardConfig(
        redline=redline, headroom_interval=0.005, eviction=EvictionConfig(k=1, capacity=100, target=0.4)
    )
    source = CallableHeadroomSource(lambda: {"kv_cache": 0.9}, clock)
    guard = Guard(
        make_contract(slots=2, floor=1), d, sinks=[trace.append], clock=clock, headroom=source, config=config
    )
    async with guard:
        sub = asyncio.ensure_future(guard.submit(Request("o", "opp", 0.0, prompt_tokens=7)))
        loop = guard.headroom
        assert loop is not None and loop.emergency is not None
        await _until(lambda: loop.emergency is not None and loop.emergency.candidate("o").generated == 3, "S")
        assert loop.emergency.candidate("o").prompt_tokens == 7
        stream = d.streams["o"]
        assert stream is not None and stream.chunk is None  # the client reads no chunk; relief counts
        d.release.set()
        assert (await sub).status == "completed"
