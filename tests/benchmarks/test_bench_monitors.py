"""The monitor benchmark's quick mode, opt-in (``pytest -m benchmark``).

Asserts what the benchmark must get right whatever the machine: on the same
synthetic traces the online monitor, the offline checker, the hand-written
SF checker and reelay report the same late requests. Speed is measured and
recorded in docs/performance.md, never asserted here (a shared machine).
"""

from __future__ import annotations

import pytest

from benchmarks import bench_monitors as bench
from rvguard.contract import load_contract
from rvguard.monitors import Monitor

pytestmark = pytest.mark.benchmark


@pytest.fixture(scope="module")
def quick_report() -> dict[str, object]:
    return bench.run([10_000, 100_000], repeats=1, reelay_repeats=1)


def test_quick_mode_agrees_with_both_baselines(quick_report: dict[str, object]) -> None:
    results = quick_report["results"]
    assert isinstance(results, list)
    assert [r["n"] for r in results] == [10_000, 100_000]
    for r in results:
        assert r["agree_handwritten"] is True
        assert r["agree_offline"] is True
        assert r["agree_reelay"] is True
        assert r["reelay_late"] == r["sf_violations"]
        assert r["max_live"] <= 1000
    assert results[-1]["sf_violations"] > 0  # the trace does exercise SF


def test_quick_mode_reports_memory_and_a_table(quick_report: dict[str, object]) -> None:
    memory = quick_report["memory"]
    assert isinstance(memory, dict)
    assert memory["n"] == 100_000
    assert memory["online_peak_rss_mb"] > 0
    text = bench.table(quick_report)
    assert "online/hand" in text
    assert "offline/online" in text
    assert "online/reelay" in text


def test_every_property_is_exercised() -> None:
    """The synthetic workload violates AF, SF and DR, and RB and CAP (it dispatches with no regard
    for the C slots), never WF."""
    contract = load_contract(bench.CONTRACT_PATH)
    monitor = Monitor(contract)
    for ev in bench.TraceGenerator(200_000, contract):
        monitor.feed(ev)
    found = {v.property for v in monitor.violations()}
    assert found == {"AF", "SF", "DR", "RB", "CAP"}


def test_handwritten_checker_catches_a_late_completion() -> None:
    """The baseline itself can fail: one entitled request completes 1 ms late."""
    from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch

    contract = load_contract(bench.CONTRACT_PATH)
    d = contract.tenants["assured"].deadline
    events = [
        Arrive(t=0.0, rid="a", tenant="assured"),
        Admit(t=0.001, rid="a", basis=Basis.FLOOR),
        Dispatch(t=0.002, rid="a"),
        Complete(t=d + 0.001, rid="a"),
    ]
    assert bench.handwritten_sf(events, contract) == [(d, "a")]
    assert bench.run_online(events, contract) == [(d, "a")]
    on_time = [*events[:3], Complete(t=d, rid="a")]
    assert bench.handwritten_sf(on_time, contract) == []
