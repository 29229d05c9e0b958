"""A lean streamed POST to a plain-HTTP engine: the SSE body read by hand, on a kept-alive connection.

Why: through httpx (httpcore, h11, anyio), each streamed chunk of the upstream leg costs several
callbacks, a cancel scope and a task-group check; on the gateway's one event loop that was about
40 % of its CPU a request, and each await of a new request's dispatch waits its turn behind the
other streams, so the engine's slot idled between requests (docs/performance.md, "The gateway's
own cost"). This reader does one read and one parse a chunk, on asyncio streams, and gives the
loop one turn a chunk (a read of buffered bytes never suspends).

It serves `UpstreamDispatcher` only where nothing of httpx is needed: an ``http://`` engine, no
proxy in the environment, no client injected. Its failures read as the httpx path's do:
``upstream timeout: ConnectTimeout|ReadTimeout`` (504), ``upstream transport: ConnectError|ReadError|
RemoteProtocolError: …`` (502), an upstream's non-200 answer as `stream.http_error`, a body that is
not an event stream as ``not an event stream: …``. Lines end at LF, CR LF or CR only (a model's
U+2028 stays inside its chunk), an event's ``data:`` lines are joined with LF, comments and events
without data are skipped — as httpx-sse reads them.

Connections (`Connections`): a stream that reached ``[DONE]`` hands its connection back once the
body has ended (read in the background, within `DRAIN_S`), and the next request to the engine
reuses it if it is at most `IDLE_S` old. Why: a fresh connection a request cost the engine's server
about as much as streaming the answer itself (measured on the fake upstream: 460 against 240 µs of
its CPU a request, and 210 against 130 µs of the gateway's). Why it loses no request: the engine may
close an idle connection just as a request is sent on it (uvicorn, vLLM's server, after 5 s idle).
`IDLE_S` stays well under that, and a reused connection that ends before any byte of an answer
(closed or reset) is a request the engine never read: it is sent once more on a fresh connection.
A stream that failed, was cancelled (the client went away: closing the connection is what makes the
engine abort the sequence) or asked ``connection: close`` closes its connection.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import re
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Any, NoReturn
from urllib.parse import urlsplit

from ..enforce.stream import http_error
from ..errors import DispatchError

__all__ = ["DRAIN_S", "IDLE_S", "MAX_IDLE", "Connections", "LeanStream", "TransportFailure", "lean_capable"]


class TransportFailure(ConnectionError):
    """The cause of a lean call's transport failure (refused, reset, cut): the engine may be dead."""


_LINE = re.compile(r"\r\n|\r|\n")
_PROXIES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
_MAX_ERROR_BODY = 1 << 16  # bytes of a non-200 answer kept for its error object
#: seconds an idle connection to the engine is kept for the next request: well under the keep-alive
#: of uvicorn (vLLM's server: 5 s by default), so that the engine does not close one as it is reused
IDLE_S = 1.0
#: idle connections kept at most for one engine (beyond it a finished stream's connection closes)
MAX_IDLE = 32
#: seconds a stream past ``[DONE]`` may take to end its body before its connection is closed, not kept
DRAIN_S = 1.0


class _Stale(Exception):
    """A reused connection ended before any byte of the answer: the engine never read the request."""


def _broken(why: str) -> NoReturn:
    """Raise a framing the engine broke as httpx's ``RemoteProtocolError`` reads (502; its cause a
    `TransportFailure`: the engine may be dead or not HTTP, so a fleet relocates the request)."""
    raise DispatchError(
        f"upstream transport: RemoteProtocolError: {why}", status_hint=502
    ) from TransportFailure(why)


