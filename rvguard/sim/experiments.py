"""The reference study's experiments, regenerated on the simulator (issue 5).

Why each condition of a rep sees the *same* arrivals: the comparison is
paired. Rep ``r`` draws its arrivals from ``random.Random(f"arrivals:{seed}:{r}")``
once, and every condition (guarded or not, each β) replays that list with
its own run seed; so a difference between conditions is the policy's, not
the workload's. The run is the replication unit: per-condition intervals
come from `rvguard.sim.stats.pooled_interval` over reps.

The marquee load (specs/marquee.yaml): assured Poisson at the floor rate
B/W = 6/s for 12 s (≈ 72 assured offered a run, as in the reference study),
opportunistic Poisson at 14/s — 20/s offered against μ_sat ≈ 9.1/s.

Any contract (``--spec``): the same load by role (`rvguard.sim.workloads.roles`):
the floored tenants are offered their floor rates Σ B/W (each its own
B_i/W), the unfloored ones share the 14/s flood equally. An experiment needs
at least one tenant of each role (`require_roles`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import progress
from ..contract import Contract, contract_from_mapping
from ..enforce.request import Request
from ..errors import SpecError
from ..events import Arrive, Complete, Event
from .run import run_once
from .stats import pooled_interval
from .workloads import floor_rate, poisson, roles

__all__ = [
    "MARQUEE_CONTRACT",
    "Condition",
    "ExperimentResult",
    "Series",
    "beta_sweep",
    "fifo_ablation",
    "require_roles",
]

BETAS: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0)
MARQUEE = {"opp_rate": 14.0, "duration": 12.0}  # assured_rate: the contract's floor rate Σ B/W
# specs/marquee.yaml, embedded so `rvguard demo` runs from an installed package too
MARQUEE_CONTRACT = contract_from_mapping(
    {
        "window": 1.0,
        "slots": 4,
        "output_cap": 48,
        "service": {"s_max": 0.66, "s_max_opp": 0.66, "lower": 0.236},
        "tenants": {
            "assured": {"floor": 6, "deadline": 1.82, "tier": 0},
            "opportunistic": {"floor": 0, "deadline": 1.82, "tier": 1},
        },
    },
    source="marquee",
)


@dataclass(frozen=True)
class Condition:
    """One cell of an experiment, pooled over reps.

    ``violations`` counts, per run, the AF, DR and WF violations the monitors
    find in the condition's trace, and ``af`` the AF ones among them (an
    unguarded baseline violates AF whenever it rejects a floor-entitled
    request; the guard never does).
    """

    params: dict[str, Any]
    missed: tuple[int, ...]
    judged: tuple[int, ...]
    violations: tuple[int, ...]
    extras: dict[str, Any] = field(default_factory=dict)
    af: tuple[int, ...] = ()

    @property
    def af_violations(self) -> int:
        """AF violations over every run."""
        return sum(self.af)

    @property
    def dr_wf_violations(self) -> int:
        """DR and WF violations over every run."""
        return sum(self.violations) - sum(self.af)

    @property
    def reps(self) -> int:
        """Runs pooled."""
        return len(self.judged)

    @property
    def assured_miss(self) -> float | None:
        """Pooled miss fraction of admitted assured requests."""
        return pooled_interval(self.missed, self.judged)[0]

    @property
    def assured_miss_ci(self) -> tuple[float, float]:
        """95 % clustered Clopper–Pearson interval (see `rvguard.sim.stats`)."""
        return pooled_interval(self.missed, self.judged)[1]

    def to_dict(self) -> dict[str, Any]:
        """The ``conditions`` entry of ``experiment --json`` (DESIGN §8)."""
        lo, hi = self.assured_miss_ci
        return {
            "params": dict(self.params),
            "reps": self.reps,
            "assured_miss": self.assured_miss,
            "assured_miss_ci": [lo, hi],
            "runs_with_miss": sum(1 for m in self.missed if m),
            "violations": sum(self.violations),
            "af_violations": self.af_violations,
            "dr_wf_violations": self.dr_wf_violations,
            **self.extras,
        }


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
    and learner).
    """

    name: str
    conditions: tuple[Condition, ...]
    series: tuple[Series, ...] = field(default=())
    x_key: str | None = None
    group_keys: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The ``experiment --json`` object."""
        return {
            "experiment": self.name,
            "method": "pooled miss fraction; 95% Clopper-Pearson on a run-clustered effective n",
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


def marquee_arrivals(contract: Contract, seed: int, rep: int, **load: float) -> list[Request]:
    """Rep ``rep``'s arrivals at the marquee load (overridable by keyword; module doc)."""
    spec = {"assured_rate": floor_rate(contract), **MARQUEE, **load}
    rng = random.Random(f"arrivals:{seed}:{rep}")
    return poisson(
        contract,
        rng,
        assured_rate=spec["assured_rate"],
        opp_rate=spec["opp_rate"],
        duration=spec["duration"],
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


Cell = tuple[dict[str, Any], dict[str, Any]]  # (params reported, run_once keyword arguments)


def _run_cells(
    contract: Contract, cells: Sequence[Cell], reps: int, seed: int, **load: float
) -> list[Condition]:
    acc: list[tuple[list[int], list[int], list[int], list[int]]] = [([], [], [], []) for _ in cells]
    with progress.task("runs", total=reps * len(cells), unit="run") as advance:
        for rep in range(reps):
            arrivals = marquee_arrivals(contract, seed, rep, **load)
            for i, (_, kwargs) in enumerate(cells):
                out = run_once(contract, arrivals, seed=seed * 1000 + rep, **kwargs)
                acc[i][0].append(out.metrics.admitted_missed)
                acc[i][1].append(out.metrics.admitted_judged)
                acc[i][2].append(sum(1 for v in out.violations if v.property in ("AF", "DR", "WF")))
                acc[i][3].append(sum(1 for v in out.violations if v.property == "AF"))
                advance(1)
    return [
        Condition(params, tuple(m), tuple(j), tuple(v), af=tuple(af))
        for (params, _), (m, j, v, af) in zip(cells, acc, strict=True)
    ]


def beta_sweep(contract: Contract, *, reps: int = 10, seed: int = 0) -> ExperimentResult:
    """Guarded vs unguarded LSQ learner for each β (and the class-agnostic LSQ at β = 1)."""
    require_roles(contract, "beta-sweep")
    cells: list[Cell] = []
    for beta in BETAS:
        for guard in (True, False):
            mode = "guarded" if guard else "unguarded"
            cells.append(
                (
                    {"beta": beta, "guard": guard, "learner": "lsq"},
                    {"mode": mode, "learner": "lsq", "beta": beta},
                )
            )
    for guard in (True, False):
        mode = "guarded" if guard else "unguarded"
        cells.append(
            (
                {"beta": 1.0, "guard": guard, "learner": "lsq-agnostic"},
                {"mode": mode, "learner": "lsq-agnostic"},
            )
        )
    conditions = _run_cells(contract, cells, reps, seed)
    arrivals = marquee_arrivals(contract, seed, 0)
    series = tuple(
        sojourns(
            run_once(contract, arrivals, mode=m, learner="lsq", seed=seed * 1000).result.events, contract, m
        )
        for m in ("guarded", "unguarded")
    )
    return ExperimentResult("beta-sweep", tuple(conditions), series)


def fifo_ablation(contract: Contract, *, reps: int = 10, seed: int = 0) -> ExperimentResult:
    """Same admissions (the guard's), priority vs FIFO dispatch, at offered load ≳ capacity."""
    require_roles(contract, "fifo-ablation")
    cells: list[Cell] = [
        ({"dispatch": d, "guard": True, "learner": "admit-all"}, {"mode": m, "learner": "admit-all"})
        for d, m in (("priority", "guarded"), ("fifo", "gated-fifo"))
    ]
    conditions = _run_cells(contract, cells, reps, seed)
    arrivals = marquee_arrivals(contract, seed, 0)
    series = tuple(
        sojourns(
            run_once(contract, arrivals, mode=m, learner="admit-all", seed=seed * 1000).result.events,
            contract,
            m,
        )
        for m in ("guarded", "gated-fifo")
    )
    return ExperimentResult("fifo-ablation", tuple(conditions), series)
