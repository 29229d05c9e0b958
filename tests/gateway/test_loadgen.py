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
    assert max(abs(r.sent - r.shot.t) for r in results) < 0.1
    assert all(r.tokens == r.shot.max_tokens for r in results if not r.shot.stream)
    assert all(b["priority"] in (0,) for b, s in zip(up.bodies, shots, strict=False) if s.tenant == "assured")


async def test_replay_reports_transport_errors() -> None:
    async with FakeUpstream() as up:
        url = up.url
    shots = shots_from_trace(SLICE, rate=100.0, limit=2, output_cap=2)
    results = await replay(url, shots, model="fake", timeout=1.0)
    assert [r.status for r in results] == [0, 0] and all(r.error for r in results)
