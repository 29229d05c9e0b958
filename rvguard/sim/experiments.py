"""The reference study's headline experiments, regenerated on the simulator: β-sweep and FIFO ablation.

Why each condition of a rep sees the *same* arrivals: the comparison is
paired. Rep ``r`` draws its arrivals once (`rvguard.sim.loads`), and every
condition (guarded or not, each β) replays that list with its own run seed;
so a difference between conditions is the policy's, not the workload's. The
run is the replication unit: per-condition intervals come from
`rvguard.sim.stats.pooled_interval` over reps (`rvguard.sim.record`).

The load is the marquee's (`rvguard.sim.loads`): assured paced at Σ B/W,
with the Poisson variant beside it; opportunistic Poisson at 14/s. Any
contract (``--spec``) gets the same load by role (`rvguard.sim.workloads.roles`);
an experiment needs at least one tenant of each role (`require_roles`).

* ``beta-sweep`` — the LSQ learner (fitted on 132 closed-loop profiling
  samples, `rvguard.sim.profiling`) at β ∈ {0, 0.5, 1, 2}, guarded and
  unguarded, sheddable-only; the class-agnostic learner at β = 0 and 1;
  each on paced and on Poisson assured arrivals.
* ``fifo-ablation`` — the guard's admissions with priority vs FIFO
  dispatch, admit-all learner, at three offered loads from just over
  capacity (the study's ρ̂ ≳ 1) to the marquee flood.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract import Contract
from ..enforce.learners import LSQLearner
from ..errors import SpecError
from ..events import Arrive, Complete, Event
from .backend import BackendModel
from .loads import MARQUEE, MARQUEE_CONTRACT, marquee_arrivals
from .profiling import PER_LOAD
from .record import Condition
from .run import make_learner, run_once
from .runner import Arm, Runner, run_arms
from .workloads import roles

__all__ = [
    "MARQUEE_CONTRACT",
    "Condition",
    "ExperimentResult",
    "Series",
    "beta_sweep",
    "fifo_ablation",
    "marquee_arrivals",
    "require_roles",
]

BETAS: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0)
AGNOSTIC_BETAS: tuple[float, ...] = (0.0, 1.0)
STREAMS: tuple[str, ...] = ("paced", "poisson")
FIFO_OPP_RATES: tuple[float, ...] = (5.0, 8.0, MARQUEE["opp_rate"])  # ρ̂ ≈ 1.15, 1.45, 2.0 (study profile)


@dataclass(frozen=True)
class Series:
    """Assured sojourns over arrival time in one run (for the Fig. 1a-style plot)."""

    label: str
    arrival: tuple[float, ...]
    sojourn: tuple[float, ...]
    deadline: float


@dataclass(frozen=True)
class ExperimentResult:
    """An experiment's conditions, plus the series its plots draw.

    ``x_key`` names the parameter the miss plot puts on its x axis, and
    ``group_keys`` the parameters that tell its lines apart (empty: guard
    and learner). ``panel``, when given, is ``(info key, axis label)``: a
    second plot of that figure of each condition (its ``info``) over x.
    """

    name: str
    conditions: tuple[Condition, ...]
    series: tuple[Series, ...] = field(default=())
    x_key: str | None = None
    group_keys: tuple[str, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)
    panel: tuple[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``experiment --json`` object."""
        return {
            "experiment": self.name,
            "method": "pooled fractions; 95% Clopper-Pearson on a run-clustered effective n",
            **self.info,
            "conditions": [c.to_dict() for c in self.conditions],
        }


def require_roles(contract: Contract, experiment: str, *, opportunistic: bool = True) -> None:
    """Refuse a contract an experiment cannot run: it needs a floored (and an unfloored) tenant.

    Raises:
        SpecError: the contract lacks one of the two roles (the message names it).
    """
    r = roles(contract)
    missing = [
        what
        for what, shares in (
            ("a floored tenant (floor > 0) whose miss it measures", r.assured),
            ("an unfloored tenant (floor 0) to carry the opportunistic load", r.opportunistic),
        )
        if not shares and (opportunistic or shares is r.assured)
    ]
    if missing:
        raise SpecError(
            f"{experiment} needs {' and '.join(missing)}; the contract's tenants: "
            + ", ".join(f"{n} (floor {t.floor:g})" for n, t in contract.tenants.items()),
            field="tenants",
        )


