"""The multi-tier schedule model (`rvguard.verify.tiers`): its runs are the core's, and it checks the
closing deadline bound (proofs/README.md §2) within its horizon.

* executable: `simulate` with several floored tenants, tiers and a reserve starts every job when the
  real `DecisionCore` does, on random small schedules (`_replay`'s driver, completions first);
* symbolic: with arrivals, services and delivery order pinned, Z3 admits exactly the simulated run
  (completions-first and batch) and ``ties="any"`` admits both; Z3's own runs are simulated runs and
  the core's;
* the issue's two-tier contract (one slot, W = 4, hi tier 0 and lo tier 1, floor 1, s_max 2, s_opp 1):
  at the former bound D_lo = 9 Z3 finds a run in which lo misses, and the core misses on it too;
* at the deadlines `verify` accepts (the least at which every floored tenant's obligation holds),
  Z3 finds no run in which a floored request misses, under every same-instant order (``any``).

Every Z3 call has a timeout, and running out of it fails the test: "unknown" is never "no run".
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.errors import SpecError
from rvguard.verify.preconditions import all_hold, verify_contract
from rvguard.verify.schedule import OPPORTUNISTIC, Schedule, Ties, simulate
from rvguard.verify.synthesis import deadline_bound, synthesize_deadline
from rvguard.verify.tiers import Floored, TierParams, find_tier_schedule, tier_solver
from tests.verify._replay import OPP, Tenant, core_contract, replay

TIMEOUT_MS = 30_000


def z3_run(p: TierParams, goal: str) -> Schedule | None:
    """`find_tier_schedule` with a timeout; running out of it fails the test."""
    try:
        return find_tier_schedule(p, goal, timeout_ms=TIMEOUT_MS)
    except RuntimeError as e:
        pytest.fail(f"z3 gave no answer within {TIMEOUT_MS} ms (goal {goal}, {p}): {e}; not a proof")


def simulated(p: TierParams, sched: Schedule, ties: Ties = "completions-first") -> Schedule:
    jobs = sched.jobs
    assert ties != "any"
    return simulate(
        p.slots,
        [j.tenant for j in jobs],
        [j.arrival for j in jobs],
        [j.service for j in jobs],
        ties=ties,
        order=sched.delivery(),
        reserve=p.reserve,
        tiers=p.tiers,
    )


def core_starts(p: TierParams, sched: Schedule) -> list[int]:
    """Each job's start when `DecisionCore` serves the schedule's arrivals (delivery order, completions
    first); times shift so that the earliest arrival is ≥ 0, and the contract's epoch with them."""
    offset = max(0, -min(j.arrival for j in sched.jobs))
    tenants = {t.name: Tenant(t.tier, t.floor, t.s_max) for t in p.tenants}
    s_opp = max([p.s_opp] + [j.service for j in sched.jobs if j.tenant == OPPORTUNISTIC])
    contract = core_contract(p.window, p.slots, tenants, s_opp, {}, epoch=float(offset), reserve=p.reserve)
    order = sched.delivery()
    jobs = [sched.jobs[i] for i in order]
    starts = replay(
        DecisionCore(contract), [(_core_name(j.tenant), j.arrival + offset, j.service) for j in jobs]
    )
    out = [0] * len(order)
    for n, i in enumerate(order):
        out[i] = starts[n] - offset
    return out


def _core_name(tenant: str) -> str:
    return OPP if tenant == OPPORTUNISTIC else tenant


def assert_core_agrees(p: TierParams, sched: Schedule) -> None:
    starts = core_starts(p, sched)
    assert starts == [j.start for j in sched.jobs], (starts, sched.to_json())


