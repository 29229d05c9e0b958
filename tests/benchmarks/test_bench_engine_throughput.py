"""The engine-throughput benchmark's paths against the fake upstream, opt-in (``pytest -m benchmark``).

Asserts what the measurement must get right whatever the machine: every path completes requests and
reads the engine's running gauge, the gateway's trace yields the slot refill waits when clients
queue at the gateway, and the summary pairs each round's paths. Speed is recorded in
docs/performance.md from real-engine runs, never asserted here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_engine_throughput as bench
from rvguard.gateway.fake import FakeUpstream

pytestmark = pytest.mark.benchmark


async def test_every_path_completes_and_the_gateway_refills_its_slots(tmp_path: Path) -> None:
    async with FakeUpstream(slots=4, token_delay=0.002) as up:
        kw = {"clients": 8, "seconds": 1.5, "tokens": 8, "model": up.model}
        plain = await bench.closed_loop(up.url, up.url, **kw)
        streamed = await bench.closed_loop(up.url, up.url, stream=True, **kw)
        gated = await bench.through_gateway(up.url, tmp_path, **kw)
    for got in (plain, streamed, gated):
        assert got["req_per_s"] > 0 and got["engine_running_mean"] is not None
    assert gated["refills"] > 0 and gated["refill_p50_ms"] >= 0.0  # 8 clients queue behind C = 4


def test_summary_pairs_rounds() -> None:
    rows = [
        {"round": r, "concurrency": 4, "path": p, "req_per_s": v, "engine_running_mean": 3.0,
         "loadavg_1m_before": 0.5, "loadavg_1m_after": 1.0, "foreign_cpu": 0.1}
        for r, p, v in [(0, "engine", 10.0), (0, "gateway", 8.0), (1, "engine", 12.0), (1, "gateway", 12.0)]
    ]  # fmt: skip
    cell = bench.summarise(rows)["4"]
    assert cell["gateway/engine"] == {"median": 0.9, "rounds": [0.8, 1.0]}
    assert cell["engine_req_per_s"] == 11.0 and "gateway/engine-stream" not in cell
