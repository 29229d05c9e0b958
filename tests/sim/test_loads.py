"""The marquee load: paced assured arrivals put exactly B in every window; the Poisson variant does not."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.errors import SpecError
from rvguard.sim.loads import MARQUEE_CONTRACT, marquee_arrivals


def _per_window(seed: int, rep: int, stream: str) -> Counter[int]:
    reqs = marquee_arrivals(MARQUEE_CONTRACT, seed, rep, assured=stream)
    return Counter(math.floor(r.t) for r in reqs if r.tenant == "assured")


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 50))
def test_paced_assured_arrivals_fill_every_window_with_exactly_b(seed: int, rep: int) -> None:
    counts = _per_window(seed, rep, "paced")
    assert set(counts) == set(range(12)) and set(counts.values()) == {6}  # 72 a run, the study's count


def test_poisson_variant_overflows_some_window() -> None:
    assert any(max(_per_window(seed, 0, "poisson").values()) > 6 for seed in range(3))


def test_the_flood_stays_poisson_and_paired_by_seed() -> None:
    a = marquee_arrivals(MARQUEE_CONTRACT, 4, 2)
    assert a == marquee_arrivals(MARQUEE_CONTRACT, 4, 2)
    opp = sum(r.tenant == "opportunistic" for r in a)
    assert 14 * 12 * 0.6 < opp < 14 * 12 * 1.4


def test_unknown_assured_stream_is_refused() -> None:
    with pytest.raises(SpecError, match="assured stream"):
        marquee_arrivals(MARQUEE_CONTRACT, 0, 0, assured="bursty")
