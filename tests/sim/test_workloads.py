"""Workloads: rates, burstiness, the tenant rule, and replay of the shared public traces."""

from __future__ import annotations

import itertools
import random
import statistics
from pathlib import Path

import pytest

from rvguard.sim.workloads import bursty, poisson, replay, split_rate

from ._common import MARQUEE

TRACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def test_poisson_rates_and_tenants() -> None:
    reqs = poisson(MARQUEE, random.Random(0), assured_rate=6.0, opp_rate=14.0, duration=200.0)
    assured = [r for r in reqs if r.tenant == "assured"]
    assert len(assured) / 200 == pytest.approx(6.0, rel=0.1)
    assert len(reqs) / 200 == pytest.approx(20.0, rel=0.1)
    assert [r.rid for r in reqs] == [f"r{i}" for i in range(len(reqs))]
    assert all(r.max_tokens == 16 for r in reqs)
    assert [r.t for r in reqs] == sorted(r.t for r in reqs)


def test_bursty_has_requested_cv() -> None:
    reqs = bursty(MARQUEE, random.Random(0), assured_rate=10.0, opp_rate=0.0, duration=2000.0, cv=3.0)
    gaps = _gaps([r.t for r in reqs])
    cv = statistics.pstdev(gaps) / statistics.mean(gaps)
    assert cv == pytest.approx(3.0, rel=0.15)
    assert len(reqs) / 2000 == pytest.approx(10.0, rel=0.15)
    with pytest.raises(ValueError, match="cv"):
        bursty(MARQUEE, random.Random(0), assured_rate=1.0, opp_rate=0.0, duration=1.0, cv=0.0)


def test_split_rate_gives_assured_its_floor_rate() -> None:
    assert split_rate(MARQUEE, 20.0) == (6.0, 14.0)
    assert split_rate(MARQUEE, 4.0) == (4.0, 0.0)


def test_output_tokens_capped() -> None:
    reqs = poisson(MARQUEE, random.Random(0), assured_rate=1.0, opp_rate=0.0, duration=10.0, tokens=500)
    assert {r.max_tokens for r in reqs} == {48}


@pytest.mark.parametrize(
    "name", ["azure_code_slice.csv", "azure_conv_slice.csv", "mooncake_conv_slice.jsonl"]
)
def test_replay_public_trace(name: str) -> None:
    path = TRACES / name
    if not path.is_file():
        pytest.skip(f"{path} not present")
    reqs = replay(path, MARQUEE, rate=20.0, duration=30.0, seed=1)
    assert reqs and all(r.t < 30.0 for r in reqs)
    assert all(r.max_tokens is not None and r.max_tokens <= 48 for r in reqs)
    frac = sum(r.tenant == "assured" for r in reqs) / len(reqs)
    assert frac == pytest.approx(6.0 / 20.0, abs=0.1)
