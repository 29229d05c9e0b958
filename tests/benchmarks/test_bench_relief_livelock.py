"""The relief-livelock benchmark's arms against the fake upstream, opt-in (``pytest -m benchmark``).

Asserts what the measurement must get right whatever the machine: each arm starts ``rvguard serve``
with its relief (``--bare-preemption`` or ``--relief-capacity``), the SDK's calls and answers are
counted, the trace is read and judged, and the engine's geometry gives the sustainable level. The
livelock itself needs the real engine (docs/headroom.md, "The live livelock case"), never run here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks import bench_relief_livelock as bench
from rvguard.gateway.fake import FakeUpstream

pytestmark = pytest.mark.benchmark


def test_the_geometry_leaves_room_for_four_above_the_hard_floor() -> None:
    geo = bench.geometry()
    assert geo == {"capacity": 5120, "footprint": 1024, "above_floor": 4, "above_h_min": 3}
    assert bench.geometry(blocks=12, prompt=100, output=100)["footprint"] == 224  # whole blocks


def test_held_seconds_runs_from_demote_to_restore_or_end() -> None:
    events = [
        {"kind": "demote", "rid": "a", "t": 1.0},
        {"kind": "demote", "rid": "b", "t": 1.5},
        {"kind": "restore", "rid": "a", "t": 3.0},
        {"kind": "fail", "rid": "b", "t": 11.5, "reason": "hold-bound"},
        {"kind": "complete", "rid": "a", "t": 4.0},
    ]
    assert bench.held_seconds(events) == [2.0, 10.0]
    counts = bench.trace_counts(events)
    assert (counts["hold_bound"], counts["longest_held_s"], counts["completed"]) == (1, 10.0, 1)


@pytest.mark.parametrize("arm", ["bare", "rationed"])
async def test_an_arm_counts_the_sdk_calls_and_judges_the_trace(arm: str, tmp_path: Path) -> None:
    args = argparse.Namespace(clients=3, seconds=1.5, timeout=20.0, hold_bound=2.0)
    async with FakeUpstream(slots=8, token_delay=0.0002, metrics=True, model="tiny") as up:
        row = await bench.run_arm(arm, up.url, tmp_path, args)
    assert row["calls"].get("ok", 0) >= 3 and row["completed"] == row["calls"]["ok"]
    assert row["answers"]["200"] == row["calls"]["ok"] and row["dispatches"] >= row["completed"]
    assert row["samples"] > 0 and row["violations"] == 0
    assert sum(row["chains"].values()) == sum(row["calls"].values())  # each call's answers, in order
    assert sum(n * len(c.split()) for c, n in row["chains"].items()) == sum(row["answers"].values())
    assert (tmp_path / f"{arm}.jsonl").exists() and row["wall_s"] >= 1.5
