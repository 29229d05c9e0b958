"""A bounded discrete schedule model of the guard's dispatch, for Z3 and for tests.

Theory of operation. Time is integer ticks. Two classes share ``slots``
(C) non-preemptive slots: *assured* jobs (rank 0, the floored tenant's
entitled requests: at most ``floor`` (B) arrivals in each tumbling window
``[kW, (k+1)W)``, k < ``windows``) and *opportunistic* jobs (rank 1, any
arrival time from ``-s_opp`` on, so some are already in flight at t = 0).
A job's service is an integer in ``[s_min, ceiling]`` (``s_max`` or
``s_opp``). Semantics, made explicit because the decision core must agree
with them (`simulate` is the executable form, `find_schedule` the symbolic
one, and tests check one against the other and both against the core):

1. Rank: class (assured first), then delivery order (arrival tick, then the
   order in which same-tick arrivals reach the core; Z3 chooses the latter
   freely, `Schedule.order` records it). With several floored tenants
   (`rvguard.verify.tiers`; ``simulate(..., tiers=)``) the class is the
   tenant's tier, opportunistic jobs below every tier.
2. Work-conserving (a job never waits while a slot is free that it may
   take) and non-preemptive (a started job holds its slot for its whole
   service). With a ``reserve`` R, opportunistic jobs hold at most C − R
   slots (the core's RB rule): one may wait beside a free slot when C − R
   opportunistic jobs run; assured jobs may take any slot.
3. Same-instant order, ``ties``:

   * ``"completions-first"`` (default; what the Guard and the simulator do,
     and what `DecisionCore` does when its ``finish`` calls at t precede its
     ``arrive`` calls at t): completions at t free their slots and each is
     refilled at once from the jobs queued *before* t (by rank); then the
     arrivals of t, in delivery order, each take a free slot if one is left
     (else they queue). A slot freed at t can thus go to an opportunistic job
     queued earlier although an assured job arrives at t.
   * ``"batch"``: completions free slots, then all arrivals of t join the
     queue, then free slots are filled by rank (the core with its arrivals
     at t delivered before its completions at t).
   * ``"any"`` (symbolic only): each waiting-while-another-starts pair may
     follow either rule. It over-approximates every interleaving of
     completions and arrivals at an instant, so a bound proved with it holds
     whatever the delivery order; its runs need not be realisable.

The symbolic form states these as constraints over arrival a, service s,
start S (F = S + s) and delivery sequence q: S ≥ a; at most C jobs run at
any start instant; a waiting job at an arrival or completion instant means
all C slots are busy there; and when j has arrived by S_k yet starts after
k, the tie rule allows it (batch: k outranks j; completions-first: k was
queued before S_k and j arrived at S_k or ranks below k, or both arrived at
S_k and k was delivered first, or — with a reserve — j is opportunistic,
k is not, and C − R opportunistic jobs run at S_k: j may take no slot). Given
a, s and q these pin the greedy schedule exactly (tests check uniqueness
against `simulate`). The clauses are in `rvguard.verify.schedule_clauses`,
shared with the multi-tier model.

The backlog Q_A(t) is the number of assured jobs in the system (arrived,
not finished) at t; it is largest at an arrival instant.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from ..errors import SpecError
from ._z3 import load_z3
from .reserve import reserve_bound
from .schedule_clauses import (
    OPPORTUNISTIC,
    TIES,
    JobVars,
    Ties,
    dispatch_solver,
    encode_miss,
    job_variables,
)

__all__ = [
    "ASSURED",
    "OPPORTUNISTIC",
    "TIES",
    "Job",
    "ModelParams",
    "Schedule",
    "Ties",
    "find_schedule",
    "model_solver",
    "simulate",
    "solve",
]

ASSURED = "assured"


@dataclass(frozen=True, slots=True)
class ModelParams:
    """The bounds of one schedule model (all in integer ticks).

    Attributes:
        slots: C. floor: B, assured arrivals per window. window: W.
        s_max: assured ceiling. s_opp: opportunistic ceiling.
        deadline: D, relative. windows: k windows of assured arrivals.
        opp_jobs: opportunistic jobs (default C − R). s_min: least service.
        assured_jobs: assured jobs (default B·k, every window full).
        ties: the same-instant order (module docstring); ``"completions-first"``
            is the deployed one, ``"any"`` covers every delivery order.
        reserve: R, slots opportunistic jobs never hold (0 ≤ R ≤ C).
    """

    slots: int
    floor: int
    window: int
    s_max: int
    s_opp: int
    deadline: int
    windows: int = 2
    opp_jobs: int | None = None
    s_min: int = 1
    assured_jobs: int | None = None
    ties: Ties = "completions-first"
    reserve: int = 0

    def __post_init__(self) -> None:
        if self.ties not in TIES:
            raise SpecError(f"ties must be one of {TIES}, got {self.ties!r}", field="ties", value=self.ties)
        if not 0 <= self.reserve <= self.slots:
            raise SpecError(f"reserve must be in 0..{self.slots}, got {self.reserve}", field="reserve")

    @property
    def n_assured(self) -> int:
        """Assured jobs in the model."""
        return self.floor * self.windows if self.assured_jobs is None else self.assured_jobs

    @property
    def n_opp(self) -> int:
        """Opportunistic jobs in the model (default C − R: as many as may run at once)."""
        return self.slots - self.reserve if self.opp_jobs is None else self.opp_jobs

    @property
    def stable(self) -> bool:
        """A4: B · s_max ≤ C · W."""
        return self.floor * self.s_max <= self.slots * self.window

    def waves(self, cohort: int | None = None) -> int:
        """⌈cohort / C⌉ (cohort defaults to B)."""
        n = self.floor if cohort is None else cohort
        return -(-n // self.slots)

    @property
    def reference_bound(self) -> int:
        """The reference study's bound s_opp + ⌈B/C⌉ · s_max."""
        return self.s_opp + self.waves() * self.s_max

    def reserved_bound(self, cohort: int | None = None) -> int:
        """The deadline bound with the reserve (`rvguard.verify.reserve`): b = s_opp, no lower floor."""
        n = self.floor if cohort is None else cohort
        t = reserve_bound(
            n, self.slots, self.reserve, Fraction(self.s_max), Fraction(self.s_opp), Fraction(0)
        )
        return int(t)


