"""Identity binding: forged, tampered, expired or missing credentials never reach a floor."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.clock import ManualClock
from rvguard.enforce.identity import Identity, IdentityBinder, sign_claim, verify_claim
from rvguard.errors import EnforcementError

from ._harness import make_contract

SECRET = b"s" * 32


def binder(now: float = 5.0, **kw: object) -> IdentityBinder:
    """A binder whose wall clock (Unix time for claim expiry) reads ``now``."""
    wall = ManualClock(now)
    return IdentityBinder(make_contract(), api_keys={"good": "assured"}, secret=SECRET, wall_clock=wall, **kw)  # type: ignore[arg-type]


def test_valid_credentials_bind_the_true_tenant() -> None:
    b = binder(9.99)
    assert b.bind(Identity(api_key="good")).tenant == "assured"
    claim = sign_claim("assured", 10.0, SECRET)
    got = b.bind(Identity(claim=claim))
    assert (got.tenant, got.authenticated, got.reason) == ("assured", True, "claim")


@pytest.mark.parametrize(
    ("identity", "why"),
    [
        (None, "no credential"),
        (Identity(), "no credential"),
        (Identity(api_key="guess"), "unknown api key"),
        (Identity(claim=sign_claim("assured", 10.0, b"x" * 32)), "signature"),  # forged
        (Identity(claim=sign_claim("assured", 5.0, SECRET)), "expired"),
        (Identity(claim=sign_claim("assured", 10.0, SECRET) + "A"), "signature"),  # tampered sig
        (Identity(claim="garbage"), "malformed"),
        (Identity(claim=sign_claim("root", 10.0, SECRET)), "unknown tenant"),
    ],
)
def test_bad_credentials_fall_to_the_unfloored_tier_or_reject(identity: Identity | None, why: str) -> None:
    lowest = binder(5.0).bind(identity)
    assert (lowest.tenant, lowest.authenticated) == ("opp", False)
    assert why in lowest.reason
    assert binder(5.0, unauthenticated="reject").bind(identity).tenant is None


def test_tampered_payload_is_refused() -> None:
    body, _, sig = sign_claim("opp", 10.0, SECRET).partition(".")
    forged_body = sign_claim("assured", 10.0, SECRET).partition(".")[0]
    with pytest.raises(EnforcementError, match="signature") as err:
        verify_claim(f"{forged_body}.{sig}", SECRET, 0.0)
    assert err.value.status_hint == 401
    assert verify_claim(f"{body}.{sig}", SECRET, 0.0) == "opp"


@settings(max_examples=200)
@given(st.text(max_size=120), st.floats(0, 1e6))
def test_no_arbitrary_token_reaches_a_floor(token: str, now: float) -> None:
    assert binder(now).bind(Identity(claim=token)).tenant == "opp"


def test_all_floored_contract_rejects_instead_of_flooring() -> None:
    from rvguard.contract import Contract

    c = Contract.model_validate(
        {"window": 1, "slots": 1, "service": {"s_max": 1}, "tenants": {"a": {"floor": 1, "deadline": 2}}}
    )
    assert IdentityBinder(c).bind(None).tenant is None


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="lacks"):
        IdentityBinder(make_contract(), api_keys={"k": "ghost"})
    with pytest.raises(ValueError, match="unauthenticated"):
        IdentityBinder(make_contract(), unauthenticated="allow")  # type: ignore[arg-type]


def test_issue_claim_expiry_is_unix_time_not_a_scheduling_clock() -> None:
    """Expiry is judged on the binder's wall clock (Unix time), injectable, and nothing else."""
    wall = ManualClock(1_800_000_000.0)
    b = IdentityBinder(make_contract(), secret=SECRET, wall_clock=wall)
    stale = sign_claim("assured", wall.now() - 3600, SECRET)
    fresh = sign_claim("assured", wall.now() + 3600, SECRET)
    assert b.bind(Identity(claim=stale)).tenant == "opp"
    assert "expired" in b.bind(Identity(claim=stale)).reason
    assert b.bind(Identity(claim=fresh)).tenant == "assured"
    wall.advance(3600)
    assert b.bind(Identity(claim=fresh)).tenant == "opp"


def test_default_wall_clock_is_time_time() -> None:
    b = IdentityBinder(make_contract(), secret=SECRET)
    assert b.bind(Identity(claim=sign_claim("assured", time.time() - 3600, SECRET))).tenant == "opp"
    assert b.bind(Identity(claim=sign_claim("assured", time.time() + 3600, SECRET))).tenant == "assured"
