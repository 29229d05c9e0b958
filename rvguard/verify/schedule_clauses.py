"""The bounded schedule model's dispatch semantics as Z3 clauses, over jobs of any tenants.

The semantics are stated in `rvguard.verify.schedule` (its module docstring);
`simulate` there is their executable form, and tests hold the two equal. Here
they are clauses over a `JobVars`: each job's tenant, rank (its tier;
opportunistic jobs below every tier), ceiling and deadline are fixed, and its
arrival, service, start and delivery position are z3 integers. What a model
adds on top is who may arrive when (its entitlement clause): one assured
class in `rvguard.verify.schedule.ModelParams`, several floored tenants and
tiers in `rvguard.verify.tiers`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "OPPORTUNISTIC",
    "TIES",
    "Bounds",
    "JobVars",
    "Ties",
    "dispatch_solver",
    "encode_capacity",
    "encode_delivery",
    "encode_envelope",
    "encode_miss",
    "encode_priority",
    "encode_work_conserving",
    "job_variables",
]

OPPORTUNISTIC = "opportunistic"
Ties = Literal["completions-first", "batch", "any"]
TIES: tuple[Ties, ...] = ("completions-first", "batch", "any")


class Bounds(Protocol):
    """What the dispatch clauses read of a model's parameters (`ModelParams`, `tiers.TierParams`)."""

    @property
    def slots(self) -> int: ...
    @property
    def s_opp(self) -> int: ...
    @property
    def s_min(self) -> int: ...
    @property
    def ties(self) -> Ties: ...
    @property
    def reserve(self) -> int: ...


@dataclass(frozen=True, slots=True)
class JobVars:
    """The model's jobs (each tenant's together, in arrival order) and their z3 variables.

    Per job: tenant, rank (tier; opportunistic below every tier), service
    ceiling and deadline (None: not checked); arrival ``a``, service ``s``,
    ``start`` and delivery position ``seq``.
    """

    tenants: tuple[str, ...]
    ranks: tuple[int, ...]
    ceilings: tuple[int, ...]
    deadlines: tuple[int | None, ...]
    a: list[Any]
    s: list[Any]
    start: list[Any]
    seq: list[Any]

    @property
    def finish(self) -> list[Any]:
        return [st + sv for st, sv in zip(self.start, self.s, strict=True)]

    def assured(self) -> list[int]:
        """The floored jobs (every tenant but the opportunistic one)."""
        return [i for i, t in enumerate(self.tenants) if t != OPPORTUNISTIC]


def job_variables(z3: Any, rows: Sequence[tuple[str, int, int, int | None]]) -> JobVars:
    """Variables for jobs given as (tenant, rank, ceiling, deadline) rows, each tenant's rows together."""
    n = len(rows)
    return JobVars(
        tuple(r[0] for r in rows),
        tuple(r[1] for r in rows),
        tuple(r[2] for r in rows),
        tuple(r[3] for r in rows),
        [z3.Int(f"arrival_{i}") for i in range(n)],
        [z3.Int(f"service_{i}") for i in range(n)],
        [z3.Int(f"start_{i}") for i in range(n)],
        [z3.Int(f"sequence_{i}") for i in range(n)],
    )


def _busy(z3: Any, v: JobVars, t: Any) -> Any:
    return z3.Sum([z3.If(z3.And(st <= t, t < f), 1, 0) for st, f in zip(v.start, v.finish, strict=True)])


def encode_envelope(z3: Any, p: Bounds, v: JobVars) -> Any:
    """Services within [s_min, ceiling], starts after arrivals, each tenant's jobs in arrival order."""
    clauses = []
    for i, t in enumerate(v.tenants):
        clauses += [v.s[i] >= p.s_min, v.s[i] <= v.ceilings[i], v.start[i] >= v.a[i]]
        if t == OPPORTUNISTIC:
            clauses.append(v.a[i] >= -p.s_opp)
        if i > 0 and v.tenants[i - 1] == t:
            clauses.append(v.a[i - 1] <= v.a[i])  # index order is arrival order
    return z3.And(clauses)


def _busy_opp(z3: Any, v: JobVars, t: Any) -> Any:
    pairs = [
        (st, f)
        for i, (st, f) in enumerate(zip(v.start, v.finish, strict=True))
        if v.tenants[i] == OPPORTUNISTIC
    ]
    return z3.Sum([z3.If(z3.And(st <= t, t < f), 1, 0) for st, f in pairs]) if pairs else z3.IntVal(0)


def encode_capacity(z3: Any, p: Bounds, v: JobVars) -> Any:
    """At most C jobs run at any start instant (hence at any instant), at most C − R opportunistic."""
    clauses = [_busy(z3, v, st) <= p.slots for st in v.start]
    opp = [i for i, t in enumerate(v.tenants) if t == OPPORTUNISTIC]
    if p.reserve:
        clauses += [_busy_opp(z3, v, v.start[i]) <= p.slots - p.reserve for i in opp]
    return z3.And(clauses)


