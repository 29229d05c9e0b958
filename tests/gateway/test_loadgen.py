"""The open-loop load generator: a real trace slice, time-scaled; replay keeps the schedule."""

from __future__ import annotations

import pytest

from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.loadgen import replay, shots_from_trace
from rvguard.io.public import EveryKthRule

from ..conftest import SHARED_TRACES

SLICE = SHARED_TRACES / "azure_conv_slice.csv"


def test_shots_are_time_scaled_and_capped() -> None:
    shots = shots_from_trace(
        SLICE, rate=50.0, limit=51, tenant_rule=EveryKthRule(3), output_cap=20, stream_every=4
    )
    assert len(shots) == 51 and shots[0].t == 0.0
    assert shots[-1].t == pytest.approx(1.0)  # 50 gaps at 50 req/s
    assert all(1 <= s.max_tokens <= 20 for s in shots)
    assert [s.tenant for s in shots[:3]] == ["opportunistic", "opportunistic", "assured"]
    assert [i for i, s in enumerate(shots[:8]) if s.stream] == [3, 7]


async def test_replay_is_open_loop() -> None:
    shots = shots_from_trace(SLICE, rate=100.0, limit=20, output_cap=5, stream_every=2)
    async with FakeUpstream(
        slots=1, token_delay=0.01
    ) as up:  # slow: a closed loop would stretch the schedule
        results = await replay(up.url, shots, model="fake", keys={"assured": "k"}, priorities={"assured": 0})
    assert [r.status for r in results] == [200] * 20
    assert up.connections == 20  # one connection per request: none reused (see fresh_connections)
    # a closed loop behind this one slot sends the last of these 20 about 0.95 s late (measured);
    # open, the lag is the client's own (~2 ms here, 0.33 s once on a loaded clean-clone run)
    assert max(abs(r.sent - r.shot.t) for r in results) < 0.4
    assert all(r.tokens == r.shot.max_tokens for r in results if not r.shot.stream)
    assert all(b["priority"] in (0,) for b, s in zip(up.bodies, shots, strict=False) if s.tenant == "assured")
    # when its headers reached the kernel: after the client took the shot up, before the answer
    assert all(r.wrote is not None and r.sent <= r.wrote <= r.done for r in results)
    # when the answer's last bytes reached the client's kernel: after the write, by the end
    assert all(r.landed is not None and r.wrote <= r.landed <= r.done for r in results)  # type: ignore[operator]


async def test_replay_reports_transport_errors() -> None:
    async with FakeUpstream() as up:
        url = up.url
    shots = shots_from_trace(SLICE, rate=100.0, limit=2, output_cap=2)
    results = await replay(url, shots, model="fake", timeout=1.0)
    assert [r.status for r in results] == [0, 0] and all(r.error for r in results)
    assert all(r.wrote is None for r in results)  # refused: nothing was ever written


async def test_an_answer_read_late_is_dated_when_it_reached_the_clients_kernel() -> None:
    """The client's own lag in reading is measured, not charged to the server: its loop is blocked
    0.3 s with the answer in its kernel; ``landed`` is about that much before the read."""
    import time

    import httpx

    from rvguard.clock import MonotonicClock
    from rvguard.gateway.loadgen import _Stamps
    from rvguard.gateway.upstream import fresh_connections

    body = {"model": "fake", "prompt": "x", "max_tokens": 3}
    async with FakeUpstream() as up, httpx.AsyncClient(limits=fresh_connections()) as client:
        at = _Stamps(MonotonicClock(), 0.0)
        url = up.url + "/v1/completions"
        async with client.stream("POST", url, json=body, extensions={"trace": at.hook}) as resp:
            time.sleep(0.3)  # the answer arrives meanwhile; nobody reads it
            await resp.aread()
    assert at.wrote is not None and at.read is not None and at.landed is not None
    assert 0.1 <= at.read - at.landed <= at.read - at.wrote
