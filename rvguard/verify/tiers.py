"""The bounded schedule model with several floored tenants and tiers (proofs/README.md §2, §4).

Theory of operation. The dispatch semantics are those of
`rvguard.verify.schedule` (non-preemptive, work-conserving, C slots, the
reserve's RB rule, the same-instant order ``ties``; completions-first is the
deployed one), stated once as clauses in `rvguard.verify.schedule_clauses`.
What this model adds is the tenants. Each `Floored` tenant j has a tier, a
floor B_j (at most B_j of its arrivals in each tumbling window
[kW, (k+1)W), k < its ``windows``), a service ceiling s_j and, optionally, a
deadline D_j. A waiting job ranks by its tenant's tier, then by delivery
order (arrival tick, then the order in which same-tick arrivals reach the
core, which Z3 chooses); opportunistic jobs (ceiling s_opp, arriving from
−s_opp on, so some are in flight at t = 0) rank below every tier. That is
`DecisionCore`'s order for floor work: true tier, floor before surplus, then
arrival sequence (`rvguard.enforce.ready.rank`).

`find_tier_schedule` asks Z3 for a run in which some job of a tenant with a
deadline finishes after it (``"miss"``), or for any run; ``simulate(...,
tiers=p.tiers, reserve=p.reserve)`` is the executable form of the same
semantics. The horizon is the model's bounds: every floored arrival in its
tenant's first ``windows`` windows, at most ``jobs`` of them, services
anywhere in [s_min, ceiling], and ``opp_jobs`` opportunistic jobs (default
C − R, as many as may run at once). A run with more windows or more
opportunistic jobs is outside it.

Cost: O(n³) clause terms for n jobs (the work-conservation clause sums the
busy slots at each pair's instant), so keep n to a dozen or so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import SpecError
from ._z3 import load_z3
from .schedule import Schedule, solve
from .schedule_clauses import OPPORTUNISTIC, TIES, JobVars, Ties, dispatch_solver, encode_miss, job_variables

__all__ = [
    "TIER_GOALS",
    "Floored",
    "TierParams",
    "encode_tier_entitlement",
    "find_tier_schedule",
    "tier_solver",
    "tier_variables",
]

TIER_GOALS = ("miss", "any")


@dataclass(frozen=True, slots=True)
class Floored:
    """One floored tenant of the multi-tier model (integer ticks).

    Attributes:
        name: the tenant (not ``"opportunistic"``). tier: its rank, 0 the highest.
        floor: B_j, its arrivals per window. s_max: its service ceiling.
        deadline: D_j, relative; None when the ``"miss"`` goal does not check it.
        windows: the windows its arrivals fall in (from window 0).
        jobs: its jobs in the model (default B_j · windows, every window full).
    """

    name: str
    tier: int
    floor: int
    s_max: int
    deadline: int | None = None
    windows: int = 3
    jobs: int | None = None

    def __post_init__(self) -> None:
        if not self.name or self.name == OPPORTUNISTIC:
            raise SpecError(
                f"a floored tenant's name must not be {self.name!r}", field="name", value=self.name
            )
        if min(self.floor, self.s_max, self.windows) < 1 or self.tier < 0:
            raise SpecError(
                f"tenant {self.name}: tier ≥ 0 and floor, s_max, windows ≥ 1 "
                f"(got {self.tier}, {self.floor}, {self.s_max}, {self.windows})",
                field=f"tenants.{self.name}",
            )
        if self.jobs is not None and not 0 <= self.jobs <= self.floor * self.windows:
            raise SpecError(
                f"tenant {self.name}: jobs must be in 0..floor·windows = {self.floor * self.windows}",
                field=f"tenants.{self.name}.jobs",
                value=self.jobs,
            )

    @property
    def n_jobs(self) -> int:
        """Its jobs in the model."""
        return self.floor * self.windows if self.jobs is None else self.jobs


@dataclass(frozen=True, slots=True)
class TierParams:
    """The bounds of one multi-tier schedule model (integer ticks).

    Attributes:
        slots: C. window: W. tenants: the floored tenants (`Floored`).
        s_opp: the opportunistic ceiling. opp_jobs: opportunistic jobs (default C − R).
        s_min: least service of any job. ties: the same-instant order
            (`rvguard.verify.schedule`). reserve: R, slots opportunistic jobs never hold.
    """

    slots: int
    window: int
    tenants: tuple[Floored, ...]
    s_opp: int
    opp_jobs: int | None = None
    s_min: int = 1
    ties: Ties = "completions-first"
    reserve: int = 0

    def __post_init__(self) -> None:
        if self.ties not in TIES:
            raise SpecError(f"ties must be one of {TIES}, got {self.ties!r}", field="ties", value=self.ties)
        if self.slots < 1 or self.window < 1 or not 0 <= self.reserve <= self.slots:
            raise SpecError(
                f"slots ≥ 1, window ≥ 1 and reserve in 0..slots (got {self.slots}, {self.window}, "
                f"{self.reserve})",
                field="reserve",
            )
        names = [t.name for t in self.tenants]
        if not names or len(set(names)) != len(names):
            raise SpecError(f"tenants must be one or more distinct names, got {names}", field="tenants")
        if not 1 <= self.s_min <= min(self.s_opp, *(t.s_max for t in self.tenants)):
            # a ceiling below s_min would leave the model without runs: "no miss" would be vacuous
            raise SpecError(
                f"s_min {self.s_min} must be in 1..every ceiling", field="s_min", value=self.s_min
            )

    @property
    def tiers(self) -> dict[str, int]:
        """Each floored tenant's tier (`rvguard.verify.schedule.simulate`'s ``tiers``)."""
        return {t.name: t.tier for t in self.tenants}

    @property
    def n_opp(self) -> int:
        """Opportunistic jobs in the model (default C − R: as many as may run at once)."""
        return self.slots - self.reserve if self.opp_jobs is None else self.opp_jobs

    @property
    def stable(self) -> bool:
        """A4: Σ_j B_j · s_j ≤ C · W."""
        return sum(t.floor * t.s_max for t in self.tenants) <= self.slots * self.window

    def with_deadlines(self, deadlines: Mapping[str, int | None]) -> TierParams:
        """The same model with the given tenants' deadlines replaced.

        Raises:
            SpecError: a name that is no floored tenant of the model.
        """
        unknown = set(deadlines) - set(self.tiers)
        if unknown:
            raise SpecError(f"no such floored tenant: {sorted(unknown)}", field="tenants")
        tenants = tuple(replace(t, deadline=deadlines.get(t.name, t.deadline)) for t in self.tenants)
        return replace(self, tenants=tenants)


def tier_variables(z3: Any, p: TierParams) -> JobVars:
    """The model's jobs: each floored tenant's in turn (by `TierParams.tenants`), then the opportunistic."""
    lowest = max(t.tier for t in p.tenants) + 1
    rows: list[tuple[str, int, int, int | None]] = []
    for t in p.tenants:
        rows += [(t.name, t.tier, t.s_max, t.deadline)] * t.n_jobs
    rows += [(OPPORTUNISTIC, lowest, p.s_opp, None)] * p.n_opp
    return job_variables(z3, rows)


def encode_tier_entitlement(z3: Any, p: TierParams, v: JobVars) -> Any:
    """Each floored tenant's arrivals fall in its windows, at most its floor in each."""
    clauses = []
    for t in p.tenants:
        idx = [i for i, name in enumerate(v.tenants) if name == t.name]
        clauses += [z3.And(v.a[i] >= 0, v.a[i] < t.windows * p.window) for i in idx]
        for k in range(t.windows):
            lo, hi = k * p.window, (k + 1) * p.window
            inside = z3.Sum([z3.If(z3.And(v.a[i] >= lo, v.a[i] < hi), 1, 0) for i in idx])
            clauses.append(inside <= t.floor)
    return z3.And(clauses)


