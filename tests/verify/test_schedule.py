"""The schedule model: Z3's runs agree with the executable semantics; known counterexamples."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.errors import SpecError
from rvguard.verify.schedule import (
    ASSURED,
    OPPORTUNISTIC,
    ModelParams,
    Schedule,
    Ties,
    find_schedule,
    model_solver,
    simulate,
)

STRADDLE = ModelParams(slots=1, floor=1, window=3, s_max=3, s_opp=3, deadline=6, windows=2)


def replay(sched: Schedule, ties: Ties = "completions-first") -> Schedule:
    assert ties != "any"
    jobs = sched.jobs
    return simulate(
        sched.slots,
        [j.tenant for j in jobs],
        [j.arrival for j in jobs],
        [j.service for j in jobs],
        ties=ties,
        order=sched.delivery(),
    )


def test_straddling_burst_misses_the_reference_bound() -> None:
    sched = find_schedule(STRADDLE, "miss")
    assert sched is not None
    assert sched.max_sojourn() > STRADDLE.reference_bound
    assert replay(sched).jobs == sched.jobs


@pytest.mark.parametrize("ties", ["completions-first", "batch", "any"])
def test_no_miss_at_the_two_window_bound(ties: Ties) -> None:
    assert find_schedule(replace(STRADDLE, deadline=3 + 2 * 3, ties=ties), "miss") is None


def test_one_cohort_meets_the_reference_bound() -> None:
    p = ModelParams(slots=2, floor=3, window=20, s_max=3, s_opp=2, deadline=0, windows=1)
    assert find_schedule(replace(p, deadline=p.reference_bound), "miss") is None
    # completions-first reaches it exactly: an opportunistic job takes a slot freed as the cohort arrives
    exact = find_schedule(replace(p, deadline=p.reference_bound - 1), "miss")
    assert exact is not None and exact.max_sojourn() == p.reference_bound
    # batching the instant hides that tick: an opportunistic job blocks from one tick earlier at best
    batch = replace(p, ties="batch")
    assert find_schedule(replace(batch, deadline=p.reference_bound - 1), "miss") is None
    assert find_schedule(replace(batch, deadline=p.reference_bound - 2), "miss") is not None


@settings(max_examples=15, deadline=None)
@given(
    st.integers(1, 2),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from(["miss", "any"]),
    st.sampled_from(["completions-first", "batch"]),
)
def test_z3_runs_match_the_simulator(c: int, b: int, s: int, so: int, goal: str, ties: Ties) -> None:
    p = ModelParams(
        slots=c, floor=b, window=max(2, b * s // c), s_max=s, s_opp=so, deadline=so + s, windows=2, ties=ties
    )
    sched = find_schedule(p, goal)
    if sched is not None:
        assert replay(sched, ties).jobs == sched.jobs


# -- the encoding pins the schedule: given arrivals, services and delivery order, one run ------
@st.composite
def pinned_jobs(draw: st.DrawFn) -> tuple[int, int, list[str], list[int], list[int], list[int]]:
    """(slots, reserve, tenants, arrivals, services, order) laid out as the model's jobs: assured first."""
    slots = draw(st.integers(1, 2))
    n_a, n_o = draw(st.integers(0, 4)), draw(st.integers(0, 3))
    reserve = draw(st.integers(0, slots - 1 if n_o else slots))
    tenants = [ASSURED] * n_a + [OPPORTUNISTIC] * n_o
    arrivals = sorted(draw(st.lists(st.integers(0, 6), min_size=n_a, max_size=n_a)))
    arrivals += sorted(draw(st.lists(st.integers(0, 6), min_size=n_o, max_size=n_o)))
    services = draw(st.lists(st.integers(1, 3), min_size=n_a + n_o, max_size=n_a + n_o))
    keys = draw(st.permutations(range(n_a + n_o)))
    # same class: index order; across classes at one tick: any interleaving
    keys = sorted(keys[:n_a]) + sorted(keys[n_a:])
    order = sorted(range(n_a + n_o), key=lambda i: (arrivals[i], keys[i]))
    return slots, reserve, tenants, arrivals, services, order


def _pins(arrivals: list[int], services: list[int], order: list[int]) -> list[object]:
    import z3

    pins = [z3.Int(f"arrival_{i}") == a for i, a in enumerate(arrivals)]
    pins += [z3.Int(f"service_{i}") == s for i, s in enumerate(services)]
    pins += [z3.Int(f"sequence_{i}") == n for n, i in enumerate(order)]
    return pins


