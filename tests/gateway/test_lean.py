"""The lean streamed POST (`rvguard.gateway.lean`): SSE read as httpx-sse reads it, failures as httpx's read.

A raw asyncio server sends exactly the bytes each test chooses (chunk edges included), so line
ends cut between two pieces and the framing cases are exercised directly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from rvguard.errors import DispatchError
from rvguard.gateway import lean
from rvguard.gateway.lean import LeanStream, TransportFailure, lean_capable

SSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


@contextlib.asynccontextmanager
async def raw_server(reply: bytes, *, then_close: bool = True, hold: float = 0.0) -> AsyncIterator[str]:
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        await asyncio.sleep(hold)
        if then_close:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1/completions"
    finally:
        for w in writers:
            w.close()
        server.close()
        await server.wait_closed()


async def _events(url: str, *, read: float = 5.0) -> list[str]:
    async with LeanStream(url, {"x": 1}, {}, connect=2.0, read=read) as s:
        await s.head()
        return [d async for d in s.events()]


async def test_events_split_at_lf_crlf_and_cr_only_even_across_pieces() -> None:
    body = _chunk(b"data: a\r") + _chunk("\n\r\ndata: b\u2028c\n".encode())
    body += _chunk(b"\n: a comment\n\ndata:one\ndata: two\r\rdata: [DONE]\n\n") + _chunk(b"")
    async with raw_server(SSE + body) as url:
        got = await _events(url)
    assert got == ["a", "b\u2028c", "one\ntwo", "[DONE]"]


async def test_a_multibyte_character_cut_between_pieces_is_kept_whole() -> None:
    text = "data: é€\n\n".encode()
    body = _chunk(text[:7]) + _chunk(text[7:]) + _chunk(b"")
    async with raw_server(SSE + body) as url:
        assert await _events(url) == ["é€"]


async def test_a_non_200_answer_keeps_its_status_and_error_object() -> None:
    raw = b'{"error": {"message": "bad", "type": "BadRequestError", "code": 400}}'
    head = f"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {len(raw)}\r\n\r\n"
    async with raw_server(head.encode() + raw) as url:
        with pytest.raises(DispatchError) as info:
            await _events(url)
    assert info.value.status_hint == 400 and info.value.error == {
        "message": "bad",
        "type": "BadRequestError",
        "code": 400,
    }


async def test_a_body_that_is_not_an_event_stream_is_refused() -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    async with raw_server(head) as url:
        with pytest.raises(DispatchError, match="not an event stream"):
            await _events(url)


async def test_a_cut_stream_is_a_transport_failure_and_a_silent_one_a_read_timeout() -> None:
    async with raw_server(SSE + b"a\r\ndata") as url:  # the chunk promised 10 bytes, then the close
        with pytest.raises(DispatchError, match="RemoteProtocolError") as info:
            await _events(url)
    assert isinstance(info.value.__cause__, TransportFailure) and info.value.status_hint == 502
    async with raw_server(SSE, then_close=False, hold=1.0) as url:
        with pytest.raises(DispatchError, match="upstream timeout: ReadTimeout") as info:
            await _events(url, read=0.1)
    assert info.value.status_hint == 504


async def test_a_refused_connection_is_a_connect_error() -> None:
    import socket

    with socket.socket() as bound:  # bound, never listening: a connect is refused, the port kept
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        with pytest.raises(DispatchError, match="ConnectError") as info:
            await _events(f"http://127.0.0.1:{port}/v1/completions")
    assert isinstance(info.value.__cause__, TransportFailure)


def test_only_plain_http_without_a_proxy_takes_the_lean_path(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert lean_capable("http://127.0.0.1:8000")
    assert not lean_capable("https://engine.example")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert not lean_capable("http://127.0.0.1:8000")


def test_a_header_with_a_line_break_is_never_sent() -> None:
    with pytest.raises(DispatchError, match="line break"):
        LeanStream(
            "http://127.0.0.1:1/v1/completions", {}, {"x-request-id": "a\r\nx-evil: 1"}, connect=1, read=1
        )


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (b"garbage\r\n\r\n", "malformed status line"),
        (b"HTTP/1.1 abc OK\r\n\r\n", "malformed status line"),
        (SSE + b"zz\r\nhello\r\n", "malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nx: " + b"a" * 100_000 + b"\r\n\r\n", "longer than 64 KiB"),
        (SSE + b"1" * 100_000, "longer than 64 KiB"),
    ],
    ids=["no-status", "status-not-a-number", "chunk-size", "huge-header", "endless-chunk-size"],
)
async def test_a_broken_framing_is_a_protocol_error_as_httpx_reads_it(reply: bytes, why: str) -> None:
    """An engine that breaks HTTP's framing fails the dispatch 502 as httpx's RemoteProtocolError
    would, with a transport cause (a fleet relocates), never a bare ValueError or LimitOverrunError."""
    async with raw_server(reply) as url:
        with pytest.raises(DispatchError) as info:
            await _events(url, read=3.0)
    assert info.value.status_hint == 502
    assert str(info.value).startswith("upstream transport: RemoteProtocolError: ") and why in str(info.value)
    assert isinstance(info.value.__cause__, TransportFailure)


async def test_a_burst_already_in_the_socket_leaves_the_loop_a_turn_a_chunk() -> None:
    """An engine that wrote every token at once: its chunks are buffered, and a buffered read never
    suspends. Another task must still run between two chunks (it ran 0 times in 400 on the old
    reader; a real engine's 1,500-token burst held the gateway's loop for 4 s, its client's hang-up unseen).
    """
    n = 400
    body = b"".join(_chunk(f"data: {i}\n\n".encode()) for i in range(n)) + _chunk(b"")
    turns = 0

    async def other() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async with (
        raw_server(SSE + body, hold=1.0) as url,
        LeanStream(url, {"x": 1}, {}, connect=2.0, read=5.0) as s,
    ):
        await s.head()
        await asyncio.sleep(0.2)  # the whole burst is in the socket before the first read
        ticker = asyncio.ensure_future(other())
        await asyncio.sleep(0)
        before = turns
        got = [d async for d in s.events()]
        during = turns - before
        ticker.cancel()
    assert got == [str(i) for i in range(n)]
    assert during >= n - 1, during


async def test_a_turn_is_given_only_where_the_read_did_not_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces that come 20 ms apart each wait for their bytes (the loop turns then): no turn is added
    for them. A burst already in the socket is read without waiting: a turn is added a piece."""
    given = 0
    give = lean._give_a_turn

    async def counted() -> None:
        nonlocal given
        given += 1
        await give()

    monkeypatch.setattr(lean, "_give_a_turn", counted)
    n = 12
    paced = [(0.02, _chunk(f"data: {i}\n\n".encode())) for i in range(n)]
    async with paced_server([(0.0, SSE), *paced, (0.02, _chunk(b""))]) as url:
        assert await _events(url, read=2.0) == [str(i) for i in range(n)]
    assert given <= 2, given  # (a piece split over two reads, or two pieces in one, may add one)
    given = 0
    burst = b"".join(_chunk(f"data: {i}\n\n".encode()) for i in range(n)) + _chunk(b"")
    async with raw_server(SSE + burst, hold=0.5) as url, LeanStream(url, {}, {}, connect=2.0, read=5.0) as s:
        await s.head()
        await asyncio.sleep(0.2)  # the whole burst is in the socket before the first read
        assert [d async for d in s.events()] == [str(i) for i in range(n)]
    assert given >= n - 1, given


@contextlib.asynccontextmanager
async def paced_server(pieces: list[tuple[float, bytes]]) -> AsyncIterator[str]:
    """Answers with each piece after its pause (seconds), then closes; a client gone early ends it."""
    handlers: list[asyncio.Task[None]] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            for pause, data in pieces:
                await asyncio.sleep(pause)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.ensure_future(answer(reader, writer)))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/completions"
    finally:
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers)
        server.close()
        await server.wait_closed()


