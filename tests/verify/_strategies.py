"""Shared strategies for the verify tests: random contracts with exact decimal fields."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from rvguard.contract import Contract, contract_from_mapping


def cents(lo: int, hi: int) -> st.SearchStrategy[float]:
    """Decimal seconds with two places, so Fraction(repr(x)) is the intended value."""
    return st.integers(lo, hi).map(lambda n: n / 100)


def exact(x: float) -> Fraction:
    """The decimal a contract field was written as."""
    return Fraction(repr(x))


@st.composite
def contracts(
    draw: Any, *, credit: str = "count", max_tenants: int = 3, opp_tiers: tuple[int, ...] = (3,)
) -> Contract:
    """A valid contract with 1..max_tenants floored tenants (tiers 0..2) and one opportunistic
    tenant, whose tier is drawn from ``opp_tiers`` (3: behind every floor)."""
    n = draw(st.integers(1, max_tenants))
    s_max = draw(cents(10, 120))
    tenants: dict[str, Any] = {}
    for i in range(n):
        floor: float = draw(st.integers(1, 12)) if credit == "count" else draw(st.integers(1, 400))
        t: dict[str, Any] = {
            "floor": floor,
            "deadline": draw(cents(20, 900)),
            "tier": draw(st.integers(0, 2)),
        }
        if draw(st.booleans()):
            t["s_max"] = draw(cents(10, 120))
        tenants[f"t{i}"] = t
    tenants["opp"] = {"floor": 0, "deadline": 5.0, "tier": draw(st.sampled_from(opp_tiers))}
    data: dict[str, Any] = {
        "window": draw(cents(50, 400)),
        "slots": draw(st.integers(1, 8)),
        "output_cap": draw(st.integers(1, 64)),
        "excess": draw(st.sampled_from(["reject", "demote"])),
        "credit": credit,
        "service": {"s_max": s_max, "lower": draw(cents(0, 10))},
        "tenants": tenants,
    }
    if draw(st.booleans()):
        data["service"]["s_max_opp"] = draw(cents(10, 120))
    if credit == "tokens":
        data["token_weights"] = {"prompt": draw(cents(0, 200)), "output": draw(cents(0, 200))}
    return contract_from_mapping(data)
