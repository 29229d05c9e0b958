"""The redline benchmark's Guard arms, opt-in (``pytest -m benchmark``).

Asserts what the Guard-level comparison must get right whatever the machine: every arm serves the
same requests to the same ends, the quiet arm's redline reads samples and never acts, the noisy
arm's demotes and restores, and nothing is left held. Speed is recorded in docs/performance.md,
never asserted here (a shared machine).
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from benchmarks import bench_redline as bench

pytestmark = pytest.mark.benchmark

N = 600


def _trace(arm: str) -> Counter[str]:
    kinds: Counter[str] = Counter()
    values = [s.value for s in bench.signal(400)]
    signal = None if arm == "without" else bench._Signal([0.9] if arm == "quiet" else values)
    cpu, wall = asyncio.run(bench._drive(N, 10, signal, kinds))
    assert cpu > 0 and wall > 0
    return kinds


def test_the_three_arms_serve_the_same_requests_and_only_the_noisy_one_acts() -> None:
    without, quiet, noisy = (_trace(arm) for arm in bench.ARMS)
    for kinds in (without, quiet, noisy):
        assert kinds["arrive"] == N
        assert kinds["complete"] + kinds["reject"] == N  # every request ended, none held at the end
    assert without["sample"] == 0 and without["demote"] == 0
    assert quiet["sample"] >= 2 * N // 10 and quiet["demote"] == 0
    assert noisy["demote"] > 0 and noisy["demote"] == noisy["restore"]
