"""Fault experiments: a swapped objective mapping, and a capacity drop (issue 5).

Why these two: each is a way the guard's world can go wrong that is not the
learner's fault.

* ``gaie-fault`` — a GAIE-style flow controller is only as good as its
  request→objective mapping. The same arrivals (so the same assured
  requests) run under the controller with the correct mapping, with the
  classes swapped (the fault), and under the guard, whose tier comes from
  the authenticated tenant, not from a mapping the learner or an operator
  can get wrong. Admit-all and LSQ (β = 1) learners. A third set, the
  ``burst`` load (assured Poisson at `BURST_RATE`, past capacity on its
  own, plus the flood), shows the band contrast the study measured on its
  live deployment (high band miss ≈ 0.31 vs low band ≈ 0.92): the
  controller protects whichever band is labelled high, and only as far as
  capacity goes (the low band's miss is ``opp_miss``).
* ``capacity-drop`` — the backend's ``batch_cap`` cuts throughput (4 = full,
  3, 2, 1 sequences decoded at once; each arm reports the decode
  throughput cut) under an unchanged contract. A fixed floor
  keeps admitting B per window into a server that can no longer serve it;
  with the assumption watch (``WatchConfig(degrade=0.5)``) the guard notices
  services above s_max and capacity below Σ B/W and halves the floor while
  it fires. The lowered floor is an AF violation against the contract
  (reason ``floor-lowered``), traded knowingly for SF: the table reports
  both the admitted miss and the floor attainment.
"""

from __future__ import annotations

from ..contract import Contract
from ..enforce.watch import WatchConfig
from .backend import BackendModel
from .experiments import ExperimentResult, marquee_arrivals, require_roles, sojourns
from .run import run_once
from .runner import Arm, Runner, run_arms

__all__ = ["BATCH_CAPS", "DEGRADE", "capacity_drop", "gaie_fault"]

BATCH_CAPS: tuple[int, ...] = (4, 3, 2, 1)
BURST_RATE = 12.0
DEGRADE = 0.5
GAIE_ARMS: tuple[tuple[str, str], ...] = (
    ("gaie-correct", "gaie"),
    ("gaie-swapped", "gaie-swapped"),
    ("guard", "guarded"),
)


def gaie_fault(
    contract: Contract, *, reps: int = 40, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """Same assured requests: GAIE flow control with correct vs swapped mapping, and the guard."""
    require_roles(contract, "gaie-fault")
    arms = [
        Arm(
            {"policy": name, "learner": learner, "guard": mode == "guarded"},
            contract,
            {"mode": mode, "learner": learner, "beta": 1.0},
        )
        for learner in ("admit-all", "lsq")
        for name, mode in GAIE_ARMS
    ]
    burst = {"assured": "poisson", "assured_rate": BURST_RATE}
    arms += [
        Arm({"policy": name, "learner": "burst", "guard": mode == "guarded"}, contract, {"mode": mode}, burst)
        for name, mode in GAIE_ARMS
    ]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed)
    arrivals = marquee_arrivals(contract, seed, 0)
    series = tuple(
        sojourns(
            run_once(contract, arrivals, mode=mode, learner="admit-all", seed=seed * 1000).result.events,
            contract,
            name,
        )
        for name, mode in GAIE_ARMS
    )
    return ExperimentResult("gaie-fault", tuple(conditions), series, x_key="policy", group_keys=("learner",))


def _capacity_arm(contract: Contract, cap: int, watch: bool) -> Arm:
    model = BackendModel(slots=contract.slots, batch_cap=cap)
    run: dict[str, object] = {"mode": "guarded", "learner": "admit-all", "model": model}
    if watch:
        run["watch"] = WatchConfig(degrade=DEGRADE)
    full = BackendModel(slots=contract.slots)
    cut = 1.0 - model.decode_rate(contract.slots) / full.decode_rate(contract.slots)
    params = {
        "batch_cap": cap,
        "floor": "watch" if watch else "fixed",
        "guard": True,
        "throughput_cut": round(cut, 3),
    }
    return Arm(params, contract, run)


def capacity_drop(
    contract: Contract, *, reps: int = 40, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """Fixed floor vs the floor lowered by the assumption watch, as ``batch_cap`` cuts capacity."""
    require_roles(contract, "capacity-drop")
    arms = [_capacity_arm(contract, cap, watch) for cap in BATCH_CAPS for watch in (False, True)]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed)
    arrivals = marquee_arrivals(contract, seed, 0)
    series = []
    for watch in (False, True):
        arm = _capacity_arm(contract, 2, watch)
        out = run_once(contract, arrivals, seed=seed * 1000, **arm.run)
        series.append(sojourns(out.result.events, contract, f"batch_cap=2, floor {arm.params['floor']}"))
    return ExperimentResult(
        "capacity-drop", tuple(conditions), tuple(series), x_key="batch_cap", group_keys=("floor",)
    )
