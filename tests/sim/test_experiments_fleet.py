"""The fleet-pooling experiment: pooling needs a smaller reserve fraction than silos."""

from __future__ import annotations

from pathlib import Path

from rvguard.sim.catalog import EXPERIMENTS
from rvguard.sim.experiments import MARQUEE_CONTRACT
from rvguard.sim.experiments_fleet import erlang_b, fleet_pooling, plot_pooling


def test_pooled_needs_less_reserve_than_siloed(tmp_path: Path) -> None:
    result = fleet_pooling(MARQUEE_CONTRACT, reps=1, engines=(1, 8), arrivals=4000)
    frac = {
        (c.params["engines"], c.params["layout"]): c.params["reserve_fraction"] for c in result.conditions
    }
    assert frac[(1, "pooled")] == frac[(1, "siloed")]  # one engine: nothing to pool
    assert frac[(8, "pooled")] < frac[(8, "siloed")] - 0.1
    for c in result.conditions:
        assert c.assured_miss is not None and c.assured_miss <= 0.01
    assert result.to_dict()["experiment"] == "fleet-pooling"
    png = plot_pooling(result, tmp_path / "pool.png")
    assert png.stat().st_size > 10_000
    assert EXPERIMENTS["fleet-pooling"] is fleet_pooling


def test_erlang_b() -> None:
    assert erlang_b(0, 3.0) == 1.0
    assert abs(erlang_b(5, 3.0) - 0.1101) < 1e-4  # the textbook table value
