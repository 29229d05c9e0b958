"""One engine's view, as the router reads it: no view before telemetry, slots or /metrics after."""

from __future__ import annotations

import pytest

from rvguard.clock import ManualClock
from rvguard.enforce.redline import HeadroomSample
from rvguard.gateway.engines import PROBE_MISSES, Engine
from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.upstream import UpstreamDispatcher

from ._support import contract


def _engine(url: str = "http://127.0.0.1:9", slots: int = 4) -> tuple[Engine, ManualClock]:
    clock = ManualClock(10.0)
    client = UpstreamDispatcher(url, contract=contract())
    return Engine("e0", client, slots=slots, clock=clock, interval=0.1), clock


def test_no_view_before_telemetry_is_known() -> None:
    e, clock = _engine()
    v = e.view(clock.now())
    assert (v.headroom, v.view_time, v.alive) == (0.0, None, True)


def test_slots_view_is_fresh_and_counts_own_requests() -> None:
    e, clock = _engine(slots=4)
    e.telemetry = "slots"
    e.in_flight = 3
    v = e.view(clock.now())
    assert (v.headroom, v.view_time, v.in_flight, v.free) == (0.25, 10.0, 3, True)
    e.in_flight = 4
    assert not e.view(clock.now()).free


def test_metrics_view_is_the_projection_capped_by_free_slots_and_ages() -> None:
    e, clock = _engine(slots=4)
    e.telemetry = "metrics"
    e.redline.observe(HeadroomSample("kv_cache", 0.9, 9.0))
    e.redline.observe(HeadroomSample("kv_cache", 0.5, 9.5))  # falling: Ĥ 0.7, slope -0.4/s
    v = e.view(clock.now())
    assert v.view_time == 9.5
    assert v.headroom == pytest.approx(0.3)  # min(Ĥ, Ĥ + 1 s·dĤ/dt) = 0.7 − 0.4
    e.in_flight = 4
    assert e.view(clock.now()).headroom == 0.0  # its own slots are all taken


def test_down_and_up() -> None:
    e, clock = _engine()
    e.down("refused")
    e.down("refused again")
    assert not e.view(clock.now()).alive and e.failures == 2
    e.up()
    assert e.view(clock.now()).alive


def test_slow_probes_take_an_engine_out_only_when_they_come_in_a_row() -> None:
    """A busy engine misses a probe now and then and stays in rotation; PROBE_MISSES in a row do not."""
    e, clock = _engine()
    for _ in range(PROBE_MISSES - 1):
        e.probe_missed("slow")
    assert e.view(clock.now()).alive and e.failures == 0
    e.up()  # a probe answered: the count starts again
    for _ in range(PROBE_MISSES - 1):
        e.probe_missed("slow")
    assert e.view(clock.now()).alive
    e.probe_missed("slow")
    assert not e.view(clock.now()).alive and e.failures == 1


@pytest.mark.parametrize(("metrics", "telemetry"), [(True, "metrics"), (False, "slots")])
async def test_first_scrape_decides_the_telemetry(metrics: bool, telemetry: str) -> None:
    async with FakeUpstream(metrics=metrics) as up:
        e, _ = _engine(up.url)
        await e.scrape()
        assert e.telemetry == telemetry
        if metrics:
            up.metrics_status = 503
            await e.scrape()
            assert e.telemetry == "metrics" and "503" in e.scrape_error  # a failure only ages the view
        await e.dispatcher.aclose()
