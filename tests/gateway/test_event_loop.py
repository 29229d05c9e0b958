"""``rvguard serve`` on uvloop: chosen where it imports, and the guarded protocol's limits hold on it.

The gateway extra installs uvloop on CPython off Windows (pyproject.toml), so there it must import:
these tests fail, not skip, when it is missing (and the rest of the suite still runs). The edge
tests that run on pytest's asyncio loop run here again inside a uvloop loop.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import platform
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.server import event_loop, kernel_wait, loop_name, uvicorn_config

from . import test_edge, test_watch_boundary
from ._support import auth, contract, read_trace, serve_process

if sys.platform == "win32" or platform.python_implementation() != "CPython":
    pytest.skip("the gateway extra installs uvloop on CPython off Windows only", allow_module_level=True)


@pytest.fixture
def uvloop() -> ModuleType:
    """The uvloop module; a failure naming the fix when the environment lacks the declared dependency."""
    try:
        return importlib.import_module("uvloop")
    except ImportError:
        pytest.fail(
            "uvloop is not installed, and the gateway extra declares it here: pip install -e '.[dev]'"
        )


def _on_uvloop(uvloop: ModuleType, scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``scenario`` in a fresh uvloop event loop (and check that it is one)."""

    async def checked() -> None:
        assert loop_name(asyncio.get_running_loop()) == "uvloop"
        await scenario()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(checked())


def _app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("never served")


def test_serve_runs_uvloop_where_it_imports_and_asyncio_where_not(
    uvloop: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    def config() -> Any:
        return uvicorn_config(_app, host="127.0.0.1", port=0, header_timeout=1.0, log_level="info")

    assert event_loop() == "uvloop" and config().loop == "uvloop"
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    assert event_loop() == "asyncio" and config().loop == "asyncio"
    plain = asyncio.new_event_loop()
    try:
        assert loop_name(plain) == "asyncio"
    finally:
        plain.close()


def test_the_kernel_wait_reads_uvloop_s_stand_in_socket(uvloop: ModuleType) -> None:
    """uvloop's transport gives a pseudo-socket; its ``getsockopt(TCP_INFO)`` reads the real one."""
    reads: list[tuple[float, float]] = []  # (the kernel wait, when the bytes were read)
    kinds: list[str] = []

    class Reader(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            kinds.append(type(self.transport.get_extra_info("socket")).__name__)
            reads.append((kernel_wait(self.transport), time.monotonic()))

    async def scenario() -> None:
        server = await asyncio.get_running_loop().create_server(Reader, "127.0.0.1", 0)
        try:
            with socket.create_connection(server.sockets[0].getsockname()[:2]) as client:
                client.sendall(b"GET / HTTP/1.1\r\n\r\n")
                sent = time.monotonic()
                time.sleep(0.1)  # the loop is blocked: the bytes wait in the kernel
                for _ in range(5000):
                    if reads:
                        break
                    await asyncio.sleep(0.001)
        finally:
            server.close()
            await server.wait_closed()
        waited, read = reads[0]
        assert read - sent - 0.021 <= waited <= read - sent  # one tick (<= 10 ms) off, one of rounding
        assert waited >= 0.07  # the blocked 0.1 s, seen through the stand-in socket

    _on_uvloop(uvloop, scenario)
    assert kinds == ["PseudoSocket"]  # uvloop's stand-in, not a socket.socket: the path under test


#: the edge tests of the guarded protocol, borrowed to run on uvloop: the header deadline (408 and
#: closed on time), the first-byte stamp on the arrival, and the kernel wait read through uvloop's
#: transport on a starved loop (the arrival dated back by it)
_wb = test_watch_boundary
BORROWED = {
    "header-deadline": test_edge.test_slow_headers_and_slow_bodies_are_timed_out,
    "first-byte": _wb.test_the_arrival_is_dated_from_the_first_byte_and_a_starved_gateway_is_an_alert,
    "kernel-wait": _wb.test_bytes_that_waited_in_the_kernel_for_a_starved_loop_date_the_arrival_back,
}


@pytest.mark.parametrize("name", sorted(BORROWED))
def test_the_guarded_protocol_holds_on_uvloop(
    name: str, uvloop: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    test: Any = BORROWED[name]
    wants = inspect.signature(test).parameters
    kwargs = {"tmp_path": tmp_path, "monkeypatch": monkeypatch}
    _on_uvloop(uvloop, lambda: test(**{k: v for k, v in kwargs.items() if k in wants}))


async def test_rvguard_serve_says_it_runs_uvloop_and_guards_on_it(
    uvloop: ModuleType, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The process's start-up line names the loop it runs; a request is served and its arrival
    traced with its kernel wait, half-sent headers are 408 at the deadline, and SIGINT still stops
    it cleanly (the trace closed, the stop said)."""
    extra = ("--log-format", "json", "--header-timeout", "0.3")
    async with FakeUpstream(token_delay=0.001) as up:
        with serve_process(contract(), up.url, tmp_path, *extra) as (url, trace):
            async with httpx.AsyncClient(timeout=10.0) as client:
                body = {"prompt": "x", "max_tokens": 3}
                ok = await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
            half = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\n"
            got, took = await test_edge._raw(url, half)
    err = capfd.readouterr().err
    startup = [json.loads(line) for line in err.splitlines() if '"event": "startup"' in line]
    assert [line["loop"] for line in startup if "loop" in line] == ["uvloop"]
    assert ok.status_code == 200
    assert got.startswith(b"HTTP/1.1 408") and b"header_timeout" in got and 0.2 <= took < 2.0
    arrivals = [r for r in read_trace(trace) if r["kind"] == "arrive"]
    assert len(arrivals) == 1 and arrivals[0]["arrival_gap"] >= 0
    assert "rvguard serve: stopped (SIGINT)" in err
