"""gaie-fault and capacity-drop: a swapped mapping misses, the guard does not; the watch trades AF for SF."""

from __future__ import annotations

from rvguard.sim.experiments_faults import capacity_drop, gaie_fault

from ._common import MARQUEE


def test_gaie_swapped_mapping_misses_guard_holds() -> None:
    result = gaie_fault(MARQUEE, reps=3, seed=6)
    by = {(c.params["policy"], c.params["learner"]): c for c in result.conditions}
    for learner in ("admit-all", "lsq"):
        assert by["guard", learner].assured_miss == 0.0
        assert by["gaie-correct", learner].assured_miss == 0.0
        assert (by["gaie-swapped", learner].assured_miss or 0.0) >= 0.8
    # the same assured requests: GAIE admits every one under either mapping; the guard admits
    # the floor-entitled ones (excess beyond B in a window is rejected) and all of those attain
    assert by["gaie-correct", "admit-all"].judged == by["gaie-swapped", "admit-all"].judged
    assert sum(by["guard", "admit-all"].judged) <= sum(by["gaie-correct", "admit-all"].judged)
    assert by["guard", "admit-all"].extras["floor_attainment"] == 1.0
    assert {s.label for s in result.series} == {"gaie-correct", "gaie-swapped", "guard"}


def test_capacity_drop_watch_lowers_floor_and_saves_sf() -> None:
    result = capacity_drop(MARQUEE, reps=3, seed=7)
    by = {(c.params["batch_cap"], c.params["floor"]): c for c in result.conditions}
    assert by[4, "fixed"].assured_miss == 0.0
    assert (by[2, "fixed"].assured_miss or 0.0) > 0.05  # fixed floor past the cut capacity
    assert (by[2, "watch"].assured_miss or 0.0) < (by[2, "fixed"].assured_miss or 0.0)
    # the watch's lowered floor is an AF violation against the contract, by design
    assert by[2, "watch"].extras.get("floor_lowered_rejects", 0) > 0
    assert by[2, "watch"].extras["floor_attainment"] < 1.0
    assert sum(by[2, "fixed"].violations) == 0