class _ReadDeadline:
    """Each read may wait ``seconds`` at most, as ``asyncio.timeout(seconds)`` around each would
    give, at the price of one timer a stream instead of one a read (a chunk is two reads, and
    arming and cancelling a timer cost about as much as the read of a buffered chunk): the timer
    is re-armed only when it fires, at the running read's own deadline, and a read that outlasts
    it is cancelled and raises ``TimeoutError``, as `asyncio.timeout` does (a cancel of the task
    from elsewhere, meanwhile, stays a cancel)."""

    __slots__ = ("_begun", "_expired", "_seconds", "_task", "_timer")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._task: asyncio.Task[Any] | None = None  # the task whose read is running
        self._begun = 0.0  # loop time the running read began
        self._timer: asyncio.TimerHandle | None = None
        self._expired = False

    async def run(self, read: Any) -> Any:
        """Await ``read`` (a coroutine) within the deadline."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        base = task.cancelling()
        self._task, self._begun = task, loop.time()
        if self._timer is None:
            self._timer = loop.call_at(self._begun + self._seconds, self._fire)
        try:
            return await read
        except asyncio.CancelledError:
            if self._expired and task.uncancel() <= base:
                self._expired = False
                raise TimeoutError from None
            raise
        finally:
            self._task = None

    def _fire(self) -> None:
        task, self._timer = self._task, None
        if task is None:
            return  # between reads: the next read arms it again
        loop = task.get_loop()
        due = self._begun + self._seconds
        if loop.time() < due:
            self._timer = loop.call_at(due, self._fire)
        elif not self._expired:
            self._expired = True
            task.cancel()

    def close(self) -> None:
        """Stop the timer (the stream is done)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def lean_capable(base_url: str) -> bool:
    """True when ``base_url`` is plain HTTP and no proxy is configured in the environment."""
    return urlsplit(base_url).scheme == "http" and not any(os.environ.get(k) for k in _PROXIES)