@dataclass(frozen=True, slots=True)
class Job:
    """One job of a schedule: its class, arrival, service, start and finish tick."""

    tenant: str
    arrival: int
    service: int
    start: int

    @property
    def finish(self) -> int:
        """start + service."""
        return self.start + self.service

    @property
    def sojourn(self) -> int:
        """finish − arrival."""
        return self.finish - self.arrival


@dataclass(frozen=True, slots=True)
class Schedule:
    """A concrete run: C, the jobs (model order: assured first, by arrival) and their delivery order.

    ``order`` lists job indices in the order their arrivals reach the
    dispatcher (by arrival tick; same-tick arrivals in the order the run
    chose). Empty means by (arrival, index).
    """

    slots: int
    jobs: tuple[Job, ...]
    notes: dict[str, int] = field(default_factory=dict)
    order: tuple[int, ...] = ()

    def delivery(self) -> list[int]:
        """Job indices in delivery order (``order``, or by arrival then index)."""
        if self.order:
            return list(self.order)
        return sorted(range(len(self.jobs)), key=lambda i: (self.jobs[i].arrival, i))

    @property
    def sojourns(self) -> list[int]:
        """Sojourn of every job, in job order."""
        return [j.sojourn for j in self.jobs]

    def max_sojourn(self, tenant: str = ASSURED) -> int:
        """Largest sojourn of the tenant's jobs (0 when it has none)."""
        return max((j.sojourn for j in self.jobs if j.tenant == tenant), default=0)

    def max_backlog(self) -> int:
        """Largest Q_A: assured jobs arrived and not finished, at any instant."""
        assured = [j for j in self.jobs if j.tenant == ASSURED]
        return max((sum(1 for i in assured if i.arrival <= j.arrival < i.finish) for j in assured), default=0)

    def to_json(self) -> dict[str, Any]:
        """A plain dict: slots and per-job arrival, service, start, finish, sojourn."""
        return {
            "slots": self.slots,
            "order": self.delivery(),
            "jobs": [
                {
                    "tenant": j.tenant,
                    "arrival": j.arrival,
                    "service": j.service,
                    "start": j.start,
                    "finish": j.finish,
                    "sojourn": j.sojourn,
                }
                for j in self.jobs
            ],
        }


