"""deadline-sweep, floor-sweep and stress: the edges of the guarantee, in shape (DESIGN §7)."""

from __future__ import annotations

from rvguard.sim.experiments_stress import DEADLINES, FLOORS, deadline_sweep, floor_sweep, stress

from ._common import MARQUEE


def test_deadline_sweep_shape() -> None:
    result = deadline_sweep(MARQUEE, reps=3, seed=4)
    assert {c.params["deadline"] for c in result.conditions} == set(DEADLINES)
    guarded = {c.params["deadline"]: c for c in result.conditions if c.params["guard"]}
    unguarded = {c.params["deadline"]: c for c in result.conditions if not c.params["guard"]}
    # below the batch-1 service (≈ 0.236 s) every admitted assured request misses, guard or not
    assert guarded[0.2].assured_miss == 1.0 == unguarded[0.2].assured_miss
    # at and above the marquee deadline the guard holds; the unguarded flood still misses
    for d in (1.82, 2.64):
        assert guarded[d].assured_miss == 0.0
        assert (unguarded[d].assured_miss or 0.0) >= 0.5
    # the guarded miss does not rise with the deadline
    misses = [guarded[d].assured_miss or 0.0 for d in sorted(guarded)]
    assert misses == sorted(misses, reverse=True)
    assert all(sum(c.violations) == 0 for c in result.conditions)
    assert result.x_key == "deadline"


def test_floor_sweep_breaks_past_capacity() -> None:
    result = floor_sweep(MARQUEE, reps=2, seed=5)
    by = {c.params["floor"]: c for c in result.conditions}
    assert set(by) == set(FLOORS)
    for c in result.conditions:
        rho = c.extras["rho_eff"]
        assert rho is not None
        if rho < 0.7:
            assert c.assured_miss == 0.0, c.params
        if rho > 1.1 and c.params["floor"] >= 12:
            assert (c.assured_miss or 0.0) > 0.2, (c.params, rho)
    # ρ_eff rises with the floor, and attainment falls once past capacity
    rhos = [by[b].extras["rho_eff"] for b in sorted(by)]
    assert rhos == sorted(rhos)
    assert by[max(FLOORS)].extras["floor_attainment"] < by[min(FLOORS)].extras["floor_attainment"]


def test_stress_grid_and_json_shape() -> None:
    result = stress(MARQUEE, reps=1, seed=0)
    cells = {(c.params["floor"], c.params["deadline"]) for c in result.conditions}
    assert len(cells) == len(result.conditions) == 12
    d = result.to_dict()
    assert d["experiment"] == "stress"
    assert set(d["conditions"][0]) >= {"params", "reps", "assured_miss", "assured_miss_ci"}
    # the tightest deadline with the largest floor is the worst cell
    worst = max(result.conditions, key=lambda c: c.assured_miss or 0.0)
    assert (worst.params["floor"], worst.params["deadline"]) == (12, 1.0)
