"""Synthesized parameters satisfy the clauses; the next step past them does not."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings

from rvguard.contract import Contract
from rvguard.errors import SpecError
from rvguard.verify import verify_contract
from rvguard.verify.encoding import VerifyOptions
from rvguard.verify.synthesis import synthesize, synthesize_deadline, synthesize_floor, synthesize_slots
from tests.verify._strategies import contracts
from tests.verify.test_obligations import arithmetic_deadline, arithmetic_stability

SETTINGS = settings(max_examples=25, deadline=None)


def with_floor(c: Contract, tenant: str, floor: int) -> Contract:
    tenants = dict(c.tenants)
    tenants[tenant] = tenants[tenant].model_copy(update={"floor": floor})
    return c.model_copy(update={"tenants": tenants})


def with_deadline(c: Contract, tenant: str, deadline: float) -> Contract:
    tenants = dict(c.tenants)
    tenants[tenant] = tenants[tenant].model_copy(update={"deadline": deadline})
    return c.model_copy(update={"tenants": tenants})


def clauses_hold(c: Contract) -> bool:
    return arithmetic_stability(c) and all(arithmetic_deadline(c, n) for n in c.floored_tenants)


@SETTINGS
@given(contracts())
def test_floor_is_largest(c: Contract) -> None:
    tenant = sorted(c.floored_tenants)[0]
    r = synthesize_floor(c, tenant)
    if r.value is None:
        assert not clauses_hold(with_floor(c, tenant, 1))
        return
    assert clauses_hold(with_floor(c, tenant, int(r.value)))
    assert not clauses_hold(with_floor(c, tenant, int(r.value) + 1))


@SETTINGS
@given(contracts())
def test_deadline_is_smallest(c: Contract) -> None:
    tenant = sorted(c.floored_tenants)[0]
    r = synthesize_deadline(c, tenant)
    assert r.value is not None
    tenants = dict(c.tenants)
    exact = Fraction(r.value).limit_denominator(10**6)
    ok = c.model_copy(
        update={"tenants": {**tenants, tenant: tenants[tenant].model_copy(update={"deadline": float(exact)})}}
    )
    assert arithmetic_deadline(ok, tenant)
    below = float(exact) - 1e-6
    short = c.model_copy(
        update={"tenants": {**tenants, tenant: tenants[tenant].model_copy(update={"deadline": below})}}
    )
    assert not arithmetic_deadline(short, tenant)


@SETTINGS
@given(contracts())
def test_slots_is_smallest(c: Contract) -> None:
    r = synthesize_slots(c)
    if r.value is None:
        assert not clauses_hold(c.model_copy(update={"slots": 10_000}))
        return
    assert clauses_hold(c.model_copy(update={"slots": r.value}))
    if r.value > 1:
        assert not clauses_hold(c.model_copy(update={"slots": r.value - 1}))


def test_marquee_synthesis(marquee: Contract) -> None:
    assert synthesize_floor(marquee).value == 4
    assert synthesize_deadline(marquee).value == pytest.approx(1.98)
    assert synthesize_deadline(with_floor(marquee, "assured", 4)).value == pytest.approx(1.32)
    assert synthesize_slots(marquee).value == 6


def test_bad_parameter_and_tenant_name_the_field(marquee: Contract) -> None:
    with pytest.raises(SpecError, match=r"tenants\.nobody"):
        synthesize(marquee, "floor", "nobody")
    with pytest.raises(SpecError, match=r"--synthesize"):
        synthesize(marquee, "window")
    with pytest.raises(SpecError, match=r"tenants\.opportunistic\.floor"):
        synthesize_deadline(marquee, "opportunistic")


NO_ASSUMPTION = VerifyOptions(backlog_assumption=False)


def straddle_clauses_hold(c: Contract) -> bool:
    """What `verify --no-backlog-assumption` reports on B, D and C: stability, deadline[·], straddle[·]."""
    moved = [r for r in verify_contract(c, options=NO_ASSUMPTION) if r.name.split("[")[0] in MOVED]
    return all(r.holds for r in moved)


MOVED = ("stability", "deadline", "straddle")


@settings(max_examples=15, deadline=None)
@given(contracts())
def test_without_the_backlog_assumption_synthesis_meets_the_straddle_bound(c: Contract) -> None:
    """A synthesised value passes the obligations verify then reports; one step further does not."""
    tenant = sorted(c.floored_tenants)[0]
    floor = synthesize_floor(c, tenant, options=NO_ASSUMPTION).value
    if floor is not None:
        assert straddle_clauses_hold(with_floor(c, tenant, int(floor)))
        assert not straddle_clauses_hold(with_floor(c, tenant, int(floor) + 1))
    slots = synthesize_slots(c, options=NO_ASSUMPTION).value
    if slots is not None:
        assert straddle_clauses_hold(c.model_copy(update={"slots": slots}))
        if slots > 1:
            assert not straddle_clauses_hold(c.model_copy(update={"slots": slots - 1}))


def test_marquee_synthesis_without_the_backlog_assumption(marquee: Contract) -> None:
    """Floor 2 (D = 1.82 ≥ 0.66 + ⌈4/4⌉·0.66); deadline 2.64 (0.66 + ⌈12/4⌉·0.66); 12 slots."""
    assert synthesize_floor(marquee, options=NO_ASSUMPTION).value == 2
    assert synthesize_deadline(marquee, options=NO_ASSUMPTION).value == pytest.approx(2.64)
    assert synthesize_slots(marquee, options=NO_ASSUMPTION).value == 12
    assert "straddle" in synthesize_floor(marquee, options=NO_ASSUMPTION).message
