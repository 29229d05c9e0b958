"""Stress experiments: the deadline, the floor, and both at once (issue 5, rebuilt for issue 14).

Why: the reference study's guarantee is conditional. SF holds only where
the preconditions hold (A4 stability and a deadline above the worst-case
response bound); these sweeps walk out of that region on purpose, on two
axes the study keeps apart:

* ``deadline-sweep`` — the deadline axis alone, at a sub-capacity
  reservation: floor B = C = 4 per 1 s (the study's ρ_eff ≈ 0.45 cell),
  paced, with the opportunistic flood admitted around it; D from 350 ms
  (below the service: a feasibility limit no admitter beats) to 1856 ms.
  Guarded, guarded with deferred drop (DR), and unguarded.
* ``floor-sweep`` — the reservation axis alone: B raised past capacity at
  D = 1.82 s, each floored tenant offered (paced) its floor rate B/W;
  ρ_eff (admitted assured rate × measured assured service / C) per
  condition: past ρ_eff ≈ 1 the assured queue grows without bound and no
  guard helps.
* ``stress`` — both at once: floor × deadline, guarded with deferred drop
  (the study's "guard-DR cells", where DR fired once in 15).

All use the admit-all learner (the guard's admission is then the only
regulator) and paired arrivals across arms (`rvguard.sim.runner`). With
several floored tenants (``--spec``) the swept D or B is set on *every*
floored tenant together (`rvguard.sim.runner.with_floored`).
"""

from __future__ import annotations

from ..contract import Contract
from .experiments import ExperimentResult, marquee_arrivals, require_roles, sojourns
from .run import run_once
from .runner import Arm, Runner, run_arms, with_floored
from .workloads import floor_rate, roles

__all__ = ["DEADLINES", "FLOORS", "deadline_sweep", "floor_sweep", "stress"]

DEADLINES: tuple[float, ...] = (0.35, 0.4, 0.5, 0.6, 0.8, 1.2, 1.856)
DEADLINE_FLOOR = 4  # B = C: the study's sub-capacity reservation cell (ρ_eff ≈ 0.45)
FLOORS: tuple[int, ...] = (2, 4, 6, 8, 9, 10, 11, 12, 14)
STRESS_FLOORS: tuple[int, ...] = (6, 8, 10, 12)
STRESS_DEADLINES: tuple[float, ...] = (0.4, 0.8, 1.2)
OPP_RATE = 14.0
FLOOR_DURATION = 30.0  # long enough for a backlog past capacity to build up
ARMS: dict[str, dict[str, object]] = {
    "guard": {"mode": "guarded", "learner": "admit-all"},
    "guard+DR": {"mode": "guarded", "learner": "admit-all", "deferred_drop": True},
    "unguarded": {"mode": "unguarded", "learner": "admit-all"},
}


def _guard(guard: bool) -> dict[str, object]:
    return dict(ARMS["guard" if guard else "unguarded"])


def deadline_sweep(
    contract: Contract, *, reps: int = 40, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """Assured miss against the deadline D at a sub-capacity reservation (B = C), per arm."""
    require_roles(contract, "deadline-sweep")
    base = with_floored(contract, floor=DEADLINE_FLOOR)
    load = {"assured_rate": floor_rate(base), "opp_rate": OPP_RATE}
    arms = [
        Arm(
            {"deadline": d, "arm": name, "guard": name != "unguarded", "floor": DEADLINE_FLOOR},
            with_floored(base, deadline=d),
            dict(run),
            load,
        )
        for d in DEADLINES
        for name, run in ARMS.items()
    ]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed)
    if runner is not None:
        return ExperimentResult(
            "deadline-sweep", tuple(conditions), (), x_key="deadline", group_keys=("arm",)
        )
    arrivals = marquee_arrivals(base, seed, 0, **load)
    series = []
    for d in (0.5, 1.856):
        c = with_floored(base, deadline=d)
        out = run_once(c, arrivals, mode="guarded", learner="admit-all", seed=seed * 1000)
        series.append(sojourns(out.result.events, c, f"guarded, D={d}"))
    return ExperimentResult(
        "deadline-sweep", tuple(conditions), tuple(series), x_key="deadline", group_keys=("arm",)
    )


def _floor_arm(contract: Contract, floor: int, deadline: float | None, arm: str = "guard") -> Arm:
    c = (
        with_floored(contract, floor=floor)
        if deadline is None
        else with_floored(contract, floor=floor, deadline=deadline)
    )
    first = roles(c).assured[0][0]
    params = {"floor": floor, "deadline": c.tenants[first].deadline, "arm": arm, "guard": arm != "unguarded"}
    load = {"assured_rate": floor_rate(c), "opp_rate": OPP_RATE, "duration": FLOOR_DURATION}
    return Arm(params, c, dict(ARMS[arm]), load)


def floor_sweep(
    contract: Contract, *, reps: int = 40, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """Assured miss against the floor B (offered at B/W), guarded, past capacity."""
    require_roles(contract, "floor-sweep")
    arms = [_floor_arm(contract, b, None) for b in FLOORS]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed)
    series = []
    for b in (6, 12):
        arm = _floor_arm(contract, b, None)
        arrivals = marquee_arrivals(arm.contract, seed, 0, **arm.load)
        out = run_once(arm.contract, arrivals, mode="guarded", learner="admit-all", seed=seed * 1000)
        series.append(sojourns(out.result.events, arm.contract, f"guarded, B={b}"))
    return ExperimentResult(
        "floor-sweep", tuple(conditions), tuple(series), x_key="floor", group_keys=("arm",)
    )


def stress(
    contract: Contract, *, reps: int = 20, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """Both stressors: floor × deadline, guarded with deferred drop (miss vs deadline, a line per floor)."""
    require_roles(contract, "stress")
    arms = [_floor_arm(contract, b, d, "guard+DR") for b in STRESS_FLOORS for d in STRESS_DEADLINES]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed)
    return ExperimentResult("stress", tuple(conditions), (), x_key="deadline", group_keys=("floor",))
