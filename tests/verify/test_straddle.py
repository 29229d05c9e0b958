"""The two-cohort deadline bound, checked when the backlog assumption is dropped."""

from __future__ import annotations

import io
from argparse import Namespace

import pytest

from rvguard.contract import Contract, contract_from_mapping
from rvguard.verify.cli import run
from rvguard.verify.encoding import VerifyOptions
from rvguard.verify.preconditions import verify_contract

NO_ASSUMPTION = VerifyOptions(backlog_assumption=False)


def straddle_case(deadline: float, floor: int = 4) -> Contract:
    # the enforcer's regression case test_issue_window_straddle: C=2, B=4, W=1, s=0.5, rho_a=1
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "service": {"s_max": 0.5, "s_max_opp": 0.5},
            "tenants": {
                "a": {"floor": floor, "deadline": deadline},
                "o": {"floor": 0, "deadline": 9, "tier": 1},
            },
        }
    )


def by_name(contract: Contract, options: VerifyOptions) -> dict[str, bool]:
    return {r.name: r.holds for r in verify_contract(contract, options=options)}


def test_the_published_bound_admits_the_straddle_counterexample() -> None:
    assert by_name(straddle_case(1.5), VerifyOptions())["deadline[a]"] is True
    assert "straddle[a]" not in by_name(straddle_case(1.5), VerifyOptions())


def test_the_two_cohort_bound_refuses_it_and_accepts_from_its_value() -> None:
    # 0.5 + ceil(2*4/2) * 0.5 = 2.5 s
    assert by_name(straddle_case(1.5), NO_ASSUMPTION)["straddle[a]"] is False
    assert by_name(straddle_case(2.49), NO_ASSUMPTION)["straddle[a]"] is False
    assert by_name(straddle_case(2.5), NO_ASSUMPTION)["straddle[a]"] is True


@pytest.mark.parametrize("flag", [False, True])
def test_cli_states_the_assumption_or_checks_the_bound(marquee_path: str, flag: bool) -> None:
    out = io.StringIO()
    holds = run(
        Namespace(spec=marquee_path, synthesize=None, tenant=None, json=False, no_backlog_assumption=flag),
        out=out,
    )
    assert holds is False
    text = out.getvalue()
    if flag:
        assert "straddle[assured]" in text
        assert "2.64 s" in text
    else:
        assert "note: the deadline bound assumes" in text
        assert "straddle[" not in text


@pytest.fixture
def marquee_path() -> str:
    from tests.conftest import SPECS

    return str(SPECS / "marquee.yaml")
