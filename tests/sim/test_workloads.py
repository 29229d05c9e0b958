"""Workloads: rates, burstiness, the tenant rule, and replay of the shared public traces."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from pathlib import Path

import pytest

from rvguard.contract import Contract, contract_from_mapping, load_contract
from rvguard.data import TRACES
from rvguard.errors import SpecError
from rvguard.io.public import FractionRule
from rvguard.sim.workloads import (
    Roles,
    ShareRule,
    bursty,
    floor_rate,
    merge_streams,
    poisson,
    replay,
    replay_shares,
    roles,
    split_rate,
)

from ._common import MARQUEE


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def test_poisson_rates_and_tenants() -> None:
    reqs = poisson(MARQUEE, random.Random(0), assured_rate=6.0, opp_rate=14.0, duration=200.0)
    assured = [r for r in reqs if r.tenant == "assured"]
    assert len(assured) / 200 == pytest.approx(6.0, rel=0.1)
    assert len(reqs) / 200 == pytest.approx(20.0, rel=0.1)
    assert [r.rid for r in reqs] == [f"r{i}" for i in range(len(reqs))]
    assert all(r.max_tokens == 16 for r in reqs)
    assert [r.t for r in reqs] == sorted(r.t for r in reqs)


def test_bursty_has_requested_cv() -> None:
    reqs = bursty(MARQUEE, random.Random(0), assured_rate=10.0, opp_rate=0.0, duration=2000.0, cv=3.0)
    gaps = _gaps([r.t for r in reqs])
    cv = statistics.pstdev(gaps) / statistics.mean(gaps)
    assert cv == pytest.approx(3.0, rel=0.15)
    assert len(reqs) / 2000 == pytest.approx(10.0, rel=0.15)
    with pytest.raises(SpecError, match="cv"):
        bursty(MARQUEE, random.Random(0), assured_rate=1.0, opp_rate=0.0, duration=1.0, cv=0.0)


def test_split_rate_gives_assured_its_floor_rate() -> None:
    assert split_rate(MARQUEE, 20.0) == (6.0, 14.0)
    assert split_rate(MARQUEE, 4.0) == (4.0, 0.0)


def test_output_tokens_capped() -> None:
    reqs = poisson(MARQUEE, random.Random(0), assured_rate=1.0, opp_rate=0.0, duration=10.0, tokens=500)
    assert {r.max_tokens for r in reqs} == {48}


@pytest.mark.parametrize(
    "name", ["azure_code_slice.csv", "azure_conv_slice.csv", "mooncake_conv_slice.jsonl"]
)
def test_replay_public_trace(name: str) -> None:
    path = TRACES / name
    reqs = replay(path, MARQUEE, rate=20.0, duration=30.0, seed=1)
    assert reqs and all(r.t < 30.0 for r in reqs)
    assert all(r.max_tokens is not None and r.max_tokens <= 48 for r in reqs)
    frac = sum(r.tenant == "assured" for r in reqs) / len(reqs)
    assert frac == pytest.approx(6.0 / 20.0, abs=0.1)


# --- the tenant rule: roles from the contract, whatever the tenants are called ---

SPECS = Path(__file__).resolve().parents[2] / "specs"


def _two_tenants() -> Contract:
    return load_contract(SPECS / "two_tenants.yaml")


def test_roles_floored_by_floor_unfloored_equally() -> None:
    r = roles(_two_tenants())
    assert r.assured == (("gold", 3 / 5), ("silver", 2 / 5))
    assert r.opportunistic == (("opportunistic", 1.0),)
    assert roles(MARQUEE) == Roles((("assured", 1.0),), (("opportunistic", 1.0),))
    assert floor_rate(_two_tenants()) == 5.0
    assert split_rate(_two_tenants(), 18.0) == (5.0, 13.0)


def test_roles_order_by_tier_then_contract_order() -> None:
    c = contract_from_mapping(
        {
            "window": 2.0,
            "slots": 4,
            "service": {"s_max": 0.66, "s_max_opp": 0.66, "lower": 0.2},
            "tenants": {
                "z": {"floor": 0, "deadline": 2.0, "tier": 3},
                "y": {"floor": 0, "deadline": 2.0, "tier": 2},
                "b": {"floor": 1, "deadline": 2.0, "tier": 1},
                "a": {"floor": 3, "deadline": 2.0, "tier": 1},
            },
        }
    )
    r = roles(c)
    assert r.assured == (("b", 0.25), ("a", 0.75))
    assert r.opportunistic == (("y", 0.5), ("z", 0.5))
    assert floor_rate(c) == 2.0


def test_poisson_on_named_tenants_offers_each_its_share() -> None:
    reqs = poisson(_two_tenants(), random.Random(0), assured_rate=5.0, opp_rate=13.0, duration=400.0)
    rate = {n: sum(r.tenant == n for r in reqs) / 400 for n in ("gold", "silver", "opportunistic")}
    assert rate == pytest.approx({"gold": 3.0, "silver": 2.0, "opportunistic": 13.0}, rel=0.1)


def test_marquee_streams_are_the_reference_two_streams() -> None:
    """The role rule on the marquee draws exactly the two streams it always drew (results unchanged)."""
    got = poisson(MARQUEE, random.Random(7), assured_rate=6.0, opp_rate=14.0, duration=30.0)
    rng = random.Random(7)
    streams = []
    for name, rate in (("assured", 6.0), ("opportunistic", 14.0)):
        times, t = [], rng.expovariate(rate)
        while t < 30.0:
            times.append(t)
            t += rng.expovariate(rate)
        streams.append((name, times))
    assert got == merge_streams(streams, MARQUEE)


def test_share_rule_is_fraction_rule_for_two_tenants() -> None:
    rule = ShareRule((("assured", 0.3), ("opportunistic", 0.7)), seed=5)
    old = FractionRule(fraction=0.3, seed=5)
    assert list(itertools.islice(rule.tenants(), 2000)) == list(itertools.islice(old.tenants(), 2000))
    assert replay_shares(MARQUEE, 20.0) == (("assured", 0.3), ("opportunistic", 0.7))


def test_replay_on_named_tenants() -> None:
    path = TRACES / "azure_conv_slice.csv"
    reqs = replay(path, _two_tenants(), rate=20.0, seed=1)
    share = {n: sum(r.tenant == n for r in reqs) / len(reqs) for n in ("gold", "silver", "opportunistic")}
    assert share == pytest.approx({"gold": 0.15, "silver": 0.10, "opportunistic": 0.75}, abs=0.05)
    assert all(r.deadline is None for r in reqs)  # the policy applies each tenant's: one replay, any D


@pytest.mark.parametrize("rows", [0, 1])
def test_replay_too_short_a_trace_is_a_spec_error(tmp_path: Path, rows: int) -> None:
    path = tmp_path / "short.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "2023-11-16 18:17:03.9799600,4808,10\n" * rows
    )
    with pytest.raises(SpecError, match="two arrivals"):
        replay(path, MARQUEE, rate=8.0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"assured_rate": math.inf}, "assured_rate"),
        ({"opp_rate": math.nan}, "opp_rate"),
        ({"opp_rate": -1.0}, "opp_rate"),
        ({"duration": math.inf}, "duration"),
        ({"duration": math.nan}, "duration"),
        ({"cv": math.nan}, "cv"),
        ({"cv": math.inf}, "cv"),
    ],
)
def test_non_finite_load_is_refused(kwargs: dict[str, float], field: str) -> None:
    load = {"assured_rate": 6.0, "opp_rate": 14.0, "duration": 1.0, **kwargs}
    with pytest.raises(SpecError) as err:
        bursty(MARQUEE, random.Random(0), **load)
    assert err.value.field == field
    if field != "cv":
        with pytest.raises(SpecError):
            poisson(MARQUEE, random.Random(0), **{k: v for k, v in load.items() if k != "cv"})


def test_a_role_without_a_tenant_is_refused() -> None:
    floored_only = _two_tenants().model_copy(
        update={"tenants": {n: t for n, t in _two_tenants().tenants.items() if t.floored}}
    )
    with pytest.raises(SpecError, match="no unfloored tenant"):
        poisson(floored_only, random.Random(0), assured_rate=1.0, opp_rate=1.0, duration=1.0)
    assert poisson(floored_only, random.Random(0), assured_rate=5.0, opp_rate=0.0, duration=2.0)
    with pytest.raises(SpecError, match="no unfloored tenant"):
        replay_shares(floored_only, 8.0)
    assert replay_shares(floored_only, 5.0) == (("gold", 0.6), ("silver", 0.4))


def test_floor_rate_with_token_credits_counts_requests() -> None:
    c = contract_from_mapping(
        {
            "window": 1.0,
            "slots": 4,
            "credit": "tokens",
            "token_weights": {"prompt": 0.0, "output": 1.0},
            "service": {"s_max": 0.66, "s_max_opp": 0.66, "lower": 0.2},
            "tenants": {
                "a": {"floor": 96, "deadline": 2.0, "tier": 0},
                "o": {"floor": 0, "deadline": 2.0, "tier": 1},
            },
        }
    )
    assert floor_rate(c) == 6.0  # 96 tokens a second / 16 tokens a request
    assert floor_rate(c, tokens=48) == 2.0
