"""Kept-alive connections to the engine (`rvguard.gateway.lean.Connections`): reused only while
fresh and whole, and never at the cost of a request.

A raw asyncio server answers each request on a connection as the test says (a kept-alive stream, a
close before the answer, half an answer), so the race the pool must survive — the engine closing an
idle connection just as a request is sent on it — happens on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Callable

import pytest

from rvguard.errors import DispatchError
from rvguard.gateway import lean
from rvguard.gateway.lean import Connections, LeanStream

SSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"


def _chunks(*data: bytes) -> bytes:
    return b"".join(f"{len(d):x}\r\n".encode() + d + b"\r\n" for d in data)


BODY = _chunks(b"data: a\n\n", b"data: [DONE]\n\n", b"")
#: ends a reply after which the server closes the connection
CLOSE = b"<close>"
#: a reply that resets the connection (SO_LINGER 0: RST, not FIN) without a byte
RESET = b"<reset>"
#: a whole kept-alive answer
ANSWER = SSE + b"\r\n" + BODY


class Engine:
    """A raw server: ``plan(connection, request)`` gives the bytes to answer (None: close at once
    without a byte, as an engine's keep-alive expiry does; ending in `CLOSE`: close after them)."""

    def __init__(self, plan: Callable[[int, int], bytes | None]) -> None:
        self.plan = plan
        self.connections = 0
        self.ended = 0  # connections whose client closed them
        self.requests: list[tuple[int, int]] = []
        self._writers: list[asyncio.StreamWriter] = []
        self._handlers: set[asyncio.Task[None]] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn, n = self.connections, 0
        self.connections += 1
        self._writers.append(writer)
        self._handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        with contextlib.suppress(ConnectionError):
            while True:
                try:
                    await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    self.ended += 1
                    break
                await reader.readexactly(len(b'{"x":1}'))
                reply = self.plan(conn, n)
                self.requests.append((conn, n))
                if reply is None:
                    break
                if reply == RESET:
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    break
                writer.write(reply.removesuffix(CLOSE))
                await writer.drain()
                if reply.endswith(CLOSE):
                    break
                n += 1
        writer.close()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        try:
            yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/completions"
        finally:
            for w in self._writers:
                w.close()
            if self._handlers:  # each sees its connection's end and returns
                await asyncio.wait(self._handlers, timeout=2.0)
            server.close()
            await server.wait_closed()


async def _stream(url: str, pool: Connections) -> list[str]:
    """One stream up to [DONE], then its connection handed back to ``pool`` (or closed)."""
    async with LeanStream(url, {"x": 1}, {}, connect=2.0, read=2.0, pool=pool) as s:
        await s.head()
        out = []
        async for data in s.events():
            out.append(data)
            if data == "[DONE]":
                break  # as `enforce.stream.data_chunks` stops: the body's end is read by the pool
    await _settled(pool)
    return out


async def _settled(pool: Connections) -> None:
    """Wait until the streams that reached [DONE] have handed their connections back (or closed)."""
    for _ in range(100):
        if not pool._draining:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("a stream's body did not end")


async def test_streams_one_after_another_share_one_connection() -> None:
    engine = Engine(lambda conn, n: ANSWER)
    pool = Connections()
    async with engine.serving() as url:
        for _ in range(3):
            assert await _stream(url, pool) == ["a", "[DONE]"]
        await pool.aclose()
    assert engine.connections == 1 and engine.requests == [(0, 0), (0, 1), (0, 2)]


@pytest.mark.parametrize("end", [None, RESET], ids=["closed", "reset"])
async def test_a_kept_connection_the_engine_closed_on_reuse_loses_no_request(
    end: bytes | None,
) -> None:
    """The second request arrives as the engine closes the idle connection (no byte answered, a
    FIN or an RST): it is sent again on a fresh connection and answered there."""
    engine = Engine(lambda conn, n: end if (conn, n) == (0, 1) else ANSWER)
    pool = Connections()
    async with engine.serving() as url:
        assert await _stream(url, pool) == ["a", "[DONE]"]
        assert await _stream(url, pool) == ["a", "[DONE]"]
        await pool.aclose()
    assert engine.connections == 2 and engine.requests == [(0, 0), (0, 1), (1, 0)]


async def test_an_answer_cut_after_its_first_byte_is_never_sent_again() -> None:
    """Bytes of an answer came: the engine read the request, so it fails (502), never twice."""
    engine = Engine(lambda conn, n: ANSWER if n == 0 else b"HTTP/1.1 2" + CLOSE)
    pool = Connections()
    async with engine.serving() as url:
        await _stream(url, pool)
        with pytest.raises(DispatchError, match="RemoteProtocolError") as info:
            await _stream(url, pool)
        await pool.aclose()
    assert info.value.status_hint == 502 and engine.connections == 1


async def test_a_connection_idle_past_idle_s_is_closed_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lean, "IDLE_S", 0.5)  # a check within it holds on a loaded machine
    engine = Engine(lambda conn, n: ANSWER)
    pool = Connections()
    async with engine.serving() as url:
        await _stream(url, pool)
        assert len(pool) == 1
        await asyncio.sleep(0.6)
        await _stream(url, pool)
        await pool.aclose()
    assert engine.connections == 2


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (SSE + b"connection: close\r\n\r\n" + BODY, "the answer asked for the close"),
        (SSE.replace(b"HTTP/1.1", b"HTTP/1.0") + b"\r\n" + BODY, "HTTP/1.0 closes by default"),
        (
            SSE.replace(b"transfer-encoding: chunked\r\n", b"") + b"\r\n" + b"data: [DONE]\n\n",
            "ends at the close",
        ),
    ],
    ids=["connection-close", "http-1.0", "unframed"],
)
async def test_an_answer_that_does_not_keep_its_connection_is_not_kept(reply: bytes, why: str) -> None:
    engine = Engine(lambda conn, n: reply if conn == 0 else ANSWER)
    pool = Connections()
    async with engine.serving() as url:
        with contextlib.suppress(DispatchError):  # the unframed one: its close is its end
            await asyncio.wait_for(_stream(url, pool), 1.0)
        assert len(pool) == 0, why
        await _stream(url, pool)
        await pool.aclose()
    assert engine.connections == 2, why