def sojourns(events: Sequence[Event], contract: Contract, label: str) -> Series:
    """Arrival times and sojourns of the floored tenants' completed requests."""
    floored = set(contract.floored_tenants)
    arrived: dict[str, float] = {}
    xs: list[float] = []
    ys: list[float] = []
    for ev in events:
        if isinstance(ev, Arrive) and ev.tenant in floored:
            arrived[ev.rid] = ev.t
        elif isinstance(ev, Complete) and ev.rid in arrived:
            xs.append(arrived[ev.rid])
            ys.append(ev.t - arrived[ev.rid])
    d = min(contract.tenants[n].deadline for n in floored)
    return Series(label, tuple(xs), tuple(ys), d)


def _series(contract: Contract, seed: int, cells: Sequence[tuple[str, dict[str, Any]]]) -> tuple[Series, ...]:
    """Assured sojourns of rep 0 under each (label, run_once keywords) cell."""
    arrivals = marquee_arrivals(contract, seed, 0)
    return tuple(
        sojourns(run_once(contract, arrivals, seed=seed * 1000, **kw).result.events, contract, label)
        for label, kw in cells
    )


def _mode(guard: bool) -> str:
    return "guarded" if guard else "unguarded"


def learner_fit(contract: Contract, seed: int) -> dict[str, Any]:
    """The LSQ learner's fit in rep 0 (each run fits its own, on its own profiling draw)."""
    rng = random.Random(f"sim:{seed * 1000}")
    fit = make_learner("lsq", contract, rng, model=BackendModel(slots=contract.slots))
    assert isinstance(fit, LSQLearner)
    slo = min(t.deadline for t in contract.tenants.values() if not t.floored)
    shed = {str(b): (slo / b - fit.a) / fit.b - 1 for b in BETAS if b > 0 and fit.b > 0}
    return {
        "learner_fit": {
            "samples": 3 * contract.slots * PER_LOAD,
            "intercept": fit.a,
            "slope": fit.b,
            "r2": fit.r2,
            "sheds_opportunistic_above_load": shed,
        }
    }


def beta_sweep(
    contract: Contract, *, reps: int = 10, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """Guarded vs unguarded LSQ learner for each β; class-agnostic at β = 0 and 1; paced and Poisson."""
    require_roles(contract, "beta-sweep")
    arms: list[Arm] = []
    for stream in STREAMS:
        cells = [(beta, "lsq") for beta in BETAS] + [(beta, "lsq-agnostic") for beta in AGNOSTIC_BETAS]
        for beta, learner in cells:
            for guard in (True, False):
                params = {"beta": beta, "guard": guard, "learner": learner, "assured": stream}
                run = {"mode": _mode(guard), "learner": learner, "beta": beta}
                arms.append(Arm(params, contract, run, {"assured": stream}, phase=guard))
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed)
    plot = [(m, {"mode": m, "learner": "lsq", "beta": 0.0}) for m in ("guarded", "unguarded")]
    series = _series(contract, seed, plot) if runner is None else ()
    return ExperimentResult(
        "beta-sweep",
        tuple(conditions),
        series,
        x_key="beta",
        group_keys=("guard", "learner", "assured"),
        info=learner_fit(contract, seed) if runner is None else {},
    )


def fifo_ablation(
    contract: Contract, *, reps: int = 10, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """Same admissions (the guard's), priority vs FIFO dispatch, at offered loads from ≳ capacity up."""
    require_roles(contract, "fifo-ablation")
    arms = [
        Arm(
            {"dispatch": d, "opp_rate": opp, "guard": True, "learner": "admit-all"},
            contract,
            {"mode": m, "learner": "admit-all"},
            {"opp_rate": opp},
        )
        for opp in FIFO_OPP_RATES
        for d, m in (("priority", "guarded"), ("fifo", "gated-fifo"))
    ]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed)
    cells = [(m, {"mode": m, "learner": "admit-all"}) for m in ("guarded", "gated-fifo")]
    series = _series(contract, seed, cells) if runner is None else ()
    return ExperimentResult(
        "fifo-ablation", tuple(conditions), series, x_key="opp_rate", group_keys=("dispatch",)
    )
