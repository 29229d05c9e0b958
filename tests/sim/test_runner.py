"""The arm runner: paired arrivals, pooled counts, and the extras each condition reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvguard.contract import load_contract
from rvguard.events import Admit, Arrive
from rvguard.sim.run import run_once
from rvguard.sim.runner import Arm, mean_assured_service, run_arms, with_floored, with_tenant

from ._common import MARQUEE, marquee_arrivals


def test_with_tenant_changes_one_field() -> None:
    c = with_tenant(MARQUEE, floor=9)
    assert c.tenants["assured"].floor == 9
    assert c.tenants["assured"].deadline == MARQUEE.tenants["assured"].deadline
    assert MARQUEE.tenants["assured"].floor == 6


def test_arms_share_arrivals_and_pool_counts() -> None:
    calls: list[tuple[str, int]] = []

    def draw(arm: Arm, seed: int, rep: int) -> list:  # type: ignore[type-arg]
        calls.append((str(arm.load), rep))
        return marquee_arrivals(seed * 10 + rep, duration=3.0)

    arms = [
        Arm({"guard": True}, MARQUEE, {"mode": "guarded"}),
        Arm({"guard": True, "dispatch": "fifo"}, MARQUEE, {"mode": "gated-fifo"}),
    ]
    conds = run_arms(arms, reps=3, seed=1, arrivals=draw)
    assert len(calls) == 3  # one draw per rep, shared by both arms
    assert [c.reps for c in conds] == [3, 3]
    assert conds[0].judged == conds[1].judged  # same arrivals, same admissions
    d = conds[0].to_dict()
    assert {"floor_attainment", "offered_unmet", "sf_violations", "rho_eff", "entitled", "reps"} <= set(d)
    assert {"assured_miss_ci", "offered_unmet_ci", "floor_attainment_ci"} <= set(d)
    assert d["entitled"] > 0


def test_rho_eff_is_admitted_assured_rate_times_mean_service_over_slots() -> None:
    """The study's ρ_eff, recomputed by hand from the run's own trace (not from the record)."""
    arm = Arm({}, MARQUEE, {"learner": "reject-all"}, {"duration": 4.0, "assured": "poisson"})
    (cond,) = run_arms([arm], reps=1, seed=0)
    from rvguard.sim.loads import marquee_arrivals as load

    arrivals = load(MARQUEE, 0, 0, duration=4.0, assured="poisson")
    events = run_once(MARQUEE, arrivals, learner="reject-all", seed=0).result.events
    arrive = {e.rid: e for e in events if isinstance(e, Arrive)}
    admitted = sum(isinstance(e, Admit) and arrive[e.rid].tenant == "assured" for e in events)
    span = max(e.t for e in arrive.values())
    s = mean_assured_service(events, MARQUEE)
    assert s is not None and 0.2 < s < 0.7
    assert cond.rho_eff == pytest.approx(admitted / span * s / MARQUEE.slots)
    # admitted, not offered: Poisson assured at B/W overflows some windows and the guard rejects the excess
    offered = sum(a.tenant == "assured" for a in arrive.values())
    assert admitted < offered


def test_phase_sweep_only_when_asked() -> None:
    (plain, swept) = run_arms(
        [Arm({}, MARQUEE, {}, {"duration": 3.0}), Arm({}, MARQUEE, {}, {"duration": 3.0}, phase=True)],
        reps=1,
        seed=0,
    )
    assert plain.to_dict()["phase_worst_attainment"] is None
    worst = swept.to_dict()["phase_worst_attainment"]
    assert worst is not None and 0.0 <= worst <= 1.0


def test_with_floored_changes_every_floored_tenant() -> None:
    two = load_contract(Path(__file__).resolve().parents[2] / "specs" / "two_tenants.yaml")
    c = with_floored(two, floor=7, deadline=1.5)
    assert {n: (t.floor, t.deadline) for n, t in c.tenants.items()} == {
        "gold": (7, 1.5),
        "silver": (7, 1.5),
        "opportunistic": (0, 4.0),
    }
    assert with_floored(MARQUEE, floor=9) == with_tenant(MARQUEE, floor=9)