@settings(max_examples=60, deadline=None)
@given(pinned_jobs(), st.sampled_from(["completions-first", "batch"]))
def test_the_encoding_admits_exactly_the_simulated_run(
    case: tuple[int, int, list[str], list[int], list[int], list[int]], ties: Ties
) -> None:
    import z3

    slots, reserve, tenants, arrivals, services, order = case
    n_a = tenants.count(ASSURED)
    assert ties != "any"
    if not tenants:
        return
    expect = simulate(slots, tenants, arrivals, services, ties=ties, order=order, reserve=reserve)
    p = ModelParams(
        slots=slots, floor=max(n_a, 1), window=100, s_max=3, s_opp=3, deadline=0, windows=1,
        assured_jobs=n_a, opp_jobs=len(tenants) - n_a, ties=ties, reserve=reserve,
    )  # fmt: skip
    solver, v = model_solver(p, "any", extra=_pins(arrivals, services, order))
    solver.push()
    solver.add(z3.And([st == j.start for st, j in zip(v.start, expect.jobs, strict=True)]))
    assert solver.check() == z3.sat  # the simulated run is a run of the model
    solver.pop()
    solver.add(z3.Or([st != j.start for st, j in zip(v.start, expect.jobs, strict=True)]))
    assert solver.check() == z3.unsat  # and the only one
    if ties == "completions-first":  # the adversarial model contains both tie orders' runs
        other = simulate(slots, tenants, arrivals, services, ties="batch", order=order, reserve=reserve)
        loose, w = model_solver(replace(p, ties="any"), "any", extra=_pins(arrivals, services, order))
        for run in (expect, other):
            loose.push()
            loose.add(z3.And([st == j.start for st, j in zip(w.start, run.jobs, strict=True)]))
            assert loose.check() == z3.sat
            loose.pop()


def test_a_floor_arrival_takes_a_free_slot_beside_a_reserve_blocked_opportunistic_job() -> None:
    """C = 2, R = 1: one opportunistic job runs, another waits (RB), an assured job arriving at 1 takes the
    free slot at once. The encoding once ruled this run out (completions-first let a job pass an
    earlier arrival only on a freed slot or a same-tick delivery), so Z3 never saw such runs."""
    import z3

    tenants, arrivals, services = [ASSURED, OPPORTUNISTIC, OPPORTUNISTIC], [1, 0, 0], [1, 5, 1]
    sched = simulate(2, tenants, arrivals, services, reserve=1)
    assert [j.start for j in sched.jobs] == [1, 0, 5]
    p = ModelParams(
        slots=2, floor=1, window=10, s_max=1, s_opp=5, deadline=0, windows=1, opp_jobs=2, reserve=1
    )
    solver, v = model_solver(p, "any", extra=_pins(arrivals, services, list(sched.order)))
    assert solver.check() == z3.sat
    assert [solver.model().eval(x).as_long() for x in v.start] == [1, 0, 5]


def test_simulator_semantics_by_hand() -> None:
    # opp in flight holds the only slot; assured outranks the earlier opp arrival
    sched = simulate(1, [OPPORTUNISTIC, OPPORTUNISTIC, ASSURED], [0, 1, 2], [3, 1, 1])
    assert [j.start for j in sched.jobs] == [0, 4, 3]
    assert sched.sojourns == [3, 4, 2]
    # completions-first: the slot freed at 3 goes to the opp job queued since 1, not the assured arrival at 3
    tie = simulate(1, [OPPORTUNISTIC, OPPORTUNISTIC, ASSURED], [0, 1, 3], [3, 1, 1])
    assert [j.start for j in tie.jobs] == [0, 3, 4]
    batch = simulate(1, [OPPORTUNISTIC, OPPORTUNISTIC, ASSURED], [0, 1, 3], [3, 1, 1], ties="batch")
    assert [j.start for j in batch.jobs] == [0, 4, 3]
    # completions-first: same-tick arrivals take free slots in delivery order, whatever their class
    both = [OPPORTUNISTIC, ASSURED]
    assert [j.start for j in simulate(1, both, [0, 0], [2, 1], order=[0, 1]).jobs] == [0, 2]
    assert [j.start for j in simulate(1, both, [0, 0], [2, 1], order=[1, 0]).jobs] == [1, 0]
    assert [j.start for j in simulate(1, both, [0, 0], [2, 1], ties="batch", order=[0, 1]).jobs] == [1, 0]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(SpecError, match="services"):
        simulate(1, [ASSURED], [0], [0])
    with pytest.raises(SpecError, match="order"):
        simulate(1, [ASSURED, ASSURED], [0, 1], [1, 1], order=[1, 0])
    with pytest.raises(SpecError, match="ties"):
        simulate(1, [ASSURED], [0], [1], ties="any")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="ties"):
        ModelParams(slots=1, floor=1, window=1, s_max=1, s_opp=1, deadline=1, ties="never")  # type: ignore[arg-type]
