"""Headroom samples: stamps out of the skew bound or going backwards are refused, one bad series
does not blind the others, and one sample cannot hold surplus longer than the hold limit.

Before: a /metrics sample stamped in the year 2286 was placed at the scrape's time, every later
scrape repeated the stamp (no sample), and the redline kept firing on that one sample for over
2 minutes, holding every surplus request until its client gave up; a missing running-requests
series (or one above C) threw the whole reading away, a KV cache 99 % used included.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from rvguard.clock import ManualClock
from rvguard.enforce.demotion import REDLINE_STALE
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.headroom import MetricsHeadroomSource
from rvguard.enforce.redline import RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.errors import TelemetryFormatError
from rvguard.events import Fail

from ._harness import make_contract

WALL = 1_700_000_000.0
KV = "vllm:kv_cache_usage_perc {usage} {ms}\n"


class _Exporter:
    def __init__(self) -> None:
        self.body = ""
        self.server: asyncio.AbstractServer | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        data = self.body.encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(data) + data)
        await writer.drain()
        writer.close()


@pytest.fixture
async def exporter() -> AsyncIterator[tuple[_Exporter, str]]:
    state = _Exporter()
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    yield state, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/metrics"
    server.close()


def _source(url: str, clock: ManualClock, wall: ManualClock, **kw: object) -> MetricsHeadroomSource:
    return MetricsHeadroomSource(url, clock, min_interval=0.0, wall=wall, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stamp_s", "why"),
    [(9_999_999_999.0, "ahead of this clock"), (0.0, "in the past"), (WALL - 400.0, "in the past")],
)
async def test_a_stamp_outside_the_skew_bound_is_refused(
    exporter: tuple[_Exporter, str], stamp_s: float, why: str
) -> None:
    """Year 2286, 1970, and 400 s old: no sample, a named error."""
    state, url = exporter
    state.body = KV.format(usage=0.99, ms=int(stamp_s * 1000))
    source = _source(url, ManualClock(10.0), ManualClock(WALL))
    with pytest.raises(TelemetryFormatError, match=why) as err:
        await source.read()
    assert err.value.field == "kv_cache"


async def test_a_stamp_going_backwards_is_refused(exporter: tuple[_Exporter, str]) -> None:
    state, url = exporter
    clock, wall = ManualClock(10.0), ManualClock(WALL)
    source = _source(url, clock, wall)
    state.body = KV.format(usage=0.5, ms=int((WALL - 1.0) * 1000))
    [first] = await source.read()
    clock.advance(1.0)
    wall.advance(1.0)
    state.body = KV.format(usage=0.99, ms=int((WALL - 5.0) * 1000))
    with pytest.raises(TelemetryFormatError, match="went backwards"):
        await source.read()
    state.body = KV.format(usage=0.25, ms=int(WALL * 1000))
    [later] = await source.read()  # a forward stamp is read again
    assert first.value == 0.5 and later.value == 0.75


@pytest.mark.parametrize(
    ("running", "seqs"),
    [(None, None), ("9", 0.0), ("NaN", None)],
)
async def test_one_bad_series_leaves_the_others(
    exporter: tuple[_Exporter, str], running: str | None, seqs: float | None
) -> None:
    """A KV cache 99 % used is read whatever the running-requests series says (more running than
    C is normal when other clients share the engine: no slot is free)."""
    state, url = exporter
    state.body = "vllm:kv_cache_usage_perc 0.99\n" + (
        f"vllm:num_requests_running {running}\n" if running else ""
    )
    source = _source(url, ManualClock(10.0), ManualClock(WALL), max_num_seqs=4)
    samples = {s.resource: s.value for s in await source.read()}
    assert samples["kv_cache"] == pytest.approx(0.01)
    assert samples.get("seqs") == seqs
    errors = source.take_errors()
    assert [e.field for e in errors] == ([] if seqs is not None else ["vllm:num_requests_running"])
    assert source.take_errors() == []


class _Once:
    """A source that gives one low sample, then nothing new (a stamp repeated for ever)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.given = False

    async def read(self) -> list[object]:
        from rvguard.enforce.redline import HeadroomSample

        if self.given:
            return []
        self.given = True
        return [HeadroomSample("kv_cache", 0.01, self.clock.now())]


async def _blocked(request: Request) -> Response:
    await asyncio.sleep(3600)
    return Response(text="never")


async def test_one_sample_holds_surplus_no_longer_than_the_hold_limit() -> None:
    clock, trace = ManualClock(), []  # type: ignore[var-annotated]
    config = RedlineConfig((ResourceLimit("kv_cache", h_min=0.2, margin=0.1),), alpha=1.0)
    guard = Guard(
        make_contract(slots=1),
        MockDispatcher(_blocked),
        sinks=[trace.append],
        clock=clock,
        headroom=_Once(clock),  # type: ignore[arg-type]
        config=GuardConfig(redline=config, headroom_interval=3600.0),  # polled by hand below
    )
    assert guard.headroom is not None and guard.headroom.hold_limit == 30.0  # no headroom block
    loop = guard.headroom
    loop.hold_limit = 5.0
    async with guard:
        running = asyncio.ensure_future(guard.submit(Request("a", "assured", 0.0)))
        await asyncio.sleep(0.01)
        await loop.poll()  # the one low sample: the redline fires
        held = asyncio.ensure_future(guard.submit(Request("o", "opp", 0.0)))
        await asyncio.sleep(0.01)
        assert guard.core.held == 1 and not held.done()
        clock.advance(4.0)
        await loop.poll()
        assert guard.core.held == 1  # within the hold limit: still held
        clock.advance(2.0)
        await loop.poll()
        outcome = await asyncio.wait_for(held, 1.0)
        running.cancel()
    assert (outcome.status, outcome.reason) == ("failed", REDLINE_STALE)
    [fail] = [e for e in trace if isinstance(e, Fail) and e.rid == "o"]
    assert fail.extra == {"resource": "kv_cache", "sample_time": 0.0}
    assert loop.expired == 1 and not [
        e for e in trace if isinstance(e, Fail) and e.rid == "a" and e.reason == REDLINE_STALE
    ]


def test_the_gateway_answers_a_stale_hold_503_with_a_retry_signal() -> None:
    from rvguard.enforce.core import DecisionCore
    from rvguard.enforce.guard import Outcome
    from rvguard.gateway.answers import Answers

    c = make_contract(slots=1)
    answers = Answers(c, ManualClock(0.0), DecisionCore(c))
    status, body, headers = answers.failure(Outcome("o", "failed", REDLINE_STALE))
    assert (status, body["error"]["code"]) == (503, REDLINE_STALE)
    assert headers["x-should-retry"] == "true" and headers["retry-after"] == "1"
