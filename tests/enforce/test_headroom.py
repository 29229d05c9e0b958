"""Headroom telemetry: vLLM's /metrics served by a real HTTP server on 127.0.0.1, and a callable."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rvguard.clock import ManualClock
from rvguard.enforce.headroom import CallableHeadroomSource, MetricsHeadroomSource, samples_from_exposition
from rvguard.enforce.redline import HeadroomSample
from rvguard.errors import TelemetryFormatError, TelemetryUnavailableError

# the shape vLLM V1 exports (names as in the .venv-vllm engine; two label sets for two engines)
EXPOSITION = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 5.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.75
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25
"""


class _Exporter:
    """What the fake /metrics answers: (status, body), changed by the test."""

    def __init__(self) -> None:
        self.status, self.body, self.hits = 200, EXPOSITION, 0


@pytest.fixture
def exporter() -> Iterator[tuple[_Exporter, str]]:
    state = _Exporter()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.hits += 1
            data = state.body.encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # serve_forever polls for shutdown every 0.5 s by default, so shutdown() waited up to that long
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


async def test_scrape_gives_kv_and_seq_headroom_stamped_with_the_scrape_time(
    exporter: tuple[_Exporter, str],
) -> None:
    state, url = exporter
    clock = ManualClock(7.0)
    source = MetricsHeadroomSource(url, clock, min_interval=5.0, max_num_seqs=4)
    samples = await source.read()
    # the busiest engine decides kv (usage 0.75 → headroom 0.25); 3 of 4 seqs run → 0.25
    assert samples == [HeadroomSample("kv_cache", 0.25, 7.0), HeadroomSample("seqs", 0.25, 7.0)]
    clock.advance(4.9)
    assert await source.read() == []  # faster than the exporter refreshes: no scrape
    assert state.hits == 1
    clock.advance(0.1)
    assert len(await source.read()) == 2
    assert state.hits == 2


STAMPED = "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc {usage} {ms}\n"


def test_a_payload_timestamp_places_the_sample_by_its_age_on_the_guards_clock() -> None:
    # a Prometheus stamp is Unix milliseconds; the guard's clock reads 99 s at the scrape, the
    # wall clock 1234.6 s: the reading is 0.1 s old, so it is the guard's 98.9, not 1234.5
    text = STAMPED.format(usage=0.5, ms=1234500)
    [sample] = samples_from_exposition(text, 99.0, wall_at=1234.6)
    assert (sample.resource, sample.value) == ("kv_cache", 0.5)
    assert sample.t == pytest.approx(98.9, abs=1e-9)
    # an exporter whose clock runs ahead of ours: age 0, never a sample from the future
    assert samples_from_exposition(text, 99.0, wall_at=1200.0)[0].t == 99.0
    unstamped = "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.1\n"
    assert samples_from_exposition(unstamped, 1.0, wall_at=5e9) == [HeadroomSample("kv_cache", 0.9, 1.0)]


async def test_a_stamp_served_again_is_no_sample(exporter: tuple[_Exporter, str]) -> None:
    state, url = exporter
    clock, wall = ManualClock(10.0), ManualClock(1_700_000_000.0)
    source = MetricsHeadroomSource(url, clock, min_interval=1.0, wall=wall)
    state.body = STAMPED.format(usage=0.5, ms=1_699_999_999_500)
    [first] = await source.read()
    assert first.t == pytest.approx(9.5)
    clock.advance(1.0)
    wall.advance(1.0)
    assert await source.read() == []  # the exporter has not refreshed: the same reading, older
    assert state.hits == 2
    state.body = STAMPED.format(usage=0.75, ms=1_700_000_001_800)
    clock.advance(1.0)
    wall.advance(1.0)
    [second] = await source.read()
    assert (second.value, second.t) == (0.25, pytest.approx(11.8))


def test_the_old_metric_name_is_read_when_the_new_one_is_absent() -> None:
    text = "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.1\n"
    assert samples_from_exposition(text, 1.0, wall_at=0.0) == [HeadroomSample("kv_cache", 0.9, 1.0)]


async def test_an_unreachable_engine_is_a_telemetry_unavailable_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/metrics"
    with pytest.raises(TelemetryUnavailableError) as info:
        await MetricsHeadroomSource(url, ManualClock(), timeout=1.0).read()
    assert info.value.source == url


async def test_an_http_error_status_is_unavailable(exporter: tuple[_Exporter, str]) -> None:
    state, url = exporter
    state.status, state.body = 503, "overloaded"
    with pytest.raises(TelemetryUnavailableError, match="HTTP 503"):
        await MetricsHeadroomSource(url, ManualClock()).read()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("this is { not exposition", ""),
        ("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 1\n", "vllm:kv_cache_usage_perc"),
        ("vllm:kv_cache_usage_perc 1.5\n", "vllm:kv_cache_usage_perc"),
        ("vllm:kv_cache_usage_perc NaN\n", "vllm:kv_cache_usage_perc"),
    ],
)
async def test_malformed_exposition_is_a_format_error_naming_the_metric(
    exporter: tuple[_Exporter, str], body: str, field: str
) -> None:
    state, url = exporter
    state.body = body
    with pytest.raises(TelemetryFormatError) as info:
        await MetricsHeadroomSource(url, ManualClock(), max_num_seqs=4).read()
    assert (info.value.source, info.value.field) == (url, field)


async def test_a_callable_source_stamps_its_answers_and_checks_them() -> None:
    clock = ManualClock(3.0)
    assert await CallableHeadroomSource(lambda: {"kv_cache": 0.4}, clock).read() == [
        HeadroomSample("kv_cache", 0.4, 3.0)
    ]
    with pytest.raises(TelemetryFormatError) as info:
        await CallableHeadroomSource(lambda: {"kv_cache": 2.0}, clock).read()
    assert info.value.field == "kv_cache"


@given(
    scraped_at=st.floats(0.0, 1e6),
    wall_at=st.floats(1.6e9, 1.8e9),
    age_ms=st.integers(-10_000, 600_000),
)
def test_a_stamped_sample_is_never_newer_than_its_scrape(
    scraped_at: float, wall_at: float, age_ms: int
) -> None:
    stamp_ms = int(wall_at * 1000) - age_ms  # the exporter's Unix milliseconds
    [sample] = samples_from_exposition(STAMPED.format(usage=0.5, ms=stamp_ms), scraped_at, wall_at=wall_at)
    age = wall_at - stamp_ms / 1000
    assert sample.t <= scraped_at
    assert sample.t == pytest.approx(scraped_at - max(0.0, age), abs=1e-5)
