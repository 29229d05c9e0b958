"""verify_contract on the reference numbers, inconsistent envelopes and token credits."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from rvguard.contract import Contract, contract_from_mapping
from rvguard.sim.run import run_once
from rvguard.sim.workloads import poisson
from rvguard.verify import verify_contract
from rvguard.verify.encoding import VerifyOptions
from rvguard.verify.preconditions import all_hold
from rvguard.verify.synthesis import synthesize_deadline


def by_name(c: Contract) -> dict[str, object]:
    return {r.name: r for r in verify_contract(c)}


def test_marquee_is_outside_the_proven_region(marquee: Contract) -> None:
    results = verify_contract(marquee)
    assert not all_hold(results)
    dl = next(r for r in results if r.name == "deadline[assured]")
    assert not dl.holds
    assert dl.message.startswith("deadline 1.82 s < s_max_opp + ⌈18/4⌉·s_max [18 ahead: assured 6×3")
    assert "lower the floor to 1 (with floor 1 the smallest deadline is 1.32 s)" in dl.message
    assert set(dl.fields) >= {"tenants.assured.deadline", "tenants.assured.floor", "slots", "service.s_max"}
    assert dl.counterexample is not None and dl.counterexample["waves.assured"] == 5
    assert all(r.holds for r in results if r.name != "deadline[assured]")


def test_corner_b4_is_inside_only_under_the_backlog_assumption(marquee: Contract) -> None:
    """B = 4, D = 1.32: the former one-cohort corner; by default 3.96 s (five windows' floors)."""
    assume = VerifyOptions(backlog_assumption=True)
    tenants = dict(marquee.tenants)
    tenants["assured"] = tenants["assured"].model_copy(update={"floor": 4, "deadline": 1.32})
    assert all_hold(verify_contract(marquee.model_copy(update={"tenants": tenants}), options=assume))
    assert not all_hold(verify_contract(marquee.model_copy(update={"tenants": tenants})))
    tenants["assured"] = tenants["assured"].model_copy(update={"deadline": 1.31})
    assert not all_hold(verify_contract(marquee.model_copy(update={"tenants": tenants}), options=assume))
    tenants["assured"] = tenants["assured"].model_copy(update={"deadline": 3.96})
    assert all_hold(verify_contract(marquee.model_copy(update={"tenants": tenants})))


def test_envelope_from_the_cap_names_its_fields(two_tenants: Contract) -> None:
    # the shipped spec caps at 32 tokens, where U = 0.66 s = s_max; at 48 U exceeds the ceilings
    uncapped = two_tenants.model_copy(update={"output_cap": 48})
    env = next(r for r in verify_contract(uncapped) if r.name == "service_envelope")
    assert not env.holds
    assert "output_cap" in env.fields and "service.upper.per_token" in env.fields
    assert "lower output_cap to 32" in env.message


def test_dr_flags_a_lower_bound_above_a_ceiling() -> None:
    c = contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "output_cap": 40,
            "service": {"s_max": 0.5, "s_max_opp": 0.2, "lower": {"base": 0.1, "per_token": 0.01}},
            "tenants": {"a": {"floor": 1, "deadline": 2.0}, "o": {"floor": 0, "deadline": 2.0, "tier": 1}},
        }
    )
    dr = next(r for r in verify_contract(c) if r.name == "dr_soundness")
    assert not dr.holds
    assert "service.s_max_opp" in dr.fields and "service.lower.per_token" in dr.fields


def test_zero_token_weights_cannot_bound_requests() -> None:
    c = contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "credit": "tokens",
            "token_weights": {"prompt": 0.0, "output": 0.0},
            "service": {"s_max": 0.5},
            "tenants": {"a": {"floor": 100, "deadline": 2.0}},
        }
    )
    results = {r.name: r for r in verify_contract(c)}
    assert not results["credit_bound"].holds
    assert not results["stability"].holds and not results["deadline[a]"].holds
    assert "token_weights.output" in results["credit_bound"].fields


def test_import_rvguard_does_not_load_z3() -> None:
    code = "import sys, rvguard, rvguard.verify, rvguard.verify.cli; print('z3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_z3_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['z3'] = None\n"
        "from rvguard.contract import load_contract\n"
        "from rvguard.verify import verify_contract\n"
        "from rvguard.errors import MissingExtraError\n"
        "try:\n    verify_contract(load_contract('specs/marquee.yaml'))\n"
        "except MissingExtraError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "rvguard[smt]" in out.stdout and "z3-solver" in out.stdout


