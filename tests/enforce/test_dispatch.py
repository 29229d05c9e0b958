"""Dispatchers, and VLLMDispatcher against a small OpenAI-compatible streaming server.

The server (asyncio streams, 127.0.0.1, an ephemeral port) records every JSON
body it receives and answers by the prompt: ``ok`` streams tokens with a
configured delay and a final usage chunk; ``500``/``429`` answer that status;
``reset`` aborts the connection; ``hang`` never answers (read timeout).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from rvguard.enforce.dispatch import (
    CallableDispatcher,
    DispatchError,
    MockDispatcher,
    Response,
    VLLMDispatcher,
)
from rvguard.enforce.guard import Guard
from rvguard.enforce.request import Request
from rvguard.events import Event

from ._harness import make_contract


@dataclass
class Server:
    url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.01
    tokens: int = 4
    stop: asyncio.Event = field(default_factory=asyncio.Event)


def _sse(obj: object) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


async def _serve(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    body = json.loads(await reader.readexactly(length))
    server.bodies.append(body)
    mode = body.get("prompt") or body["messages"][-1]["content"]
    if mode == "reset":
        writer.transport.abort()
        return
    if mode == "hang":
        await server.stop.wait()
        writer.close()
        return
    if mode in ("500", "429"):
        msg = b'{"error": "no"}'
        writer.write(
            f"HTTP/1.1 {mode} X\r\nContent-Length: {len(msg)}\r\nConnection: close\r\n\r\n".encode() + msg
        )
        await writer.drain()
        writer.close()
        return
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
    chat = "messages" in body
    for _ in range(min(server.tokens, body["max_tokens"])):
        await asyncio.sleep(server.delay)
        choice = {"delta": {"content": "tok "}} if chat else {"text": "tok "}
        writer.write(_sse({"choices": [choice]}))
        await writer.drain()
    usage = {"prompt_tokens": 3, "completion_tokens": min(server.tokens, body["max_tokens"])}
    writer.write(_sse({"choices": [], "usage": usage}) + b"data: [DONE]\n\n")
    await writer.drain()
    writer.close()


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


async def test_streaming_completion_caps_tokens_sends_tier_and_times(server: Server) -> None:
    d = vllm(server)
    try:
        resp = await d.dispatch(Request("r", "opp", 0.0, max_tokens=500, payload={"prompt": "ok"}))
    finally:
        await d.aclose()
    body = server.bodies[0]
    assert body["max_tokens"] == 16  # capped
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
            await d.dispatch(Request("r", "opp", 0.0, payload={"prompt": mode}))
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
