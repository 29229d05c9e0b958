"""Dispatchers, and VLLMDispatcher against a small OpenAI-compatible streaming server.

The server (asyncio streams, 127.0.0.1, an ephemeral port) records every JSON
body it receives and answers by the prompt: ``ok`` streams tokens with a
configured delay and a final usage chunk; ``500``/``429`` answer that status;
``reset`` aborts the connection; ``hang`` never answers (read timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from rvguard.enforce.dispatchers import (
    CallableDispatcher,
    DispatchError,
    MockDispatcher,
    Response,
    VLLMDispatcher,
    sse_data,
)
from rvguard.enforce.guard import Guard
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError
from rvguard.events import Arrive, Event

from ._harness import make_contract


@dataclass
class Server:
    url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.01
    tokens: int = 4
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    keep_alive: bool = False  # chunked answers on a connection kept open (as uvicorn does)
    connections: int = 0


def _sse(obj: object) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


# Streams that go wrong after a 200: a garbled chunk, an error chunk (vLLM's two forms), no [DONE].
_BROKEN: dict[str, bytes] = {
    "garbled": b"data: {not json\n\n",
    "not-an-object": b"data: [1, 2]\n\n",
    "error": _sse({"error": {"object": "error", "message": "out of KV cache", "code": 503}}),
    "error-flat": _sse({"object": "error", "message": "bad prompt", "type": "BadRequestError", "code": 400}),
    "truncated": b"",
}


async def _serve(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    server.connections += 1
    while await _serve_one(server, reader, writer) and server.keep_alive:
        pass
    writer.close()


async def _serve_one(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Answer one request; False when the connection is done."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return False
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    body = json.loads(await reader.readexactly(length))
    server.bodies.append(body)
    mode = body.get("prompt") or body["messages"][-1]["content"]
    if mode == "reset":
        writer.transport.abort()
        return False
    if mode == "hang":
        await server.stop.wait()
        return False
    if mode in ("500", "429"):
        msg = b'{"error": "no"}'
        close = "" if server.keep_alive else "Connection: close\r\n"
        writer.write(f"HTTP/1.1 {mode} X\r\nContent-Length: {len(msg)}\r\n{close}\r\n".encode() + msg)
        await writer.drain()
        return True
    framing = "Transfer-Encoding: chunked" if server.keep_alive else "Connection: close"
    writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{framing}\r\n\r\n".encode())

    async def send(data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n" if server.keep_alive else data)
        await writer.drain()

    chat = "messages" in body
    for _ in range(min(server.tokens, body["max_tokens"])):
        await asyncio.sleep(server.delay)
        choice = {"delta": {"content": "tok "}} if chat else {"text": "tok "}
        await send(_sse({"choices": [choice]}))
    if mode in _BROKEN:
        if _BROKEN[mode]:
            await send(_BROKEN[mode])
        if mode != "truncated":
            await send(b"data: [DONE]\n\n")
    else:
        usage = {"prompt_tokens": 3, "completion_tokens": min(server.tokens, body["max_tokens"])}
        await send(_sse({"choices": [], "usage": usage}) + b"data: [DONE]\n\n")
    if server.keep_alive:
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    return True


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server(url="")
    srv = await asyncio.start_server(lambda r, w: _serve(state, r, w), "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    state.url = f"http://127.0.0.1:{port}"
    async with srv:
        yield state
        state.stop.set()
        await asyncio.sleep(0.01)
        srv.close()


def vllm(server: Server, **kw: Any) -> VLLMDispatcher:
    contract = make_contract(output_cap=16)
    return VLLMDispatcher(server.url, model="m", contract=contract, **kw)


async def test_streaming_completion_sends_the_cap_tier_and_times(server: Server) -> None:
    d = vllm(server)
    try:
        resp = await d.dispatch(Request("r", "opp", 0.0, max_tokens=16, payload={"prompt": "ok"}))
    finally:
        await d.aclose()
    body = server.bodies[0]
    assert body["max_tokens"] == 16  # as the Guard capped it
    assert body["priority"] == 1  # the true tier of "opp"
    assert body["stream_options"] == {"include_usage": True}
    assert (resp.text, resp.output_tokens, resp.prompt_tokens) == ("tok " * 4, 4, 3)
    assert resp.first_token is not None
    assert resp.total is not None
    assert 0.005 < resp.first_token < resp.total
    assert resp.total >= 4 * server.delay


async def test_chat_completions(server: Server) -> None:
    d = vllm(server, endpoint="chat")
    msgs = [{"role": "user", "content": "ok"}]
    try:
        resp = await d.dispatch(Request("r", "assured", 0.0, max_tokens=2, payload={"messages": msgs}))
    finally:
        await d.aclose()
    assert server.bodies[0]["priority"] == 0
    assert server.bodies[0]["messages"] == msgs
    assert (resp.text, resp.output_tokens) == ("tok tok ", 2)


@pytest.mark.parametrize(("mode", "status"), [("500", 500), ("429", 429), ("reset", 502), ("hang", 504)])
async def test_failures_raise_with_status(server: Server, mode: str, status: int) -> None:
    d = vllm(server, read_timeout=0.2)
    try:
        with pytest.raises(DispatchError) as err:
            await d.dispatch(Request("r", "opp", 0.0, max_tokens=4, payload={"prompt": mode}))
    finally:
        await d.aclose()
    assert err.value.status_hint == status


async def test_guard_over_vllm_turns_failures_into_fail_events(server: Server) -> None:
    contract = make_contract(slots=2, floor=10, output_cap=16)
    d = VLLMDispatcher(server.url, model="m", contract=contract, read_timeout=0.2)
    trace: list[Event] = []
    async with Guard(contract, d, sinks=[trace.append]) as guard:
        outs = await asyncio.gather(
            *(guard.submit(Request(m, "assured", 0.0, payload={"prompt": m})) for m in ("ok", "500", "reset"))
        )
    await d.aclose()
    assert [o.status for o in outs] == ["completed", "failed", "failed"]
    assert outs[1].reason.startswith("DispatchError: http 500")
    assert guard.core.in_flight == 0


@pytest.mark.parametrize("asked", [None, 3, 500])
async def test_the_engine_is_sent_the_cap_the_core_traced(server: Server, asked: int | None) -> None:
    """The cap is computed once, by the core's facts: the dispatcher computes none of its own. Before,
    a dispatcher whose contract capped at 4 sent 4 while the trace's arrive said 16."""
    contract = make_contract(floor=10, output_cap=16)
    d = VLLMDispatcher(server.url, model="m", contract=make_contract(output_cap=4))
    trace: list[Event] = []
    async with Guard(contract, d, sinks=[trace.append]) as guard:
        out = await guard.submit(Request("r", "assured", 0.0, max_tokens=asked, payload={"prompt": "ok"}))
    await d.aclose()
    decided = guard.core.facts("assured", None, asked).capped_tokens
    arrive = next(e for e in trace if isinstance(e, Arrive))
    assert out.status == "completed" and decided == (16 if asked is None or asked > 16 else asked)
    assert [b["max_tokens"] for b in server.bodies] == [decided] and arrive.max_tokens == decided