def tier_solver(p: TierParams, goal: str = "miss", *, extra: Sequence[Any] = ()) -> tuple[Any, JobVars]:
    """A fresh solver holding the model's clauses (tracked by name), the goal and ``extra``.

    Raises:
        ValueError: an unknown goal.
    """
    if goal not in TIER_GOALS:
        raise ValueError(f"goal must be one of {TIER_GOALS}, got {goal!r}")
    z3 = load_z3()
    v = tier_variables(z3, p)
    target = encode_miss(z3, v) if goal == "miss" else None
    s = dispatch_solver(z3, p, v, encode_tier_entitlement(z3, p, v), target)
    for i, e in enumerate(extra):
        s.assert_and_track(e, f"extra_{i}")
    return s, v


def find_tier_schedule(p: TierParams, goal: str = "miss", *, timeout_ms: int = 0) -> Schedule | None:
    """Ask Z3 for a run of the multi-tier model that reaches ``goal``.

    Args:
        p: the model's bounds.
        goal: ``"miss"`` (a job of a tenant with a deadline finishes after it)
            or ``"any"``.
        timeout_ms: z3 timeout (0 = none).

    Returns:
        The run (jobs in `tier_variables` order, delivery order in
        `Schedule.order`), or None when no run within the bounds reaches the goal.

    Raises:
        RuntimeError: z3 answered unknown (e.g. on timeout): never read as "no run".
    """
    s, v = tier_solver(p, goal)
    return solve(s, v, p.slots, timeout_ms)