# -- random small schedules: simulate = the core; Z3 pinned = simulate --------------------------------
@st.composite
def tier_runs(
    draw: st.DrawFn, *, tenants: int = 3, jobs: int = 4, opp: int = 3, horizon: int = 15
) -> tuple[TierParams, list[str], list[int], list[int], list[int]]:
    """(params, tenants, arrivals, services, order) laid out as the model's jobs: each floored tenant's
    in arrival order, then the opportunistic ones; every floor the largest count in one window (so each
    arrival is entitled), same-tick arrivals of different tenants in any order."""
    slots, window = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    n_opp = draw(st.integers(0, opp))
    reserve = draw(st.integers(0, slots - 1 if n_opp else slots))
    floored: list[Floored] = []
    names: list[str] = []
    arrivals: list[int] = []
    services: list[int] = []
    for k in range(draw(st.integers(1, tenants))):
        n = draw(st.integers(0, jobs))
        a = sorted(draw(st.lists(st.integers(0, horizon), min_size=n, max_size=n)))
        s = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
        per_window = [x // window for x in a]
        floor = max((per_window.count(w) for w in set(per_window)), default=1)
        windows = max(a, default=0) // window + 1
        tier = draw(st.integers(0, 2))
        floored.append(Floored(f"t{k}", tier, floor, max(s, default=1), windows=windows, jobs=n))
        names += [f"t{k}"] * n
        arrivals += a
        services += s
    a = sorted(draw(st.lists(st.integers(-3, horizon), min_size=n_opp, max_size=n_opp)))
    s = draw(st.lists(st.integers(1, 4), min_size=n_opp, max_size=n_opp))
    names, arrivals, services = names + [OPPORTUNISTIC] * n_opp, arrivals + a, services + s
    s_opp = max([1, *s, *(-x for x in a)])  # the model's opportunistic arrivals start at -s_opp
    p = TierParams(slots, window, tuple(floored), s_opp, opp_jobs=n_opp, reserve=reserve)
    keys = list(draw(st.permutations(range(len(names)))))
    for name in set(names):  # within a tenant, index order is delivery order
        idx = [i for i, t in enumerate(names) if t == name]
        for i, key in zip(idx, sorted(keys[i] for i in idx), strict=True):
            keys[i] = key
    order = sorted(range(len(names)), key=lambda i: (arrivals[i], keys[i]))
    return p, names, arrivals, services, order


Run = tuple[TierParams, list[str], list[int], list[int], list[int]]


@settings(max_examples=300, deadline=None)
@given(tier_runs())
def test_simulate_with_tiers_agrees_with_the_core(run: Run) -> None:
    p, names, arrivals, services, order = run
    if not names:
        return
    sched = simulate(p.slots, names, arrivals, services, order=order, reserve=p.reserve, tiers=p.tiers)
    assert_core_agrees(p, sched)


def _pins(arrivals: list[int], services: list[int], order: list[int]) -> list[object]:
    import z3

    pins = [z3.Int(f"arrival_{i}") == a for i, a in enumerate(arrivals)]
    pins += [z3.Int(f"service_{i}") == s for i, s in enumerate(services)]
    pins += [z3.Int(f"sequence_{i}") == n for n, i in enumerate(order)]
    return pins


RB_CASE: Run = (  # a floor arrival takes the free slot beside a reserve-blocked opportunistic job
    TierParams(
        slots=2, window=4, tenants=(Floored("t0", 0, 1, 1, windows=1),), s_opp=5, opp_jobs=2, reserve=1
    ),
    ["t0", OPPORTUNISTIC, OPPORTUNISTIC],
    [1, 0, 0],
    [1, 5, 1],
    [1, 2, 0],
)


@settings(max_examples=100, deadline=None)
@given(tier_runs(tenants=3, jobs=2, opp=2, horizon=6), st.sampled_from(["completions-first", "batch"]))
@example(RB_CASE, "completions-first")
def test_the_encoding_admits_exactly_the_simulated_run(run: Run, ties: Ties) -> None:
    import z3

    p, names, arrivals, services, order = run
    if not names:
        return
    p = replace(p, ties=ties)
    assert ties != "any"
    expect = simulate(
        p.slots, names, arrivals, services, ties=ties, order=order, reserve=p.reserve, tiers=p.tiers
    )
    solver, v = tier_solver(p, "any", extra=_pins(arrivals, services, order))
    assert list(v.tenants) == names
    same = [st == j.start for st, j in zip(v.start, expect.jobs, strict=True)]
    solver.push()
    solver.add(z3.And(same))
    assert solver.check() == z3.sat  # the simulated run is a run of the model
    solver.pop()
    solver.add(z3.Not(z3.And(same)))
    assert solver.check() == z3.unsat  # and the only one
    if ties == "completions-first":  # the adversarial model holds both tie orders' runs
        other = simulate(
            p.slots, names, arrivals, services, ties="batch", order=order, reserve=p.reserve, tiers=p.tiers
        )
        loose, w = tier_solver(replace(p, ties="any"), "any", extra=_pins(arrivals, services, order))
        for run_ in (expect, other):
            loose.push()
            loose.add(z3.And([st == j.start for st, j in zip(w.start, run_.jobs, strict=True)]))
            assert loose.check() == z3.sat
            loose.pop()


@settings(max_examples=6, deadline=None)
@given(
    st.integers(1, 2),
    st.sampled_from([(0, 1), (0, 0), (1, 0)]),
    st.integers(1, 2),
    st.integers(1, 2),
    st.data(),
)
def test_z3_runs_are_simulated_runs_and_the_cores(
    c: int, tiers: tuple[int, int], s: int, so: int, data: st.DataObject
) -> None:
    reserve = data.draw(st.integers(0, c - 1), label="reserve")
    goal = data.draw(st.sampled_from(["miss", "any"]), label="goal")
    tenants = (
        Floored("x", tiers[0], 1, s, deadline=s + so, windows=2),
        Floored("y", tiers[1], 1, 2, deadline=2 + so),
    )
    p = TierParams(slots=c, window=2 * s, tenants=tenants, s_opp=so, reserve=reserve)
    sched = z3_run(p, goal)
    if sched is None:
        return
    assert simulated(p, sched).jobs == sched.jobs
    assert_core_agrees(p, sched)


# -- the issue's two-tier counterexample ----------------------------------------------------------
ISSUE = TierParams(slots=1, window=4, s_opp=1, tenants=(Floored("hi", 0, 1, 2), Floored("lo", 1, 1, 2)))


def former_bound(p: TierParams, name: str) -> int:
    """The former clause without the backlog assumption, for the lowest tier: each tier's floor counted
    once, doubled: s_opp + ⌈2·Σ_j B_j / C⌉ · max_j s_j."""
    assert all(t.tier <= p.tiers[name] for t in p.tenants)
    total = sum(t.floor for t in p.tenants)
    return p.s_opp + math.ceil(2 * total / p.slots) * max(t.s_max for t in p.tenants)


def test_z3_finds_the_issue_counterexample_at_the_former_bound_and_the_core_misses_too() -> None:
    d = former_bound(ISSUE, "lo")
    assert d == 9
    sched = z3_run(ISSUE.with_deadlines({"lo": d}), "miss")
    assert sched is not None, "no run misses the former bound in the model"
    assert sched.max_sojourn("lo") > d
    assert simulated(ISSUE, sched).jobs == sched.jobs
    starts = core_starts(ISSUE, sched)
    core_lo = [
        st + j.service - j.arrival for st, j in zip(starts, sched.jobs, strict=True) if j.tenant == "lo"
    ]
    assert max(core_lo) > d, (core_lo, sched.to_json())
    # three windows of hi's floor pass a waiting lo request: hi arrives in each of the first three windows
    assert len({j.arrival // ISSUE.window for j in sched.jobs if j.tenant == "hi"}) == 3


def test_the_issue_contracts_worst_lo_sojourn_in_the_model_is_the_exhaustive_searchs() -> None:
    """Within three windows (and one opportunistic job) no lo request waits more than 10 ticks: the worst
    sojourn `test_tier_search` finds by replaying every candidate schedule through the core."""
    assert z3_run(ISSUE.with_deadlines({"lo": 10}), "miss") is None


def test_verify_accepts_no_deadline_for_lo_and_hi_holds_at_its_least() -> None:
    """ρ_a = (2 + 2)/4 = 1: each window adds a window of work to lo's bound, so `verify` proves no deadline
    of lo (the issue's D_lo = 9 is rejected); hi's least accepted deadline holds in the model."""
    contract = _contract(ISSUE, {})
    assert synthesize_deadline(contract, "lo").value is None
    least = synthesize_deadline(contract, "hi").value
    assert least is not None and least == int(least)
    p = replace(ISSUE.with_deadlines({"hi": int(least)}), ties="any")
    assert z3_run(p, "any") is not None  # the model has runs: "no miss" is not vacuous
    assert z3_run(p, "miss") is None


# -- the closing bound holds in the model at the deadlines verify accepts -------------------------
def _contract(p: TierParams, deadlines: dict[str, float]) -> Contract:
    tenants = {t.name: Tenant(t.tier, t.floor, t.s_max) for t in p.tenants}
    return core_contract(p.window, p.slots, tenants, p.s_opp, deadlines, reserve=p.reserve)


def accepted_deadlines(p: TierParams) -> dict[str, int]:
    """The least deadlines at which every floored tenant's obligation holds: D ← max(D, f(D)) from one
    tick on, all tenants together (a tenant's bound grows with the deadlines of its tier and above)."""
    d = {t.name: Fraction(1) for t in p.tenants}
    for _ in range(64):
        contract = _contract(p, {n: float(x) for n, x in d.items()})
        bounds = {n: deadline_bound(contract, n) for n in d}
        assert all(b is not None for b in bounds.values()), bounds
        step = {n: max(d[n], b) for n, b in bounds.items() if b is not None}
        if step == d:
            assert all(x.denominator == 1 for x in d.values())
            return {n: int(x) for n, x in d.items()}
        d = step
    pytest.fail(f"no deadlines hold for {p}: the bound outgrows them")


CONTRACTS = {
    "issue-W8": TierParams(
        slots=1, window=8, s_opp=1, tenants=(Floored("hi", 0, 1, 2), Floored("lo", 1, 1, 2))
    ),
    "issue-W6-s_opp2": TierParams(
        slots=1, window=6, s_opp=2, tenants=(Floored("hi", 0, 1, 2), Floored("lo", 1, 1, 2))
    ),
    "three-tiers": TierParams(
        slots=1,
        window=6,
        s_opp=1,
        tenants=(Floored("a", 0, 1, 1), Floored("b", 1, 1, 1), Floored("c", 2, 1, 1, windows=2)),
    ),
    "C2-same-tier": TierParams(
        slots=2,
        window=4,
        s_opp=1,
        tenants=(Floored("a", 0, 1, 1), Floored("b", 0, 1, 2), Floored("c", 1, 1, 1, windows=2)),
    ),
    "C2-reserve": TierParams(
        slots=2, window=3, s_opp=2, reserve=1, tenants=(Floored("hi", 0, 1, 2), Floored("lo", 1, 1, 2))
    ),
}


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_no_run_misses_the_deadlines_verify_accepts(name: str) -> None:
    p = CONTRACTS[name]
    deadlines = accepted_deadlines(p)
    contract = _contract(p, {n: float(d) for n, d in deadlines.items()})
    assert all_hold(verify_contract(contract))
    model = replace(p.with_deadlines(deadlines), ties="any")
    assert z3_run(model, "any") is not None  # the model has runs: "no miss" is not vacuous
    sched = z3_run(model, "miss")
    assert sched is None, (deadlines, sched and sched.to_json())


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(SpecError, match="name"):
        Floored(OPPORTUNISTIC, 0, 1, 1)
    with pytest.raises(SpecError, match="jobs"):
        Floored("a", 0, 1, 1, windows=2, jobs=3)
    with pytest.raises(SpecError, match="distinct"):
        TierParams(slots=1, window=2, s_opp=1, tenants=(Floored("a", 0, 1, 1), Floored("a", 1, 1, 1)))
    with pytest.raises(SpecError, match="s_min"):
        TierParams(slots=1, window=2, s_opp=1, s_min=2, tenants=(Floored("a", 0, 1, 3),))
    with pytest.raises(SpecError, match="no such floored tenant"):
        ISSUE.with_deadlines({"nobody": 3})
    with pytest.raises(SpecError, match="tiers"):
        simulate(1, ["a"], [0], [1], tiers={"b": 0})
    with pytest.raises(ValueError, match="goal"):
        tier_solver(ISSUE, "backlog")


def test_a_timeout_is_an_error_not_a_verdict() -> None:
    """Z3's "unknown" (here: out of time) raises; `z3_run` turns that into a failed test, never a pass."""
    p = CONTRACTS["C2-same-tier"].with_deadlines({"a": 7, "b": 7, "c": 27})
    with pytest.raises(RuntimeError, match="timeout 1 ms"):
        find_tier_schedule(p, "miss", timeout_ms=1)
