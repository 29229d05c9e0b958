"""Rationed relief's planner (issue 24): the fewest preempted, never floor work; restores within the room.

The oracles here are brute force over the candidates' subsets and prefix sums written out, not the
planner's own arithmetic.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.enforce.eviction import Candidate
from rvguard.enforce.rationing import InFlight, ReliefConfig, preempt_fewest, restore_allowance
from rvguard.errors import SpecError

_cands = st.lists(
    st.builds(
        Candidate,
        rid=st.sampled_from([f"r{i}" for i in range(12)]),
        prompt_tokens=st.integers(0, 400),
        generated=st.integers(0, 400),
        protected=st.booleans(),
    ),
    max_size=8,
    unique_by=lambda c: c.rid,
)
_fraction = st.floats(0.0, 1.0, allow_nan=False)


def _fewest_by_brute_force(states: list[int], need: float) -> int | None:
    """The smallest number of states whose sum reaches ``need`` (None: not even all of them)."""
    for k in range(len(states) + 1):
        if any(sum(c) >= need for c in itertools.combinations(states, k)):
            return k
    return None


@settings(max_examples=300, deadline=None)
@given(_cands, _fraction, _fraction, st.integers(1, 5000), st.integers(0, 2000))
def test_preempts_the_fewest_that_restore_the_floor_and_never_floor_work(
    cands: list[Candidate], headroom: float, floor: float, capacity: int, in_flight: int
) -> None:
    plan = preempt_fewest(cands, headroom=headroom, floor=floor, capacity=capacity, in_flight=in_flight)
    by_rid = {c.rid: c for c in cands}
    assert len(set(plan)) == len(plan)
    assert all(rid in by_rid and not by_rid[rid].protected for rid in plan)  # PR: never floor work
    need = (floor - headroom) * capacity - in_flight  # tokens the floor lacks, relief in flight counted
    open_states = [c.prompt_tokens + c.generated for c in cands if not c.protected]
    fewest = _fewest_by_brute_force(open_states, need)
    if fewest is None:  # out of reach: everything that may be taken is
        assert sorted(plan) == sorted(c.rid for c in cands if not c.protected)
    else:
        assert len(plan) == fewest
        assert sum(by_rid[r].prompt_tokens + by_rid[r].generated for r in plan) >= need


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(1, 600), max_size=10),
    _fraction,
    _fraction,
    st.integers(1, 5000),
    st.integers(0, 3000),
)
def test_restores_no_more_than_the_room_allows_and_no_less(
    sizes: list[int], headroom: float, level: float, capacity: int, committed: int
) -> None:
    n = restore_allowance(sizes, headroom=headroom, level=level, capacity=capacity, committed=committed)
    room = (headroom - level) * capacity - committed
    assert 0 <= n <= len(sizes)
    assert n == 0 or sum(sizes[:n]) <= room  # the restored fit
    assert n == len(sizes) or sum(sizes[: n + 1]) > room  # and the next one would not (no skipping)


def test_the_largest_go_first_and_ties_by_rid() -> None:
    cands = [
        Candidate("b", 100, 0),
        Candidate("a", 100, 0),
        Candidate("c", 50, 300),
        Candidate("f", 900, 0, True),
    ]
    # 0.1 of 1000 tokens short: the one largest open request (c, 350) covers it; f is floor work
    assert preempt_fewest(cands, headroom=0.05, floor=0.15, capacity=1000) == ("c",)
    assert preempt_fewest(cands, headroom=0.0, floor=0.4, capacity=1000) == ("c", "a")  # 450 >= 400
    assert preempt_fewest(cands, headroom=0.0, floor=0.5, capacity=1000) == ("c", "a", "b")
    assert preempt_fewest(cands, headroom=0.2, floor=0.15, capacity=1000) == ()  # above the floor
    # relief in flight already covers the shortfall: nothing more
    assert preempt_fewest(cands, headroom=0.05, floor=0.15, capacity=1000, in_flight=100) == ()


def test_in_flight_relief_lands_once_a_later_sample_measured_it() -> None:
    stops = InFlight()
    stops.add("a", "kv_cache", 300, by=5.0)
    stops.add("b", "kv_cache", 200, by=6.0)
    assert stops.tokens == 500
    stops.land(lambda resource: 5.5)
    assert stops.tokens == 200
    stops.land(lambda resource: 6.0)  # a sample at the stop's own time has not measured it
    assert stops.tokens == 200
    stops.land(lambda resource: 6.5)
    assert stops.tokens == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"capacity": 0}, "relief.capacity"),
        ({"capacity": True}, "relief.capacity"),
        ({"capacity": 10, "hold_bound": 0.0}, "relief.hold_bound"),
        ({"capacity": 10, "hold_bound": math.inf}, "relief.hold_bound"),
    ],
)
def test_the_config_is_checked_at_construction(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError) as err:
        ReliefConfig(**kwargs)  # type: ignore[arg-type]
    assert err.value.field == field
