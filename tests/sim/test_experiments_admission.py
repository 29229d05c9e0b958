"""demote-vs-reject and token-credits: the excess regulator and the credit meter, in shape."""

from __future__ import annotations

import pytest

from rvguard.errors import SpecError
from rvguard.sim.experiments_admission import (
    DEADLINE_FACTORS,
    LARGE_FRACTION,
    demote_vs_reject,
    token_credits,
)
from rvguard.sim.experiments_replay import REPLAY_CONTRACT, traces_dir

from ._common import MARQUEE


def test_demote_recovers_excess_at_a_loose_deadline() -> None:
    try:
        traces_dir()
    except SpecError:
        pytest.skip("public trace slices not available")
    result = demote_vs_reject(REPLAY_CONTRACT, reps=1, seed=0, duration=100.0)
    by = {(c.params["trace"], c.params["factor"], c.params["excess"]): c for c in result.conditions}
    assert {f for _, f, _ in by} == set(DEADLINE_FACTORS)
    loose = max(DEADLINE_FACTORS)
    for trace in ("azure_conv", "mooncake"):
        reject, demote = by[trace, loose, "reject"], by[trace, loose, "demote"]
        assert reject.assured_miss == 0.0
        assert (demote.offered_unmet or 0.0) < 0.5 * (reject.offered_unmet or 1.0)
        # demoted excess never outranks the floor: attainment stays at or below reject's
        tight = min(DEADLINE_FACTORS)
        assert (by[trace, tight, "demote"].floor_attainment or 0.0) <= (
            by[trace, tight, "reject"].floor_attainment or 0.0
        )


def test_token_credits_trade_af_for_sf() -> None:
    result = token_credits(MARQUEE, reps=2, seed=1)
    by = {c.params["credit"]: c for c in result.conditions}
    count, tokens = by["count"], by["tokens"]
    # the count meter admits the large (floor-entitled by count AF), which hold the slots: misses
    assert count.to_dict()["rejected"] == 0 and (count.assured_miss or 0.0) > 0.4
    # the token meter sheds them as cost excess: what it admits meets, at an offered-basis cost
    assert tokens.assured_miss == 0.0
    assert (tokens.offered_unmet or 0.0) >= LARGE_FRACTION - 0.1
