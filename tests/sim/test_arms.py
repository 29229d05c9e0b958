"""The arm runner: paired arrivals, pooled counts, and the extras each condition reports."""

from __future__ import annotations

from pathlib import Path

from rvguard.contract import load_contract
from rvguard.sim.arms import Arm, mean_assured_service, run_arms, with_floored, with_tenant
from rvguard.sim.run import run_once

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
    assert {"floor_attainment", "sf_violations", "rho_eff", "entitled"} <= set(d)
    assert d["entitled"] > 0


def test_rho_eff_is_floor_rate_times_mean_service_over_slots() -> None:
    arrivals = marquee_arrivals(3, duration=4.0)
    out = run_once(MARQUEE, arrivals, seed=3)
    s = mean_assured_service(out.result.events, MARQUEE)
    assert s is not None and 0.2 < s < 0.7
    (cond,) = run_arms([Arm({}, MARQUEE, {}, {"duration": 4.0})], reps=1, seed=0)
    assert cond.extras["rho_eff"] is not None
    assert 6 * 0.2 / 4 < cond.extras["rho_eff"] < 6 * 0.7 / 4


def test_phase_sweep_extra_only_when_asked() -> None:
    (plain, swept) = run_arms(
        [Arm({}, MARQUEE, {}, {"duration": 3.0}), Arm({}, MARQUEE, {}, {"duration": 3.0}, phase=True)],
        reps=1,
        seed=0,
    )
    assert "phase_worst_attainment" not in plain.extras
    worst = swept.extras["phase_worst_attainment"]
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
