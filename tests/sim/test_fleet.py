"""The fleet model: deterministic, invariant-keeping, and one engine is one engine either way."""

from __future__ import annotations

import random

import pytest

from rvguard.sim.fleet import FleetModel, simulate_fleet

MODEL = FleetModel(engines=4, slots=8, assured_load=2.0)


def test_a_seeded_run_repeats_exactly() -> None:
    runs = [simulate_fleet(MODEL, "pooled", 12, arrivals=2000, rng=random.Random(5)) for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("layout", ["pooled", "siloed"])
def test_invariants_hold_at_every_event(layout: str) -> None:
    reserve = 12 if layout == "pooled" else 3
    run = simulate_fleet(MODEL, layout, reserve, arrivals=2000, rng=random.Random(1), check=True)
    assert run.arrived == 1800 and 0 < run.missed < run.arrived


def test_one_engine_pooled_is_one_engine_siloed() -> None:
    one = FleetModel(engines=1, slots=8, assured_load=2.0)
    got = {
        lay: simulate_fleet(one, lay, 4, arrivals=3000, rng=random.Random(2)) for lay in ("pooled", "siloed")
    }
    assert got["pooled"] == got["siloed"]


@pytest.mark.parametrize("layout", ["pooled", "siloed"])
def test_more_reserve_means_fewer_waits(layout: str) -> None:
    limit = 8 if layout == "siloed" else 32
    misses = [
        simulate_fleet(MODEL, layout, r, arrivals=3000, rng=random.Random(3)).miss
        for r in (0, limit // 4, limit // 2, limit)
    ]
    assert misses[0] > 0.5 and misses[-1] == 0.0
    assert misses == sorted(misses, reverse=True)


def test_the_reserve_is_validated() -> None:
    with pytest.raises(ValueError, match=r"\[0, 8\]"):
        simulate_fleet(MODEL, "siloed", 9, arrivals=10, rng=random.Random(0))