class LeanStream:
    """One streamed POST: ``async with LeanStream(...) as s: async for data in s.events(): ...``."""

    def __init__(
        self,
        url: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        *,
        connect: float,
        read: float,
        pool: Connections | None = None,
    ) -> None:
        parts = urlsplit(url)
        self._host, self._port = parts.hostname or "", parts.port or 80
        raw = json.dumps(body, separators=(",", ":")).encode()
        lines = [
            f"POST {parts.path or '/'} HTTP/1.1",
            f"host: {parts.netloc}",
            "content-type: application/json",
        ]
        lines += [f"content-length: {len(raw)}", "accept: text/event-stream"]
        lines += [] if pool is not None else ["connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if any("\r" in line or "\n" in line for line in lines):  # as h11 refuses them: no header injection
            raise DispatchError("a forwarded header holds a line break", status_hint=502)
        self._request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + raw
        self._connect, self._read = connect, read
        self._writer: asyncio.StreamWriter | None = None
        self._reader: asyncio.StreamReader | None = None
        self._headers: Mapping[str, str] = {}
        self._deadline = _ReadDeadline(read)
        self._pool = pool
        self._reused = False  # the connection came from `pool`
        self._events: AsyncIterator[str] | None = None
        self._done = False  # ``[DONE]`` was read
        self._ended = False  # the body was read to its end (its framing's, not a close)
        self._keep = False  # the answer allows the connection's reuse (HTTP/1.1, framed, no close)

    async def __aenter__(self) -> LeanStream:
        taken = None if self._pool is None else self._pool.take()
        if taken is None:
            await self._open()
        else:
            self._reader, self._writer = taken
            self._reused = True
            self._writer.write(self._request)
        return self

    async def _open(self) -> None:
        try:
            async with asyncio.timeout(self._connect):
                self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        except TimeoutError:
            raise DispatchError("upstream timeout: ConnectTimeout", status_hint=504) from None
        except OSError as exc:
            raise DispatchError(
                f"upstream transport: ConnectError: {exc}", status_hint=502
            ) from TransportFailure(str(exc))
        self._writer.write(self._request)

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None and self._pool is not None and self._done and self._keep:
            self._pool.recycle(self)  # the rest of the body read in the background, then kept
        else:
            self.close()

    async def finish(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """Read the body to its end (past ``[DONE]``) and hand over the connection; None (and the
        connection closed) when the body did not end by its framing."""
        if self._events is not None:
            async for _ in self._events:
                pass
        reader, writer = self._reader, self._writer
        if not self._ended or reader is None or writer is None:
            self.close()
            return None
        self._deadline.close()
        self._reader = self._writer = None
        return reader, writer

    def close(self) -> None:
        """Close the connection (the engine aborts a sequence whose client went away)."""
        self._deadline.close()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def _io(self, read: Any, *, stale: bool = False) -> Any:
        """Await ``read`` within the read deadline, its failures as httpx's; with ``stale``, a
        connection that ended before any byte (closed or reset) raises `_Stale` instead."""
        try:
            return await self._deadline.run(read)
        except TimeoutError:
            raise DispatchError("upstream timeout: ReadTimeout", status_hint=504) from None
        except asyncio.IncompleteReadError as exc:
            if stale and not exc.partial:
                raise _Stale from None
            _broken("peer closed connection without sending complete message body")
        except asyncio.LimitOverrunError:
            _broken("a header or chunk-size line longer than 64 KiB")
        except (ConnectionError, OSError) as exc:
            if stale and isinstance(exc, (ConnectionResetError, BrokenPipeError)):
                raise _Stale from None
            raise DispatchError(
                f"upstream transport: ReadError: {exc}", status_hint=502
            ) from TransportFailure(str(exc))

    async def head(self) -> tuple[int, dict[str, str]]:
        """The status and the (lower-cased) headers; a non-200 raises `stream.http_error`. A reused
        connection the engine had closed (`_Stale`) is replaced by a fresh one, the request sent again."""
        assert self._reader is not None
        try:
            raw: bytes = await self._io(self._reader.readuntil(b"\r\n\r\n"), stale=self._reused)
        except _Stale:
            self.close()
            self._reused = False
            await self._open()
            assert self._reader is not None
            raw = await self._io(self._reader.readuntil(b"\r\n\r\n"))
        lines = raw.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            _broken(f"malformed status line {lines[0][:80]!r}")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        if status != 200:
            body = b"".join([piece async for piece in self._body(headers)])[:_MAX_ERROR_BODY]
            raise http_error(status, body)
        ctype = headers.get("content-type", "")
        if "text/event-stream" not in ctype:
            why = f"Expected response header Content-Type to contain 'text/event-stream', got {ctype!r}"
            raise DispatchError(f"not an event stream: {why}", status_hint=502)
        self._headers = headers
        framed = headers.get("transfer-encoding", "").lower() == "chunked" or "content-length" in headers
        closes = headers.get("connection", "").lower() == "close"
        self._keep = framed and lines[0].startswith("HTTP/1.1") and not closes
        return status, headers

    async def _body(self, headers: Mapping[str, str]) -> AsyncIterator[bytes]:
        """The body's bytes as they come: chunked, by content-length, or up to the close."""
        reader = self._reader
        assert reader is not None
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                line = await self._io(reader.readuntil(b"\r\n"))
                try:
                    size = int(line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    _broken(f"malformed chunk size {line[:80]!r}")
                if size == 0:
                    while await self._io(reader.readuntil(b"\r\n")) != b"\r\n":
                        pass  # a trailer field, up to the empty line that ends the body
                    self._ended = True
                    return
                yield (await self._io(reader.readexactly(size + 2)))[:-2]
        elif "content-length" in headers:
            yield await self._io(reader.readexactly(int(headers["content-length"])))
            self._ended = True
        else:
            while piece := await self._io(reader.read(1 << 16)):
                yield piece

    def events(self) -> AsyncIterator[str]:
        """The ``data`` of each event, as the module doc says (one reader a stream: `finish` reads on)."""
        self._events = self._read_events()
        return self._events

    async def _read_events(self) -> AsyncIterator[str]:
        decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        pending, data = "", list[str]()
        loop, turn = asyncio.get_running_loop(), _Turn()
        async for piece in self._body(self._headers):
            # A read of bytes already buffered returns without suspending: an engine that wrote
            # 1,500 tokens at once was relayed in one 4 s turn of the loop, every other request,
            # the client's hang-up and the stall watchdog waiting behind it. One turn a piece: given
            # here when the read did not already give it (it waited for its bytes, the usual case).
            if not turn.came:
                await _give_a_turn()
            text = pending + decode(piece)
            held = text.endswith("\r")  # a CR LF may be cut between two pieces: wait for the next
            lines = _LINE.split(text[:-1] if held else text)
            pending = lines.pop() + ("\r" if held else "")
            for line in lines:
                if line == "":
                    if data:
                        joined = "\n".join(data)
                        self._done = self._done or joined.strip() == "[DONE]"
                        yield joined
                    data = []
                elif line.startswith("data:"):
                    value = line[5:]
                    data.append(value[1:] if value.startswith(" ") else value)
            turn.arm(loop)


class _Turn:
    """Whether the event loop has run its ready callbacks since `arm` (a callback then armed has run).

    Why: giving the loop a turn after every piece cost a task step and a loop iteration each (37 a
    request), though a read that waited for its bytes has given one already."""

    __slots__ = ("came",)

    def __init__(self) -> None:
        self.came = True

    def arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self.came = False
        loop.call_soon(self._come)

    def _come(self) -> None:
        self.came = True


async def _give_a_turn() -> None:
    """Let every other ready task run once (a function of its own, so that a test can count them)."""
    await asyncio.sleep(0)


class Connections:
    """The idle keep-alive connections to one engine, for the streams to it (see module doc).

    Memory: at most `MAX_IDLE` connections, each kept `IDLE_S` at most after its last answer (one
    timer closes the expired ones, so that none lingers half-closed once the engine has dropped it).
    """

    __slots__ = ("_closed", "_draining", "_idle", "_sweep")

    def __init__(self) -> None:
        self._idle: deque[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = deque()
        self._draining: set[asyncio.Task[None]] = set()
        self._closed = False
        self._sweep: asyncio.TimerHandle | None = None  # due when the oldest kept connection expires

    def __len__(self) -> int:
        return len(self._idle)

    def take(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """The most recently kept connection that is still open and at most `IDLE_S` old, or None."""
        self._expire(asyncio.get_running_loop().time())
        while self._idle:
            reader, writer, _ = self._idle.pop()
            if not writer.is_closing() and not reader.at_eof():
                return reader, writer
            writer.close()
        return None

    def recycle(self, stream: LeanStream) -> None:
        """Keep ``stream``'s connection once its body has ended (read in the background)."""
        task = asyncio.ensure_future(self._drain(stream))
        self._draining.add(task)
        task.add_done_callback(self._draining.discard)

    async def _drain(self, stream: LeanStream) -> None:
        try:
            async with asyncio.timeout(DRAIN_S):
                conn = await stream.finish()
        except (DispatchError, TimeoutError):
            stream.close()  # not ended by its framing in time: not reusable
            return
        if conn is not None:
            self._put(*conn)

    def _put(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._expire(now)
        if self._closed or len(self._idle) >= MAX_IDLE or writer.is_closing() or reader.at_eof():
            writer.close()
            return
        self._idle.append((reader, writer, now))
        if self._sweep is None:
            self._sweep = loop.call_at(now + IDLE_S, self._swept)

    def _swept(self) -> None:
        loop = asyncio.get_running_loop()
        self._sweep = None
        self._expire(loop.time())
        if self._idle:
            self._sweep = loop.call_at(self._idle[0][2] + IDLE_S, self._swept)

    def _expire(self, now: float) -> None:
        while self._idle and now - self._idle[0][2] >= IDLE_S:
            self._idle.popleft()[1].close()

    async def aclose(self) -> None:
        """Close every kept connection, once the streams still ending have ended."""
        self._closed = True
        if self._draining:
            await asyncio.gather(*self._draining, return_exceptions=True)
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        while self._idle:
            self._idle.pop()[1].close()