def issue_10_contract(*, gold_tier: int = 1, opp_tier: int = 0, opp_floor: int = 0) -> Contract:
    """Issue 10 item 10: C = 2, gold floor 1 tier 1 D = 2.0, opp floor 0 tier 0, both ceilings 0.5 s."""
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "service": {"s_max": 0.5, "s_max_opp": 0.5, "lower": 0.0},
            "tenants": {
                "gold": {"floor": 1, "deadline": 2.0, "tier": gold_tier},
                "opp": {"floor": opp_floor, "deadline": 2.0, "tier": opp_tier},
            },
        }
    )


def test_issue_10_unfloored_work_ranked_ahead_of_a_floor_fails_the_deadline() -> None:
    """Every obligation 'held' while the core ranks opp's surplus ahead of gold's floor."""
    results = by_name(issue_10_contract())
    dl = results["deadline[gold]"]
    assert not dl.holds  # type: ignore[attr-defined]
    cx = dl.counterexample  # type: ignore[attr-defined]
    assert cx["requests.unbounded.opp"] >= 0 and cx["bound.gold"] > 2.0  # with gold's own windows few suffice
    assert {"tenants.gold.tier", "tenants.opp.tier", "tenants.opp.floor"} <= set(dl.fields)  # type: ignore[attr-defined]
    message = dl.message  # type: ignore[attr-defined]
    assert "ranks ahead of gold's floor" in message
    assert "rank the floor first (give opp tier 1 or more" in message and "bound opp with a floor" in message
    assumed = {
        r.name: r
        for r in verify_contract(issue_10_contract(), options=VerifyOptions(backlog_assumption=True))
    }
    assert not assumed["deadline[gold]"].holds


@pytest.mark.parametrize(
    "fixed",
    [
        {"opp_tier": 1},  # the same tier: the core ranks floor before surplus within a tier
        {"opp_tier": 2},
        {"gold_tier": 0},
    ],
)
def test_issue_10_either_fix_makes_the_deadline_hold(fixed: dict[str, int]) -> None:
    assert all_hold(verify_contract(issue_10_contract(**fixed)))


def test_issue_10_a_floor_on_the_work_ahead_bounds_it_but_counts_its_windows() -> None:
    """opp floor 1 at tier 0 ahead of gold: its floor can arrive in 5 windows while gold waits
    ((t − 2, t + 1.5]) and gold's own in 3: 0.5 + ⌈8/2⌉·0.5 = 2.5 s > 2.0 s (the former bound said 1.0 s)."""
    dl = by_name(issue_10_contract(opp_floor=1))["deadline[gold]"]
    assert not dl.holds and "= 2.50 s" in dl.message  # type: ignore[attr-defined]


def test_issue_10_no_deadline_is_synthesised_while_unbounded_work_ranks_ahead() -> None:
    result = synthesize_deadline(issue_10_contract(), "gold")
    assert result.value is None and "ranks ahead" in result.message
    assert synthesize_deadline(issue_10_contract(opp_tier=1), "gold").value == 1.0


@pytest.mark.parametrize("fixed", [{}, {"opp_tier": 1}, {"gold_tier": 0}])
def test_issue_10_verify_agrees_with_the_simulator(fixed: dict[str, int]) -> None:
    """The guarded simulator misses gold's deadlines (every service within its ceiling) when verify fails.

    Gold is offered its floor rate, opp floods at 7/s (capacity C / s_max = 4/s), the learner admits all.
    """
    c = issue_10_contract(**fixed)
    missed = 0
    for seed in range(6):
        arrivals = poisson(c, random.Random(seed), assured_rate=1.0, opp_rate=7.0, duration=20.0)
        out = run_once(c, arrivals, learner="admit-all", seed=seed)
        m = out.metrics
        assert m.service_assured.above_ceiling + m.service_opportunistic.above_ceiling == 0
        missed += any(v.property == "SF" for v in out.violations)
    assert (missed == 6) == (not all_hold(verify_contract(c)))
    assert missed in (0, 6)
