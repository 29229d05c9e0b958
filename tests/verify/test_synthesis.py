"""Synthesized parameters satisfy the clauses; the next step past them does not."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings

from rvguard.contract import Contract, contract_from_mapping
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
    if r.value is None:  # no fixed point within DEADLINE_STEPS: none holds up to where the steps reached
        for d in (c.tenants[tenant].deadline, 10 * c.window):
            assert not arithmetic_deadline(with_deadline(c, tenant, d), tenant)
        return
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
    """By default (the closing bound) B = 6 (ρ_a = 0.99) needs 165 s (0.66 + ⌈996/4⌉·0.66, 166 windows'
    floors); B = 4 needs 0.66 + ⌈20/4⌉·0.66 = 3.96 s
    (five windows' floors: D > 3W); B = 2 needs 1.98 s; floor 1 is the largest for D = 1.82 s."""
    assert synthesize_floor(marquee).value == 1
    assert synthesize_deadline(marquee).value == pytest.approx(165.0)
    assert synthesize_deadline(with_floor(marquee, "assured", 4)).value == pytest.approx(3.96)
    assert synthesize_deadline(with_floor(marquee, "assured", 2)).value == pytest.approx(1.98)
    assert synthesize_slots(marquee).value == 18


def test_marquee_synthesis_under_the_backlog_assumption(marquee: Contract) -> None:
    """The former one-cohort numbers, now only with the opt-in assumption, and the message says so."""
    assume = VerifyOptions(backlog_assumption=True)
    assert synthesize_floor(marquee, options=assume).value == 4
    assert synthesize_deadline(marquee, options=assume).value == pytest.approx(1.98)
    assert synthesize_deadline(with_floor(marquee, "assured", 4), options=assume).value == pytest.approx(1.32)
    assert synthesize_slots(marquee, options=assume).value == 6
    assert "proven only under the backlog assumption" in synthesize_floor(marquee, options=assume).message


def test_bad_parameter_and_tenant_name_the_field(marquee: Contract) -> None:
    with pytest.raises(SpecError, match=r"tenants\.nobody"):
        synthesize(marquee, "floor", "nobody")
    with pytest.raises(SpecError, match=r"--synthesize"):
        synthesize(marquee, "window")
    with pytest.raises(SpecError, match=r"tenants\.opportunistic\.floor"):
        synthesize_deadline(marquee, "opportunistic")


MOVED = ("stability", "deadline")


def moved_hold(c: Contract, options: VerifyOptions, tenant: str | None = None) -> bool:
    """What `verify` reports on the moved fields: stability and every deadline (or ``tenant``'s)."""
    results = verify_contract(c, options=options)
    names = {f"deadline[{tenant}]"} if tenant else {r.name for r in results if r.name.split("[")[0] in MOVED}
    return all(r.holds for r in results if r.name in names)


def _shift(c: Contract, **changes: object) -> Contract:
    return c.model_copy(update=changes)


MODES = [
    pytest.param(credit, reserve, assume, id=f"{credit}-R{reserve}-{'assume' if assume else 'closing'}")
    for credit in ("count", "tokens")
    for reserve in (0, 1)
    for assume in (False, True)
]


def mode_contract(credit: str, reserve: int) -> Contract:
    """Two floored tiers on C = 4; with token credits, floors of 20 and 12 weighted tokens."""
    tokens = credit == "tokens"
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 4,
            "reserve": reserve,
            "credit": credit,
            "output_cap": 4,
            "token_weights": {"prompt": 1.0, "output": 4.0} if tokens else {"prompt": 1.0, "output": 1.0},
            "service": {"s_max": 0.25, "s_max_opp": 0.3},
            "tenants": {
                "gold": {"floor": 20.0 if tokens else 4, "deadline": 3.0, "tier": 0},
                "silver": {"floor": 12.0 if tokens else 2, "deadline": 4.0, "tier": 1},
                "best": {"floor": 0, "deadline": 9.0, "tier": 2},
            },
        }
    )


@pytest.mark.parametrize(("credit", "reserve", "assume"), MODES)
def test_synthesis_is_exact_in_every_credit_mode(credit: str, reserve: int, assume: bool) -> None:
    """Synthesise, then verify the result (holds) and one step past it (fails), with verify's options."""
    o = VerifyOptions(backlog_assumption=assume)
    c = mode_contract(credit, reserve)
    for tenant in ("gold", "silver"):
        d = synthesize_deadline(c, tenant, options=o).value
        assert d is not None
        assert moved_hold(with_deadline(c, tenant, d), o, tenant)
        assert not moved_hold(with_deadline(c, tenant, d - 1e-6), o, tenant)
    floor = synthesize_floor(c, "silver", options=o).value
    assert floor is not None
    assert moved_hold(with_floor(c, "silver", int(floor)), o)
    assert not moved_hold(with_floor(c, "silver", int(floor) + 1), o)
    slots = synthesize_slots(c, options=o).value
    assert slots is not None
    assert moved_hold(_shift(c, slots=slots), o)
    assert slots <= max(1, c.reserve) or not moved_hold(_shift(c, slots=slots - 1), o)
    r = synthesize(c, "reserve", options=o).value
    if r is not None:
        assert moved_hold(_shift(c, reserve=r), o)
        assert r == 0 or not moved_hold(_shift(c, reserve=r - 1), o)