def _full_for(z3: Any, p: Bounds, v: JobVars, j: int, t: Any) -> Any:
    """No slot at ``t`` that job j may take: all C busy, or (opportunistic j) C − R opportunistic busy."""
    full = _busy(z3, v, t) == p.slots
    if p.reserve and v.tenants[j] == OPPORTUNISTIC:
        return z3.Or(full, _busy_opp(z3, v, t) == p.slots - p.reserve)
    return full


def encode_work_conserving(z3: Any, p: Bounds, v: JobVars) -> Any:
    """A job waiting at an arrival or completion instant finds no slot it may take (`_full_for`)."""
    n = len(v.tenants)
    clauses = [z3.Implies(v.start[j] > v.a[j], _full_for(z3, p, v, j, v.a[j])) for j in range(n)]
    for j in range(n):
        for k, f in enumerate(v.finish):
            if j != k:
                clauses.append(z3.Implies(z3.And(v.a[j] <= f, f < v.start[j]), _full_for(z3, p, v, j, f)))
    return z3.And(clauses)


def encode_delivery(z3: Any, p: Bounds, v: JobVars) -> Any:
    """Arrivals reach the dispatcher in one order: by arrival tick, same-tick ties free across tenants."""
    del p
    n = len(v.tenants)
    clauses = [z3.Distinct(v.seq)] if n > 1 else []
    for i, j in itertools.combinations(range(n), 2):
        if v.tenants[i] == v.tenants[j]:
            clauses.append(v.seq[i] < v.seq[j])  # within a tenant, index order is delivery order
        else:
            clauses.append(z3.Implies(v.a[i] < v.a[j], v.seq[i] < v.seq[j]))
            clauses.append(z3.Implies(v.a[j] < v.a[i], v.seq[j] < v.seq[i]))
    return z3.And(clauses)


def _outranks(z3: Any, v: JobVars, k: int, j: int) -> Any:
    """Does k rank ahead of j? Rank (tier), then delivery order (index order within a tenant)."""
    if v.ranks[k] != v.ranks[j]:
        return z3.BoolVal(v.ranks[k] < v.ranks[j])
    if v.tenants[k] == v.tenants[j]:
        return z3.BoolVal(k < j)
    return v.seq[k] < v.seq[j]


def _may_pass(z3: Any, p: Bounds, v: JobVars, j: int, k: int) -> Any:
    """May k start at S_k while j, arrived by S_k, still waits? (the tie rule; the reserve)"""
    batch = _outranks(z3, v, k, j)
    if p.ties == "batch":
        return batch
    t = v.start[k]
    freed = z3.And(v.a[k] < t, z3.Or(v.a[j] == t, batch))  # a slot freed at t goes to the queue first
    eager = z3.And(v.a[k] == t, v.a[j] == t, v.seq[k] < v.seq[j])  # a free slot goes to the first arrival
    rules = [freed, eager]
    if p.reserve and v.tenants[j] == OPPORTUNISTIC and v.tenants[k] != OPPORTUNISTIC:
        rules.append(_busy_opp(z3, v, t) == p.slots - p.reserve)  # RB: j may take no slot at t
    completions_first = z3.Or(rules)
    return completions_first if p.ties == "completions-first" else z3.Or(batch, completions_first)


def encode_priority(z3: Any, p: Bounds, v: JobVars) -> Any:
    """If j has arrived when k starts and still waits, the tie order (``p.ties``) lets k pass j."""
    n = len(v.tenants)
    clauses = []
    for j, k in itertools.permutations(range(n), 2):
        may = _may_pass(z3, p, v, j, k)
        if z3.is_true(may):
            continue
        clauses.append(z3.Implies(z3.And(v.a[j] <= v.start[k], v.start[k] < v.start[j]), may))
    return z3.And(clauses)


def encode_miss(z3: Any, v: JobVars) -> Any:
    """Some job with a deadline finishes after it: F − a > D."""
    late = [v.finish[i] - v.a[i] > d for i, d in enumerate(v.deadlines) if d is not None]
    return z3.Or(late) if late else z3.BoolVal(False)


def dispatch_solver(z3: Any, p: Bounds, v: JobVars, entitlement: Any, goal: Any | None) -> Any:
    """A fresh solver holding the dispatch semantics over ``v``, the entitlement and the goal (by name)."""
    s = z3.Solver()
    s.assert_and_track(encode_envelope(z3, p, v), "envelope")
    s.assert_and_track(entitlement, "entitlement")
    s.assert_and_track(encode_capacity(z3, p, v), "capacity")
    s.assert_and_track(encode_work_conserving(z3, p, v), "work_conserving")
    s.assert_and_track(encode_delivery(z3, p, v), "delivery")
    s.assert_and_track(encode_priority(z3, p, v), "priority")
    if goal is not None:
        s.assert_and_track(goal, "goal")
    return s
