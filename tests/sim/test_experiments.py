"""Shape of the reference study's results (DESIGN §7) at reduced reps."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rvguard.contract import Contract, load_contract
from rvguard.errors import SpecError
from rvguard.sim.experiments import Condition, beta_sweep, fifo_ablation, require_roles
from rvguard.sim.experiments import marquee_arrivals as experiment_arrivals
from rvguard.sim.record import RunRecord
from rvguard.sim.run import run_once
from rvguard.sim.runner import mean_assured_service
from rvguard.sim.workloads import poisson

from ._common import MARQUEE, marquee_arrivals


def test_beta_sweep_guard_holds_at_every_beta_and_beta_moves_the_unguarded_arm() -> None:
    result = beta_sweep(MARQUEE, reps=3, seed=1)
    by = {
        (c.params["beta"], c.params["guard"], c.params["learner"], c.params["assured"]): c
        for c in result.conditions
    }
    assert {b for b, *_ in by} == {0.0, 0.5, 1.0, 2.0}
    for (_, guard, _, stream), c in by.items():
        assert c.reps == 3
        lo, hi = c.assured_miss_ci
        assert 0.0 <= lo <= (c.assured_miss or 0.0) <= hi <= 1.0
        if guard:
            assert c.assured_miss == 0.0 and c.dr_wf_violations == 0 and c.af_violations == 0
            assert c.floor_attainment == 1.0
            if stream == "paced":  # the study's "none rejected": no paced window holds more than B
                assert c.offered_unmet == 0.0 and c.to_dict()["rejected"] == 0
    for stream in ("paced", "poisson"):
        miss = [by[beta, False, "lsq", stream].assured_miss or 0.0 for beta in (0.0, 0.5, 1.0, 2.0)]
        assert miss[0] > 0.8  # β = 0 admits everything: overload
        assert miss == sorted(miss, reverse=True) and miss[3] < miss[0] - 0.3  # β moves it
        # Poisson assured at B/W overflows windows: the guard rejects burst excess (offered-basis unmet)
        if stream == "poisson":
            assert (by[0.0, True, "lsq", stream].offered_unmet or 0.0) > 0.05
    # class-agnostic: β = 0 fails by overload, β = 1 by rejecting assured (unmet above admitted miss)
    over, under = by[0.0, False, "lsq-agnostic", "paced"], by[1.0, False, "lsq-agnostic", "paced"]
    assert (over.assured_miss or 0.0) > 0.8
    assert under.to_dict()["rejected"] > 0 and (under.offered_unmet or 0.0) > (under.assured_miss or 0.0)
    fit = result.info["learner_fit"]
    assert fit["samples"] == 132 and fit["r2"] > 0.9
    assert {s.label for s in result.series} == {"guarded", "unguarded"}


def test_fifo_at_identical_admission_misses() -> None:
    result = fifo_ablation(MARQUEE, reps=2, seed=2)
    by = {(c.params["dispatch"], c.params["opp_rate"]): c for c in result.conditions}
    for (dispatch, _), c in by.items():
        if dispatch == "priority":
            assert c.assured_miss == 0.0
    heavy = max(r for _, r in by)
    assert (by["fifo", heavy].assured_miss or 0.0) >= 0.5
    assert (by["fifo", heavy].to_dict()["rho_total"] or 0.0) > 1.0  # offered past capacity
    # identical admissions: the same requests were admitted in both arms
    for _, r in by:
        assert by["priority", r].judged == by["fifo", r].judged


def test_experiment_json_shape() -> None:
    d = fifo_ablation(MARQUEE, reps=1, seed=0).to_dict()
    assert d["experiment"] == "fifo-ablation"
    cond = d["conditions"][0]
    keys = {"params", "reps", "assured_miss", "assured_miss_ci", "offered_unmet", "offered_unmet_ci"}
    assert set(cond) >= keys | {"floor_attainment", "floor_attainment_ci", "rho_eff"}
    assert set(cond["params"]) >= {"dispatch", "guard"}


def _with_assured(**update: float) -> Contract:
    assured = MARQUEE.tenants["assured"].model_copy(update=update)
    return MARQUEE.model_copy(update={"tenants": {**MARQUEE.tenants, "assured": assured}})


def test_floor_past_capacity_breaks() -> None:
    """Floor 14 per 1 s offered at 14/s on μ_sat ≈ 9/s (ρ_eff ≈ 1.3): no guard helps past capacity."""
    heavy = _with_assured(floor=14)
    arrivals = poisson(heavy, random.Random(0), assured_rate=14.0, opp_rate=6.0, duration=30.0)
    out = run_once(heavy, arrivals, mode="guarded", learner="admit-all", seed=0)
    s = mean_assured_service(out.result.events, heavy)
    assert s is not None and 14 * s / heavy.slots > 1.1  # ρ_eff, measured on the run itself
    assert not [v for v in out.violations if v.property in ("AF", "DR", "WF")]
    assert (out.metrics.admitted_miss or 0.0) > 0.3


def test_deadline_below_service_breaks() -> None:
    tight = _with_assured(deadline=0.2)
    out = run_once(tight, marquee_arrivals(0), mode="guarded", learner="admit-all", seed=0)
    assert out.metrics.admitted_miss == 1.0


def test_condition_splits_af_from_dr_wf() -> None:
    runs = (RunRecord(missed=1, judged=4, violations=5, af=4), RunRecord(judged=4, violations=2, af=2))
    c = Condition({"guard": False}, runs)
    assert (c.af_violations, c.dr_wf_violations) == (6, 1)
    d = c.to_dict()
    assert (d["violations"], d["af_violations"], d["dr_wf_violations"]) == (7, 6, 1)
    assert d["assured_miss"] == 1 / 8


def test_require_roles_names_what_the_contract_lacks() -> None:
    require_roles(MARQUEE, "beta-sweep")
    floored_only = MARQUEE.model_copy(update={"tenants": {"assured": MARQUEE.tenants["assured"]}})
    with pytest.raises(SpecError, match=r"beta-sweep needs an unfloored tenant.*assured \(floor 6\)"):
        beta_sweep(floored_only, reps=1)
    require_roles(floored_only, "trace-replay", opportunistic=False)
    unfloored = MARQUEE.model_copy(update={"tenants": {"opportunistic": MARQUEE.tenants["opportunistic"]}})
    with pytest.raises(SpecError, match="needs a floored tenant"):
        require_roles(unfloored, "trace-replay", opportunistic=False)


def test_marquee_load_offers_the_floor_rate_by_role() -> None:
    """The default assured rate is the contract's Σ B/W: 6/s on the marquee, 5/s split 3:2 on two_tenants."""
    two = load_contract(Path(__file__).resolve().parents[2] / "specs" / "two_tenants.yaml")
    reqs = experiment_arrivals(two, 0, 0, duration=300.0)
    rate = {n: sum(r.tenant == n for r in reqs) / 300 for n in two.tenants}
    assert rate == pytest.approx({"gold": 3.0, "silver": 2.0, "opportunistic": 14.0}, rel=0.1)
    assert experiment_arrivals(MARQUEE, 3, 1) == experiment_arrivals(MARQUEE, 3, 1, assured_rate=6.0)
