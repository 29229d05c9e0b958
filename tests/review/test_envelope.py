"""The service envelope in review: services above their ceiling, services below L."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.contract import contract_from_mapping
from rvguard.review import recalibrated, review_events
from rvguard.review.envelope import round_down, round_up

from ._traces import contract, dropped, ordered, served


def _by_parameter(events, c):  # type: ignore[no-untyped-def]
    report, _ = review_events(events, c)
    return {f.parameter: f for f in report.findings}


def test_a_service_above_s_max_is_counted_with_its_cost_and_a_suggested_ceiling() -> None:
    c = contract()
    events = ordered(served("a", 0.0, 0.4), served("b", 0.1, 0.8), served("c", 0.2, 1.9, wait=0.3))
    f = _by_parameter(events, c)["service.s_max"]
    assert (f.occurrences, f.affected) == (2, 2)
    assert f.cost["late"] == 1  # c completes at 2.4 > its deadline 2.2
    assert f.cost["excess_slot_seconds"] == pytest.approx((0.8 - 0.5) + (1.9 - 0.5))
    assert (f.current, f.observed, f.suggested) == (0.5, pytest.approx(1.9), 1.9)
    assert f.examples == ("b", "c")


def test_each_ceiling_is_its_own_parameter() -> None:
    c = contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "service": {"s_max": 0.5, "s_max_opp": 0.6},
            "tenants": {
                "assured": {"floor": 2, "deadline": 2.0},
                "gold": {"floor": 1, "deadline": 2.0, "s_max": 0.3},
                "opp": {"floor": 0, "deadline": 2.0, "tier": 1},
            },
        }
    )
    events = ordered(
        served("a", 0.0, 0.55),  # assured: above 0.5
        served("g", 0.0, 0.35, tenant="gold"),  # gold: above its own 0.3
        served("o", 0.0, 0.55, tenant="opp"),  # opp: under 0.6
        served("p", 0.1, 0.61, tenant="opp"),  # opp: above 0.6
    )
    found = _by_parameter(events, c)
    assert sorted(found) == ["service.s_max", "service.s_max_opp", "tenants.gold.s_max"]
    assert [found[p].examples for p in sorted(found)] == [("a",), ("p",), ("g",)]


def test_a_service_exactly_at_the_ceiling_is_not_a_finding() -> None:
    report, _ = review_events(served("a", 0.0, 0.5), contract())
    assert report.holds and report.findings == ()


def test_a_service_below_l_makes_doomed_drops_suspect_and_counts_those_the_new_l_would_keep() -> None:
    c = contract(lower=0.2)
    events = ordered(
        served("fast", 0.0, 0.1, tenant="opp"),
        dropped("kept", 0.0, 1.85, deadline=2.0),  # 1.85 + 0.2 > 2 (doomed), 1.85 + 0.1 <= 2: unsound
        dropped("gone", 0.0, 1.95, deadline=2.0),  # 1.95 + 0.1 > 2 still: sound under the new L too
    )
    f = _by_parameter(events, c)["service.lower"]
    assert (f.occurrences, f.affected) == (1, 1)
    assert f.cost == {"doomed_drops": 2, "drops_unsound_under_suggested_L": 1}
    assert (f.current, f.suggested) == (0.2, 0.1)
    assert f.examples == ("kept",)


def test_a_per_token_l_is_scaled_by_the_smallest_ratio() -> None:
    c = contract(lower={"base": 0.1, "per_token": 0.01})
    # L(8 tokens) = 0.18, L(40) = 0.5: services 0.09 (ratio 0.5) and 0.45 (ratio 0.9)
    events = ordered(served("a", 0.0, 0.09, max_tokens=8), served("b", 0.0, 0.45, max_tokens=40))
    f = _by_parameter(events, c)["service.lower"]
    assert f.occurrences == 2 and f.suggested == pytest.approx(0.05)
    assert "scale service.lower by 0.5" in f.suggestion


def test_the_rounding_is_conservative() -> None:
    assert round_up(0.7091) == 0.71 and round_up(0.71) == 0.71
    assert (
        round_down(0.2347) == 0.234
        and round_down(0.234) == 0.234
        and 0.0004 * (1 - 2e-9) < round_down(0.0004) < 0.0004
    )


services = st.lists(
    st.tuples(st.booleans(), st.floats(0.01, 3.0, allow_nan=False), st.integers(1, 48)),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(services)
def test_counts_match_a_brute_force_count_and_the_suggestion_removes_the_finding(
    cases: list[tuple[bool, float, int]],
) -> None:
    c = contract(lower={"base": 0.05, "per_token": 0.005})
    events = ordered(
        *(
            served(f"r{i}", float(i), s, tenant="assured" if a else "opp", max_tokens=n)
            for i, (a, s, n) in enumerate(cases)
        )
    )
    found = _by_parameter(events, c)
    service = [(a, (i + s) - i, n) for i, (a, s, n) in enumerate(cases)]  # as the trace's times give it
    expected = {
        "service.s_max": sum(a and s > 0.5 for a, s, _ in service),
        "service.s_max_opp": sum(not a and s > 0.6 for a, s, _ in service),
        "service.lower": sum(s < 0.05 + 0.005 * min(n, 48) for _, s, n in service),
    }
    assert {p: f.occurrences for p, f in found.items() if p in expected} == {
        p: n for p, n in expected.items() if n
    }
    envelope = {"service.s_max", "service.s_max_opp", "service.lower"}
    again = _by_parameter(events, recalibrated(c, [f for p, f in found.items() if p in envelope]))
    assert not again.keys() & envelope
