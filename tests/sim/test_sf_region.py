"""SF inside the verified region: guarded runs meet every entitled deadline where Z3 accepts the contract.

The region is what `verify_contract` accepts by default: A4, the closing
deadline bound D ≥ s_opp + ⌈B·(⌈D/W⌉ + 1)/C⌉·s_max (every window a
request's deadline reaches can hold a floor ahead of it; proofs/README.md
§2), the envelope and DR.

The simulated backend's services are not bounded by construction (lognormal
noise, prefill stalls), so the contracts take s_max = s_max_opp = 1.0 s,
above the model's ceiling for 16-token outputs (≈ 0.65 s at p99.9 under a
flood, and the mean-one noise would need a ≈ 6σ draw to reach 1 s). Each run
also checks that the envelope held — a run that left it would say nothing
about SF — so the test fails loudly rather than passing vacuously.
"""

from __future__ import annotations

import random

import pytest

from rvguard.contract import Contract, contract_from_mapping
from rvguard.sim.run import run_once
from rvguard.sim.workloads import bursty, poisson

S_MAX = 1.0


def _contract(slots: int, window: float, floor: int, deadline: float) -> Contract:
    return contract_from_mapping(
        {
            "window": window,
            "slots": slots,
            "output_cap": 48,
            "service": {"s_max": S_MAX, "s_max_opp": S_MAX, "lower": 0.15},
            "tenants": {
                "assured": {"floor": floor, "deadline": deadline, "tier": 0},
                "opportunistic": {"floor": 0, "deadline": deadline, "tier": 1},
            },
        }
    )


# (C, W, B, D): each at the smallest deadline the closing bound accepts, ρ_a = B·s_max/(C·W) < 1
# (at ρ_a = 1 no deadline is proven: each window adds a window of work to the bound)
REGION = [
    (4, 2.0, 4, 4.0),  # ρ_a = 0.5: 1 + ⌈4·3/4⌉·1 = 4 (windows met by (t − 4, t]: 3)
    (4, 1.0, 2, 3.0),  # ρ_a = 0.5: 1 + ⌈2·4/4⌉·1 = 3
    (2, 2.0, 2, 4.0),  # ρ_a = 0.5, two slots: 1 + ⌈2·3/2⌉·1 = 4
    (4, 1.0, 3, 7.0),  # ρ_a = 0.75: 1 + ⌈3·8/4⌉·1 = 7
]


@pytest.fixture(scope="module")
def verify():  # type: ignore[no-untyped-def]
    pytest.importorskip("z3")
    from rvguard.verify.encoding import VerifyOptions
    from rvguard.verify.preconditions import all_hold, verify_contract

    def accepts(c: Contract) -> bool:
        return all_hold(verify_contract(c, options=VerifyOptions()))

    return accepts


@pytest.mark.parametrize(("slots", "window", "floor", "deadline"), REGION)
def test_guarded_runs_satisfy_sf_inside_the_region(verify, slots, window, floor, deadline) -> None:  # type: ignore[no-untyped-def]
    contract = _contract(slots, window, floor, deadline)
    assert verify(contract), "the contract must lie inside the verified region"
    # just below the closing bound the same contract is outside it: the region is not vacuous
    assert not verify(_contract(slots, window, floor, deadline - 0.01))
    floor_rate = floor / window
    for seed in range(3):
        rng = random.Random(f"sf-region:{seed}")
        streams = [
            poisson(contract, rng, assured_rate=2 * floor_rate, opp_rate=14.0, duration=20.0),
            bursty(contract, rng, assured_rate=2 * floor_rate, opp_rate=14.0, duration=20.0, cv=3.0),
        ]
        for arrivals in streams:
            out = run_once(contract, arrivals, mode="guarded", learner="random", seed=seed)
            m = out.metrics
            assert m.service_assured.above_ceiling == 0 and m.service_opportunistic.above_ceiling == 0
            assert m.entitled > 0
            bad = [v for v in out.violations if v.property in ("SF", "AF", "DR", "WF")]
            assert not bad, bad[:3]
            assert m.entitled_attained == m.entitled


def test_outside_the_region_sf_can_fail(verify) -> None:  # type: ignore[no-untyped-def]
    """Control: a deadline far below the bound (rejected by verify) does miss in the same setting."""
    contract = _contract(4, 1.0, 4, 0.5)
    assert not verify(contract)
    arrivals = poisson(contract, random.Random(0), assured_rate=8.0, opp_rate=14.0, duration=20.0)
    out = run_once(contract, arrivals, mode="guarded", learner="admit-all", seed=0)
    assert any(v.property == "SF" for v in out.violations)