async def test_a_stream_left_before_done_closes_its_connection() -> None:
    """A cancelled stream (the client went away) closes: the engine's abort comes from that close."""
    gate = asyncio.Event()
    one_event = SSE + b"\r\n" + _chunks(b"data: a\n\n")  # no [DONE] yet
    engine = Engine(lambda conn, n: one_event if conn == 0 else ANSWER)
    pool = Connections()
    async with engine.serving() as url:
        async with LeanStream(url, {"x": 1}, {}, connect=2.0, read=2.0, pool=pool) as s:
            await s.head()
            async for _ in s.events():
                gate.set()
                break
        for _ in range(20):  # closed at once (not after a drain of up to DRAIN_S = 1 s)
            if engine.ended:
                break
            await asyncio.sleep(0.01)
        assert gate.is_set() and engine.ended == 1 and len(pool) == 0
        await _stream(url, pool)
        await pool.aclose()
    assert engine.connections == 2


async def test_a_body_that_does_not_end_within_drain_s_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lean, "DRAIN_S", 0.05)
    head_and_done = SSE + b"\r\n" + BODY[: -len(b"0\r\n\r\n")]  # [DONE], but the last chunk never comes
    engine = Engine(lambda conn, n: head_and_done)
    pool = Connections()
    async with engine.serving() as url:
        assert await _stream(url, pool) == ["a", "[DONE]"]
        assert len(pool) == 0
        await pool.aclose()


async def test_an_expired_connection_is_closed_without_waiting_for_the_next_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No traffic after it: the pool's timer closes it (the engine sees its end), none left half-closed."""
    monkeypatch.setattr(lean, "IDLE_S", 0.5)  # a check within it holds on a loaded machine
    engine = Engine(lambda conn, n: ANSWER)
    pool = Connections()
    async with engine.serving() as url:
        for _ in range(2):  # the timer armed again for a connection kept after the first expired
            await _stream(url, pool)
            assert len(pool) == 1
            await asyncio.sleep(0.8)
            assert len(pool) == 0
        await asyncio.sleep(0.05)
        assert engine.ended == 2
        await asyncio.gather(_stream(url, pool), _stream(url, pool))  # two connections, kept together
        await asyncio.sleep(0.2)
        await _stream(url, pool)  # one of them kept again, later: the timer comes back for it
        assert len(pool) == 2
        await asyncio.sleep(0.8)
        assert len(pool) == 0
        await pool.aclose()


async def test_aclose_closes_the_kept_connections_and_keeps_no_more() -> None:
    engine = Engine(lambda conn, n: ANSWER)
    pool = Connections()
    async with engine.serving() as url:
        await _stream(url, pool)
        assert len(pool) == 1
        await pool.aclose()
        assert len(pool) == 0
        await _stream(url, pool)
        assert len(pool) == 0
