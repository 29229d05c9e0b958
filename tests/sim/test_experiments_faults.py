"""gaie-fault and capacity-drop: a swapped mapping misses, the guard does not; the watch trades AF for SF."""

from __future__ import annotations

from rvguard.sim.experiments_faults import capacity_drop, gaie_fault

from ._common import MARQUEE


def test_gaie_swapped_mapping_misses_guard_holds() -> None:
    result = gaie_fault(MARQUEE, reps=2, seed=6)
    by = {(c.params["policy"], c.params["learner"]): c for c in result.conditions}
    for learner in ("admit-all", "lsq"):
        assert by["guard", learner].assured_miss == 0.0
        assert by["gaie-correct", learner].assured_miss == 0.0
        assert (by["gaie-swapped", learner].assured_miss or 0.0) >= 0.8
    # the same assured requests: GAIE admits every one under either mapping
    assert by["gaie-correct", "admit-all"].judged == by["gaie-swapped", "admit-all"].judged
    assert by["guard", "admit-all"].floor_attainment == 1.0
    # a burst past capacity: strict priority protects the high band only partly, the low band not at all
    high = by["gaie-correct", "burst"]
    assert 0.05 < (high.assured_miss or 0.0) < (high.to_dict()["opp_miss"] or 0.0)
    assert by["guard", "burst"].assured_miss == 0.0  # the guard admits the floor only
    assert {s.label for s in result.series} == {"gaie-correct", "gaie-swapped", "guard"}


def test_capacity_drop_watch_lowers_floor_and_saves_sf() -> None:
    result = capacity_drop(MARQUEE, reps=2, seed=7)
    by = {(c.params["batch_cap"], c.params["floor"]): c for c in result.conditions}
    assert by[4, "fixed"].assured_miss == 0.0
    assert by[1, "fixed"].params["throughput_cut"] > 0.5
    fixed, watch = by[1, "fixed"], by[1, "watch"]
    assert (fixed.assured_miss or 0.0) > 0.3  # fixed floor past the cut capacity: unmet is late
    assert fixed.to_dict()["rejected"] == 0
    assert (watch.assured_miss or 0.0) < 0.1  # the lowered floor serves what it admits
    # the watch's lowered floor is an AF violation against the contract, by design
    assert watch.to_dict()["floor_lowered_rejects"] > 0
    assert (watch.floor_attainment or 1.0) < 1.0
    assert fixed.af_violations == 0