async def test_the_read_deadline_is_each_read_s_not_the_stream_s() -> None:
    """Eight events 0.1 s apart with 0.25 s a read: 0.8 s in all, no read over its deadline; then
    the same stream with one pause of 0.5 s in the middle times out at that read."""
    events = [(0.1, _chunk(f"data: {i}\n\n".encode())) for i in range(8)]
    async with paced_server([(0.0, SSE), *events, (0.0, _chunk(b""))]) as url:
        assert await _events(url, read=0.25) == [str(i) for i in range(8)]
    slow = [*events[:4], (0.5, events[4][1]), *events[5:]]
    got: list[str] = []
    async with paced_server([(0.0, SSE), *slow, (0.0, _chunk(b""))]) as url:
        with pytest.raises(DispatchError, match="upstream timeout: ReadTimeout"):
            await _collect(LeanStream(url, {"x": 1}, {}, connect=2.0, read=0.25), got)
    assert got == ["0", "1", "2", "3"]


async def test_a_cancel_during_a_read_stays_a_cancel_and_leaves_no_timer() -> None:
    """The caller's own cancel is a `CancelledError` (not a read time-out), the task's count of
    pending cancels is back where it was, and a closed stream's timer is gone."""
    async with raw_server(SSE, then_close=False, hold=0.5) as url:
        stream = LeanStream(url, {"x": 1}, {}, connect=2.0, read=0.3)
        task = asyncio.ensure_future(_read_all(stream))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()
        assert stream._deadline._timer is None  # closed by the stream's exit
        await asyncio.sleep(0.5)  # past the 0.3 s deadline (nothing fires) and the server's hold


async def _read_all(stream: LeanStream) -> list[str]:
    return await _collect(stream, [])


async def _collect(stream: LeanStream, into: list[str]) -> list[str]:
    """Each event's data into ``into`` as it comes (what came before a failure stays there)."""
    async with stream as s:
        await s.head()
        async for data in s.events():
            into.append(data)
    return into


async def test_a_read_time_out_leaves_the_task_free_to_await_again() -> None:
    """After a read time-out the task is not left with a pending cancel: it can await on."""
    async with raw_server(SSE, then_close=False, hold=1.0) as url:
        with pytest.raises(DispatchError, match="ReadTimeout"):
            await _events(url, read=0.1)
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        await asyncio.sleep(0.01)  # would raise CancelledError if a cancel were still pending
