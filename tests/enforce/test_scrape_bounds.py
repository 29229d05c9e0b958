"""A /metrics scrape is bounded: size (streamed, stopped at the cap), time, and never inflated.

Before: a 50 MB exposition was read whole and parsed on the event loop (the loop blocked 4 s, the
gateway grew 82 → 389 MB), and a gzip bomb was inflated whole (1 GiB inflated from 1 MB: 282 s and
8.2 GB RSS in `MetricsHeadroomSource.read`, measured on the old code).
"""

from __future__ import annotations

import asyncio
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from rvguard.clock import ManualClock
from rvguard.enforce.headroom import MAX_SCRAPE_BYTES, MetricsHeadroomSource
from rvguard.errors import TelemetryFormatError

from ..gzip_bomb import gzip_bomb

GOOD = b"vllm:kv_cache_usage_perc 0.5\n"


def _huge(size: int) -> list[bytes]:
    line = b"# " + b"x" * 1021 + b"\n"  # comment lines: valid exposition, whatever their number
    return [GOOD] + [line * 64] * (size // (1024 * 64))


def _bomb(inflated_mib: int) -> list[bytes]:
    return [gzip_bomb(GOOD, b"#", inflated_mib)]


async def _exporter(body: list[bytes], headers: bytes, seen: list[bytes]) -> Callable[[], object]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n" + headers + b"\r\n"
        )
        try:
            for part in body:
                writer.write(part)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)  # type: ignore[return-value]


async def _stalls(during: asyncio.Future[object]) -> float:
    """The longest gap between a 10 ms ticker's ticks while ``during`` runs (the loop blocked)."""
    worst, last = 0.0, time.monotonic()
    while not during.done():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        worst, last = max(worst, now - last), now
    return worst


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., object]]:
    servers = []

    async def start(body: list[bytes], headers: bytes = b"") -> tuple[str, list[bytes]]:
        seen: list[bytes] = []
        server = await _exporter(body, headers, seen)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return f"http://127.0.0.1:{port}/metrics", seen

    yield start
    for s in servers:
        s.close()  # type: ignore[attr-defined]


async def test_a_50_mb_exposition_is_no_sample_without_blocking_or_growing(
    serve: Callable[..., object],
) -> None:
    url, _ = await serve(_huge(50 << 20))  # type: ignore[misc]
    async with httpx.AsyncClient() as client:  # the gateway scrapes with its engine's client
        source = MetricsHeadroomSource(url, ManualClock(), min_interval=0.0, timeout=10.0, client=client)
        read = asyncio.ensure_future(source.read())
        worst = await _stalls(read)
        with pytest.raises(TelemetryFormatError, match=f"larger than {MAX_SCRAPE_BYTES:,} bytes"):
            await read
        tracemalloc.start()
        try:
            with pytest.raises(TelemetryFormatError, match="larger than"):
                await source.read()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert worst < 0.25 and peak < 3 * MAX_SCRAPE_BYTES


async def test_a_declared_length_over_the_cap_is_refused_before_the_body(
    serve: Callable[..., object],
) -> None:
    url, _ = await serve([GOOD], b"content-length: %d\r\n" % (MAX_SCRAPE_BYTES + 1))  # type: ignore[misc]
    with pytest.raises(TelemetryFormatError, match="larger than"):
        await MetricsHeadroomSource(url, ManualClock(), min_interval=0.0).read()


async def test_a_gzip_bomb_is_never_inflated(serve: Callable[..., object]) -> None:
    """The scrape asks for identity; a compressed answer anyway is refused as it came."""
    url, seen = await serve(_bomb(256), b"content-encoding: gzip\r\n")  # type: ignore[misc]
    source = MetricsHeadroomSource(url, ManualClock(), min_interval=0.0, timeout=10.0)
    start = time.monotonic()
    tracemalloc.start()
    try:
        with pytest.raises(TelemetryFormatError, match="never inflated"):
            await source.read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 2.0 and peak < 16 << 20
    assert b"accept-encoding: identity" in seen[0].lower()


async def test_an_ordinary_exposition_still_reads(serve: Callable[..., object]) -> None:
    url, _ = await serve([GOOD])  # type: ignore[misc]
    samples = await MetricsHeadroomSource(url, ManualClock(), min_interval=0.0).read()
    assert [(s.resource, s.value) for s in samples] == [("kv_cache", 0.5)]


def test_the_bomb_is_one_gzip_member_that_inflates_to_its_stated_size() -> None:
    """What the bomb tests rely on: one decompressobj (httpx's decoder) inflates all of it, CRC checked."""
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
    body = inflater.decompress(_bomb(3)[0]) + inflater.flush()
    assert inflater.eof and not inflater.unused_data
    assert body == GOOD + b"#" * (3 << 20)
