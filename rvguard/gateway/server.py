"""Running the gateway under uvicorn, with the connection-level limits a public edge needs.

uvicorn's HTTP/1.1 protocol times out only idle keep-alive connections: a
client that opens a connection and sends half a request line, or trickles
header bytes, holds it for ever (a slowloris). `GuardedH11Protocol` closes a
connection whose request headers are not complete ``header_timeout`` seconds
after the connection opened or the request's first byte came, answering 408
when it had started one. It also notes when each request's first byte was read
(`FIRST_BYTE`, a scope extension): the gateway dates the request's deadline from it.
(The body's own deadline is the app's, `rvguard.gateway.edge.read_body`.) The protocol is always
h11, also when httptools is installed, so these limits hold whatever uvicorn would pick.

The event loop is uvloop's where it imports (the ``gateway`` extra installs it on CPython off
Windows: `event_loop`), else asyncio's (figures: docs/performance.md, "The gateway's own cost").
The protocol and its limits are the same on both; uvloop's transport hands out a stand-in socket
whose ``getsockopt`` reads the real one, so `kernel_wait` dates arrivals back on either loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import signal
import socket
import struct
import time
from collections.abc import AsyncIterator, Iterator
from types import FrameType
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import EnforcementError

__all__ = [
    "FIRST_BYTE",
    "KEEP_ALIVE_S",
    "GuardedH11Protocol",
    "event_loop",
    "guarded_protocol",
    "loop_name",
    "serving",
    "stop_signals",
    "uvicorn_config",
]

#: the scope extension holding ``time.monotonic()`` when the request's first byte was read: the
#: gateway stamps the arrival from it, not from when its handler ran (a starved loop shows as a gap)
FIRST_BYTE = "rvguard.first_byte"

_TCP_INFO: int | None = getattr(socket, "TCP_INFO", None)  # Linux only
_LAST_DATA_RECV = 52  # offset of ``tcpi_last_data_recv`` (u32, ms) in Linux's ``struct tcp_info``
_TICK_MS = 10  # the value is counted in kernel ticks (1 to 10 ms): one is taken off, never added

#: seconds an idle client connection is kept open; above clients' own expiry (httpx: 5 s) so a
#: client never reuses a connection at the instant the server closes it
KEEP_ALIVE_S = 75
_TIMEOUT_BODY = json.dumps(
    {
        "error": {
            "message": "the request's headers were not received in time",
            "type": "invalid_request_error",
            "param": None,
            "code": "header_timeout",
        }
    }
).encode()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's headers (see module doc)."""

    header_timeout: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None
    _started = False
    _first_byte = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Arm the header deadline from the moment the connection opens."""
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        """A request's first byte arms the deadline (and is stamped); complete headers disarm it."""
        if self.conn.their_state is h11.IDLE:
            if not self._started:
                self._first_byte = time.monotonic() - kernel_wait(self.transport)
            self._started = True
            self._arm()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()
            if self._started and self.scope is not None:  # the request's scope: when its first byte came
                extensions: dict[str, Any] = self.scope.setdefault("extensions", {})
                extensions[FIRST_BYTE] = self._first_byte
            self._started = False

    def connection_lost(self, exc: Exception | None) -> None:
        """Disarm, then close as uvicorn does."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expired(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self._started:  # a request had begun: say why it ends (h11 sends nothing before a request)
            head = (
                "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                f"connection: close\r\ncontent-length: {len(_TIMEOUT_BODY)}\r\n\r\n"
            )
            self.transport.write(head.encode() + _TIMEOUT_BODY)
        self.transport.close()


def kernel_wait(transport: Any) -> float:
    """Seconds the bytes just read had waited in the kernel before this read, from the socket's
    ``TCP_INFO`` (``tcpi_last_data_recv``, in ms at the kernel's tick), less one tick of 10 ms so it
    never overstates; 0.0 where it cannot be known (not Linux, not TCP, no transport). Takes
    anything with asyncio's ``get_extra_info("socket")`` (a transport, httpcore's network stream).

    A starved event loop accepts and reads late while the client's request sits in the kernel: that
    wait is the client's and invisible to the handler's clock, so the request's arrival is dated
    back by it (the last segment's age, so never before the first byte came)."""
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is None or _TCP_INFO is None:
        return 0.0
    try:
        info: bytes = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _LAST_DATA_RECV + 4)
    except (OSError, AttributeError, TypeError):  # not a TCP socket (a Unix one), or a stand-in
        return 0.0
    if not isinstance(info, bytes) or len(info) < _LAST_DATA_RECV + 4:
        return 0.0
    ms: int = struct.unpack_from("I", info, _LAST_DATA_RECV)[0]
    return max(0, ms - _TICK_MS) / 1000.0


def guarded_protocol(header_timeout: float) -> type[GuardedH11Protocol]:
    """A `GuardedH11Protocol` class with this header deadline (uvicorn takes a class)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"header_timeout": header_timeout})


@contextlib.contextmanager
def stop_signals() -> Iterator[list[str]]:
    """SIGINT stops `uvicorn.Server.run` as cleanly as SIGTERM; yields the names of those received.

    uvicorn catches both while it serves, shuts down gracefully (lifespan: the Guard drains, the
    trace closes), then raises each again under the handler it found: Python's SIGINT default is
    a ``KeyboardInterrupt`` traceback (asyncio's runner adds its own), SIGTERM's kills the process.
    Installed around ``run``, this handler is what uvicorn finds: it records the signal and exits 0
    (also when the signal comes before uvicorn has taken over, at start-up).
    """
    received: list[str] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        raise SystemExit(0)

    kept = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)


def event_loop() -> str:
    """The event loop `rvguard serve` runs: ``"uvloop"`` where uvloop imports, else ``"asyncio"``."""
    try:
        importlib.import_module("uvloop")
    except ImportError:
        return "asyncio"
    return "uvloop"


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """Which event loop ``loop`` is, by its package: ``"uvloop"``, ``"asyncio"`` (the start-up log's)."""
    return type(loop).__module__.partition(".")[0]


def uvicorn_config(app: Any, *, host: str, port: int, header_timeout: float, log_level: str) -> Any:
    """The uvicorn configuration every way of serving the gateway uses.

    No access log and no logging configuration of uvicorn's own: the gateway
    logs its events itself (`rvguard.gateway.logs`), one line each. The loop is named, not left to
    uvicorn's ``"auto"``: `event_loop` (the start-up log says which one runs).
    """
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_keep_alive=KEEP_ALIVE_S,
        http=guarded_protocol(header_timeout),
        loop=event_loop(),
    )


#: seconds `serving` waits for the server to stop (graceful shutdown and lifespan included)
STOP_TIMEOUT = 60.0


@contextlib.asynccontextmanager
async def serving(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, header_timeout: float = 10.0
) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn in the current event loop; yields its base URL (port 0: ephemeral).

    For tests and benchmarks: the server stops (gracefully, lifespan included) on exit.
    """
    import uvicorn

    config = uvicorn_config(app, host=host, port=port, header_timeout=header_timeout, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    for _ in range(1000):  # ≤ 10 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if not server.started:
        server.should_exit = True
        await task
        raise EnforcementError(f"uvicorn did not start on {host}:{port}", status_hint=500)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        # bounded: a shutdown that never ends (a connection or a drain that hangs) fails here, with
        # this stack, instead of stalling the caller (a test) until an outer time-out with none
        await asyncio.wait_for(task, STOP_TIMEOUT)
