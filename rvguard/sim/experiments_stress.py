"""Stress experiments past capacity: the deadline, the floor, and both at once (issue 5).

Why: the reference study's guarantee is conditional. SF holds only where
the preconditions hold (A4 stability and a deadline above the worst-case
response bound); these sweeps walk out of that region on purpose, so the
edges show up in the numbers rather than in a footnote:

* ``deadline-sweep`` — the marquee load (assured at the floor rate,
  opportunistic flooding past capacity), D from below the batch-1 service
  (everything misses, guard or not) up to the two-cohort bound
  s_opp + ⌈2B/C⌉·s_max = 2.64 s; guarded and unguarded;
* ``floor-sweep`` — the floor B raised past capacity, the assured tenant
  offered its floor rate B/W; ρ_eff = (B/W)·s̄_a/C is reported per
  condition (past ρ_eff ≈ 1 no guard helps);
* ``stress`` — a grid of both: floor × deadline, guarded.

All use the admit-all learner (the guard's admission is then the only
regulator) and paired arrivals across arms (`rvguard.sim.arms`).

With several floored tenants (``--spec``) the swept deadline D or floor B
is set on *every* floored tenant together (`rvguard.sim.arms.with_floored`),
each offered its floor rate B/W; the reported ``deadline`` of a floor arm
is the first floored tenant's by tier.
"""

from __future__ import annotations

from ..contract import Contract
from .arms import Arm, run_arms, with_floored
from .experiments import ExperimentResult, marquee_arrivals, require_roles, sojourns
from .run import run_once
from .workloads import floor_rate, roles

__all__ = ["DEADLINES", "FLOORS", "deadline_sweep", "floor_sweep", "stress"]

DEADLINES: tuple[float, ...] = (0.2, 0.4, 0.8, 1.2, 1.82, 2.64)
FLOORS: tuple[int, ...] = (2, 4, 6, 8, 10, 12, 14)
STRESS_FLOORS: tuple[int, ...] = (6, 8, 10, 12)
STRESS_DEADLINES: tuple[float, ...] = (1.0, 1.82, 2.64)
OPP_RATE = 14.0
FLOOR_DURATION = 30.0  # long enough for a backlog past capacity to build up


def _guard(guard: bool) -> dict[str, str]:
    return {"mode": "guarded" if guard else "unguarded", "learner": "admit-all"}


def deadline_sweep(contract: Contract, *, reps: int = 40, seed: int = 0) -> ExperimentResult:
    """Assured miss against the deadline D at the marquee load, guarded and unguarded."""
    require_roles(contract, "deadline-sweep")
    arms = [
        Arm(
            {"deadline": d, "guard": g, "learner": "admit-all"}, with_floored(contract, deadline=d), _guard(g)
        )
        for d in DEADLINES
        for g in (True, False)
    ]
    conditions = run_arms(arms, reps=reps, seed=seed)
    arrivals = marquee_arrivals(contract, seed, 0)
    series = []
    for d in (0.8, 1.82):
        c = with_floored(contract, deadline=d)
        out = run_once(c, arrivals, mode="guarded", learner="admit-all", seed=seed * 1000)
        series.append(sojourns(out.result.events, c, f"guarded, D={d}"))
    return ExperimentResult("deadline-sweep", tuple(conditions), tuple(series), x_key="deadline")


def _floor_arm(contract: Contract, floor: int, deadline: float | None, guard: bool = True) -> Arm:
    c = (
        with_floored(contract, floor=floor)
        if deadline is None
        else with_floored(contract, floor=floor, deadline=deadline)
    )
    first = roles(c).assured[0][0]
    params = {"floor": floor, "deadline": c.tenants[first].deadline, "guard": guard}
    load = {"assured_rate": floor_rate(c), "opp_rate": OPP_RATE, "duration": FLOOR_DURATION}
    return Arm(params, c, _guard(guard), load)


def floor_sweep(contract: Contract, *, reps: int = 40, seed: int = 0) -> ExperimentResult:
    """Assured miss against the floor B (offered at B/W), guarded, past capacity."""
    require_roles(contract, "floor-sweep")
    arms = [_floor_arm(contract, b, None) for b in FLOORS]
    conditions = run_arms(arms, reps=reps, seed=seed)
    series = []
    for b in (6, 12):
        arm = _floor_arm(contract, b, None)
        arrivals = marquee_arrivals(arm.contract, seed, 0, **arm.load)
        out = run_once(arm.contract, arrivals, mode="guarded", learner="admit-all", seed=seed * 1000)
        series.append(sojourns(out.result.events, arm.contract, f"guarded, B={b}"))
    return ExperimentResult(
        "floor-sweep", tuple(conditions), tuple(series), x_key="floor", group_keys=("guard",)
    )


def stress(contract: Contract, *, reps: int = 20, seed: int = 0) -> ExperimentResult:
    """Both stressors: floor × deadline, guarded (miss vs deadline, one line per floor)."""
    require_roles(contract, "stress")
    arms = [_floor_arm(contract, b, d) for b in STRESS_FLOORS for d in STRESS_DEADLINES]
    conditions = run_arms(arms, reps=reps, seed=seed)
    return ExperimentResult("stress", tuple(conditions), (), x_key="deadline", group_keys=("floor",))
