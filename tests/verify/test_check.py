"""verify_contract on the reference numbers, inconsistent envelopes and token credits."""

from __future__ import annotations

import subprocess
import sys

from rvguard.contract import Contract, contract_from_mapping
from rvguard.verify import verify_contract
from rvguard.verify.check import all_hold


def by_name(c: Contract) -> dict[str, object]:
    return {r.name: r for r in verify_contract(c)}


def test_marquee_is_outside_the_proven_region(marquee: Contract) -> None:
    results = verify_contract(marquee)
    assert not all_hold(results)
    dl = next(r for r in results if r.name == "deadline[assured]")
    assert not dl.holds
    assert dl.message.startswith(
        "deadline 1.82 s < s_max_opp + ⌈6/4⌉·s_max = 1.98 s: raise the deadline to 1.98 s"
    )
    assert "lower the floor to 4" in dl.message and "≥ 1.32 s" in dl.message
    assert set(dl.fields) >= {"tenants.assured.deadline", "tenants.assured.floor", "slots", "service.s_max"}
    assert dl.counterexample is not None and dl.counterexample["waves.assured"] == 2
    assert all(r.holds for r in results if r.name != "deadline[assured]")


def test_corner_b4_is_inside(marquee: Contract) -> None:
    tenants = dict(marquee.tenants)
    tenants["assured"] = tenants["assured"].model_copy(update={"floor": 4, "deadline": 1.32})
    assert all_hold(verify_contract(marquee.model_copy(update={"tenants": tenants})))
    tenants["assured"] = tenants["assured"].model_copy(update={"deadline": 1.31})
    assert not all_hold(verify_contract(marquee.model_copy(update={"tenants": tenants})))


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
