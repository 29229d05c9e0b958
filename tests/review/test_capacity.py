"""Capacity below B/W in review: windows whose measured capacity fell below Σ B."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.review import recalibrated, review_events

from ._traces import contract, ordered, served


def _capacity(events, c):  # type: ignore[no-untyped-def]
    report, _ = review_events(events, c)
    return [f for f in report.findings if f.parameter.endswith(".floor")]


def test_a_window_below_the_floors_is_found_and_the_floor_scaled_to_the_worst_window() -> None:
    c = contract(s_max=2.0, s_max_opp=2.0)  # C = 2, W = 1, assured floor 2
    events = ordered(
        served("a0", 0.0, 0.9),
        served("a1", 0.0, 0.9),  # window 0: 2 slots / 0.9 s = 2.2 per window: enough
        served("b0", 1.0, 1.5),
        served("b1", 1.0, 1.5),  # both end at 2.5, in window 2: 2 / 1.5 = 1.33 < 2
        served("c0", 2.0, 0.6, wait=0.5),  # arrives in window 2, ends at 3.1: not served in it
    )
    (f,) = _capacity(events, c)
    assert f.parameter == "tenants.assured.floor"
    assert (f.occurrences, f.affected) == (1, 1)
    assert f.examples == ("c0",)
    assert f.cost == {"late": 0, "windows": 1}
    assert abs(f.observed - 2 / 1.5) < 1e-12
    assert f.suggested == 1.0 and f.recalibrate == {"tenants.assured.floor": 1.0}


def test_enough_capacity_is_no_finding_even_when_requests_cross_a_window_edge() -> None:
    c = contract(s_max=2.0)
    events = ordered(served("a", 0.8, 0.5), served("b", 0.9, 0.5))  # end in window 1: 2 / 0.5 = 4
    assert _capacity(events, c) == []


def test_a_floor_that_would_fall_to_zero_is_not_suggested() -> None:
    c = contract(s_max=5.0, s_max_opp=5.0)
    (f,) = _capacity(served("a", 0.0, 4.0), c)  # 2 / 4 = 0.5 credits per window
    assert f.suggested is None and f.recalibrate == {} and "add slots" in f.suggestion


def _oracle_short_windows(cases: list[tuple[float, float]]) -> set[int]:
    """Windows whose completions' mean service gives 2 slots · 1 s / s̄ < 2, recomputed plainly."""
    ends: dict[int, list[float]] = {}
    for i, (wait, s) in enumerate(cases):
        ends.setdefault(math.floor(i * 0.5 + wait + s), []).append(s)
    return {k for k, ss in ends.items() if 2 / (sum(ss) / len(ss)) < 2}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.25]), st.sampled_from([0.25, 0.5, 1.25, 1.5])),
        min_size=1,
        max_size=20,
    )
)
def test_occurrences_match_a_plain_recount_and_the_suggested_floor_fits(
    cases: list[tuple[float, float]],
) -> None:
    c = contract(s_max=2.0, s_max_opp=2.0)
    events = ordered(*(served(f"r{i}", i * 0.5, s, wait=w) for i, (w, s) in enumerate(cases)))
    found = _capacity(events, c)
    short = _oracle_short_windows(cases)
    assert [f.occurrences for f in found] == ([len(short)] if short else [])
    if found and found[0].recalibrate:
        assert _capacity(events, recalibrated(c, found)) == []