def simulate(
    slots: int,
    tenants: Sequence[str],
    arrivals: Sequence[int],
    services: Sequence[int],
    *,
    ties: Literal["completions-first", "batch"] = "completions-first",
    order: Sequence[int] | None = None,
    reserve: int = 0,
    tiers: Mapping[str, int] | None = None,
) -> Schedule:
    """Run the model's dispatch semantics (module docstring) on concrete jobs.

    Args:
        slots: C, the number of slots.
        tenants: per job, a floored tenant (a key of ``tiers``) or ``"opportunistic"``.
        arrivals: arrival tick per job.
        services: service ticks per job (≥ 1).
        ties: the same-instant order: ``"completions-first"`` (the Guard's and
            the simulator's) or ``"batch"``.
        order: delivery order, a permutation of the job indices sorted by
            arrival (default: by arrival, then index); it breaks ties between
            same-tick arrivals.
        reserve: R; opportunistic jobs hold at most C − R slots.
        tiers: each floored tenant's tier (default ``{"assured": 0}``); a waiting
            job ranks by tier, then delivery order, opportunistic jobs last.

    Returns:
        The schedule, jobs in the given order.

    Raises:
        SpecError: lengths differ, an unknown tenant or tie order, a service < 1,
            ``order`` is not a delivery order, or the reserve is outside 0..C (or
            is C while opportunistic jobs wait: they would never run).
    """
    rank = _ranks(tenants, {ASSURED: 0} if tiers is None else tiers)
    seq = _delivery(tenants, arrivals, services, slots, ties, order, reserve)
    start = _greedy(slots, tenants, arrivals, services, ties, seq, rank, reserve)
    jobs = tuple(Job(tenants[i], arrivals[i], services[i], start[i]) for i in range(len(tenants)))
    return Schedule(slots, jobs, order=tuple(seq))


def _greedy(
    slots: int,
    tenants: Sequence[str],
    arrivals: Sequence[int],
    services: Sequence[int],
    ties: str,
    seq: list[int],
    rank: list[int],
    reserve: int,
) -> dict[int, int]:
    """The dispatch itself, instant by instant (arguments checked by `simulate`): each job's start."""
    pos = {i: n for n, i in enumerate(seq)}
    start: dict[int, int] = {}
    running: list[int] = []  # job indices holding a slot

    def take(i: int, t: int) -> None:
        """Start ``i`` at ``t`` if a slot is free that it may take (RB: opportunistic below C − R)."""
        opp = sum(1 for j in running if tenants[j] == OPPORTUNISTIC)
        if len(running) < slots and (tenants[i] != OPPORTUNISTIC or opp < slots - reserve):
            start[i] = t
            running.append(i)

    instants = sorted(set(arrivals))
    while instants:
        t = instants.pop(0)
        running[:] = [j for j in running if start[j] + services[j] > t]
        before = t if ties == "completions-first" else t + 1  # who competes for the freed slots
        queued = [i for i in seq if arrivals[i] < before and i not in start]
        for i in sorted(queued, key=lambda i: (rank[i], pos[i])):
            take(i, t)
        for i in (i for i in seq if arrivals[i] == t and i not in start):
            take(i, t)  # completions-first: a same-instant arrival takes a free slot
        finishes = {start[j] + services[j] for j in running}
        instants = sorted({f for f in finishes if f > t} | {a for a in arrivals if a > t})
    return start


def _ranks(tenants: Sequence[str], tiers: Mapping[str, int]) -> list[int]:
    """Each job's rank: its tenant's tier; opportunistic jobs below every tier."""
    if OPPORTUNISTIC in tiers or any(t not in tiers and t != OPPORTUNISTIC for t in tenants):
        known = ", ".join(sorted(tiers))
        raise SpecError(f"tenants must be {OPPORTUNISTIC} or one of the tiers' ({known})", field="tenants")
    lowest = max(tiers.values(), default=0) + 1
    return [lowest if t == OPPORTUNISTIC else tiers[t] for t in tenants]


def _delivery(
    tenants: Sequence[str],
    arrivals: Sequence[int],
    services: Sequence[int],
    slots: int,
    ties: str,
    order: Sequence[int] | None,
    reserve: int = 0,
) -> list[int]:
    """Check `simulate`'s arguments; return the delivery order."""
    if not 0 <= reserve < slots and (OPPORTUNISTIC in tenants or not 0 <= reserve <= slots):
        raise SpecError(
            f"reserve {reserve} leaves no slot to opportunistic jobs (C = {slots})", field="reserve"
        )
    n = len(tenants)
    if not n == len(arrivals) == len(services) or slots < 1:
        raise SpecError("tenants, arrivals and services need equal lengths, and slots ≥ 1", field="slots")
    if any(s < 1 for s in services):
        raise SpecError("services must be ≥ 1", field="services")
    if ties not in ("completions-first", "batch"):
        raise SpecError(f"simulate's ties must be completions-first or batch, got {ties!r}", field="ties")
    seq = sorted(range(n), key=lambda i: (arrivals[i], i)) if order is None else list(order)
    if sorted(seq) != list(range(n)) or any(arrivals[i] > arrivals[j] for i, j in itertools.pairwise(seq)):
        raise SpecError("order must be a permutation of the jobs, by arrival", field="order", value=order)
    return seq


