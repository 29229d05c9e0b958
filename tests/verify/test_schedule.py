"""The schedule model: Z3's runs agree with the executable semantics; known counterexamples."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.verify.schedule import ASSURED, OPPORTUNISTIC, ModelParams, find_schedule, simulate

STRADDLE = ModelParams(slots=1, floor=1, window=3, s_max=3, s_opp=3, deadline=6, windows=2)


def replay(sched):  # type: ignore[no-untyped-def]
    jobs = sched.jobs
    return simulate(
        sched.slots, [j.tenant for j in jobs], [j.arrival for j in jobs], [j.service for j in jobs]
    )


def test_straddling_burst_misses_the_reference_bound() -> None:
    sched = find_schedule(STRADDLE, "miss")
    assert sched is not None
    assert sched.max_sojourn() > STRADDLE.reference_bound
    assert replay(sched).jobs == sched.jobs


def test_no_miss_at_the_two_window_bound() -> None:
    assert find_schedule(replace(STRADDLE, deadline=3 + 2 * 3), "miss") is None


def test_one_cohort_meets_the_reference_bound() -> None:
    p = ModelParams(slots=2, floor=3, window=20, s_max=3, s_opp=2, deadline=0, windows=1)
    assert find_schedule(replace(p, deadline=p.reference_bound), "miss") is None
    assert find_schedule(replace(p, deadline=p.reference_bound - 2), "miss") is not None


@settings(max_examples=15, deadline=None)
@given(
    st.integers(1, 2),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from(["miss", "any"]),
)
def test_z3_runs_match_the_simulator(c: int, b: int, s: int, so: int, goal: str) -> None:
    p = ModelParams(
        slots=c, floor=b, window=max(2, b * s // c), s_max=s, s_opp=so, deadline=so + s, windows=2
    )
    sched = find_schedule(p, goal)
    if sched is not None:
        assert replay(sched).jobs == sched.jobs


def test_simulator_semantics_by_hand() -> None:
    # opp in flight holds the only slot; assured outranks the earlier opp arrival
    sched = simulate(1, [OPPORTUNISTIC, OPPORTUNISTIC, ASSURED], [0, 1, 2], [3, 1, 1])
    assert [j.start for j in sched.jobs] == [0, 4, 3]
    assert sched.sojourns == [3, 4, 2]
    with pytest.raises(ValueError, match="services"):
        simulate(1, [ASSURED], [0], [0])
