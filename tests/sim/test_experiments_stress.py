"""deadline-sweep, floor-sweep and stress: the edges of the guarantee, in shape (the reference study)."""

from __future__ import annotations

from rvguard.sim.experiments_stress import DEADLINES, FLOORS, deadline_sweep, floor_sweep, stress

from ._common import MARQUEE


def test_deadline_sweep_shape() -> None:
    """At B = C (ρ_eff ≈ 0.4): the guard holds down to about twice the service and breaks below it."""
    result = deadline_sweep(MARQUEE, reps=2, seed=4)
    by = {(c.params["deadline"], c.params["arm"]): c for c in result.conditions}
    assert {d for d, _ in by} == set(DEADLINES)
    for c in result.conditions:
        rho = c.rho_eff
        assert rho is not None and 0.3 < rho < 0.6  # sub-capacity, the study's ≈ 0.45 cell
        assert c.dr_wf_violations == 0 and c.af_violations == 0
    assert by[1.856, "guard"].assured_miss == 0.0 == by[1.2, "guard"].assured_miss
    assert (by[0.35, "guard"].assured_miss or 0.0) > 0.5  # below the service: a feasibility limit
    assert (by[1.856, "unguarded"].assured_miss or 0.0) > 0.5  # the flood drowns FIFO at any D
    misses = [by[d, "guard"].assured_miss or 0.0 for d in sorted(DEADLINES)]
    assert misses == sorted(misses, reverse=True)  # the guard's miss never rises with D
    # deferred drop fires (on doomed opportunistic work) and never breaks DR
    assert sum(c.to_dict()["dr_drops"] for c in result.conditions if c.params["arm"] == "guard+DR") > 0
    assert result.x_key == "deadline"


def test_floor_sweep_breaks_past_rho_eff_one() -> None:
    result = floor_sweep(MARQUEE, reps=1, seed=5)
    by = {c.params["floor"]: c for c in result.conditions}
    assert set(by) == set(FLOORS)
    rhos = [by[b].rho_eff or 0.0 for b in sorted(by)]
    assert rhos == sorted(rhos)  # ρ_eff rises with the floor
    for c in result.conditions:
        rho = c.rho_eff or 0.0
        if rho < 0.9:
            assert c.assured_miss == 0.0, (c.params, rho)
        if rho > 1.15:
            assert (c.assured_miss or 0.0) > 0.3, (c.params, rho)  # past capacity no guard helps
    assert (by[max(FLOORS)].floor_attainment or 0.0) < (by[min(FLOORS)].floor_attainment or 0.0)
    assert by[max(FLOORS)].to_dict()["max_assured_backlog"] > max(FLOORS)  # Q_A ≤ B no longer holds


def test_stress_grid_and_json_shape() -> None:
    result = stress(MARQUEE, reps=1, seed=0)
    cells = {(c.params["floor"], c.params["deadline"]) for c in result.conditions}
    assert len(cells) == len(result.conditions) == 12
    d = result.to_dict()
    assert d["experiment"] == "stress"
    keys = {
        "params",
        "reps",
        "assured_miss",
        "assured_miss_ci",
        "offered_unmet",
        "floor_attainment",
        "rho_eff",
    }
    assert set(d["conditions"][0]) >= keys
    # the tightest deadline with the largest floor is the worst cell
    worst = max(result.conditions, key=lambda c: c.assured_miss or 0.0)
    assert (worst.params["floor"], worst.params["deadline"]) == (12, 0.4)
    assert all(c.dr_wf_violations == 0 for c in result.conditions)