# -- the symbolic model --------------------------------------------------------
def _variables(z3: Any, p: ModelParams) -> JobVars:
    assured = (ASSURED, 0, p.s_max, p.deadline)
    return job_variables(z3, [assured] * p.n_assured + [(OPPORTUNISTIC, 1, p.s_opp, None)] * p.n_opp)


def encode_entitlement(z3: Any, p: ModelParams, v: JobVars) -> Any:
    """Assured arrivals fall in the k windows, at most B in each."""
    idx = v.assured()
    clauses = [z3.And(v.a[i] >= 0, v.a[i] < p.windows * p.window) for i in idx]
    for k in range(p.windows):
        lo, hi = k * p.window, (k + 1) * p.window
        clauses.append(z3.Sum([z3.If(z3.And(v.a[i] >= lo, v.a[i] < hi), 1, 0) for i in idx]) <= p.floor)
    return z3.And(clauses)


def encode_backlog(z3: Any, p: ModelParams, v: JobVars, bound: int | None = None) -> Any:
    """Q_A exceeds ``bound`` (default B) at some assured arrival instant."""
    idx, limit = v.assured(), p.floor if bound is None else bound
    f = v.finish
    in_system = [z3.Sum([z3.If(z3.And(v.a[i] <= v.a[j], v.a[j] < f[i]), 1, 0) for i in idx]) for j in idx]
    return z3.Or([q > limit for q in in_system])


GOALS = ("miss", "backlog", "any")


def model_solver(
    p: ModelParams, goal: str = "miss", *, backlog_bound: int | None = None, extra: Sequence[Any] = ()
) -> tuple[Any, JobVars]:
    """A fresh solver holding the model's clauses (tracked by name) and the goal.

    Raises:
        ValueError: an unknown goal.
    """
    if goal not in GOALS:
        raise ValueError(f"goal must be one of {GOALS}, got {goal!r}")
    z3 = load_z3()
    v = _variables(z3, p)
    target = {"miss": encode_miss(z3, v), "any": None}.get(goal)
    if goal == "backlog":
        target = encode_backlog(z3, p, v, backlog_bound)
    s = dispatch_solver(z3, p, v, encode_entitlement(z3, p, v), target)
    for i, e in enumerate(extra):
        s.assert_and_track(e, f"extra_{i}")
    return s, v


def solve(solver: Any, v: JobVars, slots: int, timeout_ms: int = 0) -> Schedule | None:
    """Check ``solver`` (its clauses over ``v``); the run it finds, or None when there is none.

    Raises:
        RuntimeError: z3 answered unknown (e.g. on timeout): never read as "no run".
    """
    z3 = load_z3()
    if timeout_ms:
        solver.set("timeout", timeout_ms)
    verdict = solver.check()
    if verdict == z3.unsat:
        return None
    if verdict != z3.sat:
        limit = f" (timeout {timeout_ms} ms)" if timeout_ms else ""
        raise RuntimeError(f"z3 gave up on the schedule model{limit}: {solver.reason_unknown()}")
    m = solver.model()

    def val(x: Any) -> int:
        return int(m.eval(x, model_completion=True).as_long())

    jobs = tuple(Job(t, val(v.a[i]), val(v.s[i]), val(v.start[i])) for i, t in enumerate(v.tenants))
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].arrival, val(v.seq[i])))
    return Schedule(slots, jobs, order=tuple(order))


def find_schedule(
    p: ModelParams, goal: str = "miss", *, backlog_bound: int | None = None, timeout_ms: int = 0
) -> Schedule | None:
    """Ask Z3 for a run of the model that reaches ``goal``.

    Args:
        p: the model's bounds.
        goal: ``"miss"`` (an assured job's sojourn exceeds D), ``"backlog"``
            (Q_A > ``backlog_bound``, default B, at some instant) or ``"any"``.
        backlog_bound: the Q_A bound the ``"backlog"`` goal exceeds.
        timeout_ms: z3 timeout (0 = none).

    Returns:
        The concrete schedule (arrivals, services, classes, C and the
        model's start times; sojourns via `Schedule.sojourns`), or None
        when no run within the bounds reaches the goal.

    Raises:
        RuntimeError: z3 answered unknown (e.g. on timeout).
    """
    s, v = model_solver(p, goal, backlog_bound=backlog_bound)
    return solve(s, v, p.slots, timeout_ms)
