"""server-priority and rate-limit: the native baselines the study compares the guard with, in shape."""

from __future__ import annotations

from rvguard.sim.experiments_baselines import SERVER_DEADLINES, rate_limit, server_priority

from ._common import MARQUEE


def test_server_priority_against_the_guard() -> None:
    result = server_priority(MARQUEE, reps=2, seed=3)
    by = {(c.params["deadline"], c.params["arm"]): c for c in result.conditions}
    assert {d for d, _ in by} == set(SERVER_DEADLINES)
    for d in SERVER_DEADLINES:
        assert by[d, "guard"].assured_miss == 0.0
        # server priority is the guard's dispatch rule without its reservation: never better than it
        assert (by[d, "server-priority"].assured_miss or 0.0) >= (by[d, "guard"].assured_miss or 0.0)
        assert (by[d, "fifo"].assured_miss or 0.0) > 0.5  # admit-all FIFO drowns


def test_rate_limit_per_class_matches_flat_crowds_out() -> None:
    result = rate_limit(MARQUEE, reps=2, seed=3)
    by = {c.params["arm"]: c for c in result.conditions}
    assert by["guard"].assured_miss == 0.0 == by["rate-limit-class"].assured_miss
    assert by["rate-limit-class"].offered_unmet == 0.0
    flat = by["rate-limit-flat"]
    assert (flat.offered_unmet or 0.0) > 0.3  # assured crowded out at admission, not late
    assert flat.assured_miss == 0.0 and flat.af_violations > 0