async def test_a_request_no_guard_capped_is_refused_before_any_call(server: Server) -> None:
    d = vllm(server)
    try:
        with pytest.raises(EnforcementError, match="no output cap") as err:
            await d.dispatch(Request("r", "opp", 0.0, payload={"prompt": "ok"}))
    finally:
        await d.aclose()
    assert err.value.status_hint == 500 and server.bodies == []


def test_bad_endpoint_is_refused() -> None:
    with pytest.raises(ValueError, match="endpoint"):
        VLLMDispatcher("http://x", model="m", contract=make_contract(), endpoint="embed")  # type: ignore[arg-type]


async def test_mock_and_callable_dispatchers_pass_exceptions_through() -> None:
    sync = MockDispatcher(lambda r: Response(text=r.rid))
    assert (await sync.dispatch(Request("a", "opp", 0.0))).text == "a"
    assert len(sync.calls) == 1

    async def boom(r: Request) -> Response:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        await CallableDispatcher(boom).dispatch(Request("b", "opp", 0.0))
    with pytest.raises(ConnectionError):
        await MockDispatcher(boom).dispatch(Request("b", "opp", 0.0))


async def test_issue_one_connection_per_request(server: Server) -> None:
    """A kept-alive connection can be closed under a request (encode/httpcore#1110): never reuse one."""
    server.keep_alive = True
    d = vllm(server)
    try:
        for i, mode in enumerate(["429", "500", "ok"]):  # an error answer is read whole: reusable
            with contextlib.suppress(DispatchError):
                await d.dispatch(Request(f"r{i}", "opp", 0.0, max_tokens=4, payload={"prompt": mode}))
    finally:
        await d.aclose()
    assert server.connections == 3


def test_fresh_connections_is_one_helper_for_enforce_and_gateway() -> None:
    from rvguard.enforce import dispatchers as dispatch
    from rvguard.gateway import upstream

    assert upstream.fresh_connections is dispatch.fresh_connections
    limits = dispatch.fresh_connections()
    assert (limits.max_connections, limits.max_keepalive_connections) == (None, 0)


@pytest.mark.parametrize(
    ("mode", "status", "text"),
    [
        ("garbled", 502, "malformed chunk"),
        ("not-an-object", 502, "malformed chunk"),
        ("error", 503, "out of KV cache"),
        ("error-flat", 400, "bad prompt"),
        ("truncated", 502, "before [DONE]"),
    ],
)
async def test_issue_a_broken_stream_after_200_fails_the_request(
    server: Server, mode: str, status: int, text: str
) -> None:
    d = vllm(server)
    try:
        with pytest.raises(DispatchError, match=re.escape(text)) as err:
            await d.dispatch(Request("r", "opp", 0.0, max_tokens=4, payload={"prompt": mode}))
    finally:
        await d.aclose()
    assert err.value.status_hint == status


class _Pieces:
    """A response whose text arrives in the given pieces (for `sse_data`)."""

    headers: ClassVar[dict[str, str]] = {"content-type": "text/event-stream"}

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces

    async def aiter_text(self) -> AsyncIterator[str]:
        for piece in self.pieces:
            yield piece


async def test_sse_data_splits_lines_as_the_spec_says() -> None:
    """U+2028 and U+0085 stay in a line; LF, CR LF and CR end one; pieces may cut anywhere;
    several data: lines of one event are joined with LF; comments and empty events are skipped."""
    body = 'data: {"t": "a\u2028b\x85c"}\r\n\r\ndata: [DO', "NE]\n\n: hi\n\nda", "ta: x\rdata: y\n\n"
    got = [data async for data in sse_data(_Pieces(*body))]
    assert got == ['{"t": "a\u2028b\x85c"}', "[DONE]", "x\ny"]
