"""Each closed-form obligation: Z3's verdict equals plain arithmetic written here."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.contract import Contract, CreditMode, ExcessPolicy, contract_from_mapping
from rvguard.verify._z3 import load_z3
from rvguard.verify.encoding import Encoding
from rvguard.verify.obligations import (
    decide,
    encode_credit_bound,
    encode_deadline,
    encode_dr_soundness,
    encode_service_envelope,
    encode_stability,
)
from tests.verify._strategies import contracts, exact

# derandomized: a rare drawn contract (token credits, several tiers) has kept Z3 busy for minutes on a
# loaded machine; the same 40 examples each run keep the suite's time bounded (the search over
# contracts is tests/verify/test_tier_search.py's)
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


def ceiling(c: Contract, name: str) -> Fraction:
    t = c.tenants[name]
    if not t.floored:
        return exact(c.service.opp_ceiling)
    return exact(c.service.s_max if t.s_max is None else t.s_max)


def requests(c: Contract, name: str) -> int:
    floor = exact(c.tenants[name].floor)
    if c.credit is CreditMode.COUNT:
        return int(floor)
    w = exact(c.token_weights.prompt) + exact(c.token_weights.output) * min(1, c.output_cap)
    return math.floor(floor / w)


def arithmetic_stability(c: Contract) -> bool:
    demand = sum(requests(c, n) * ceiling(c, n) for n in c.floored_tenants)
    return demand <= c.slots * exact(c.window)


def spans(length: Fraction, window: Fraction) -> int:
    """Windows a half-open interval of ``length`` meets (proofs/README.md §2): ⌈L/W⌉ + 1, none if L ≤ 0."""
    return math.ceil(length / window) + 1 if length > 0 else 0


def ahead(c: Contract, name: str, wave: Fraction, *, assume: bool = False) -> int:
    """N_i: floor requests at or ahead of one of ``name``'s (closing bound, or the backlog assumption)."""
    mine, w = c.tenants[name].tier, exact(c.window)
    x = max(exact(c.tenants[name].deadline) - wave, Fraction(0))
    n = 0
    for j, t in c.floored_tenants.items():
        if t.tier > mine:
            continue
        higher = t.tier < mine
        if assume:
            n += requests(c, j) * (1 + (spans(x, w) if higher else 0))
        else:
            n += requests(c, j) * spans(exact(t.deadline) + (x if higher else 0), w)
    return n


def arithmetic_deadline(c: Contract, name: str, *, assume: bool = False) -> bool:
    mine = c.tenants[name].tier
    if any(not t.floored and t.tier < mine for t in c.tenants.values()):
        return False  # unfloored work dispatched ahead of this floor: nothing bounds how much
    wave = max(ceiling(c, j) for j, t in c.floored_tenants.items() if t.tier <= mine)
    n = ahead(c, name, wave, assume=assume)
    blockers = [exact(c.service.opp_ceiling)]
    for other, t in c.tenants.items():
        if t.tier > mine or (t.floored and c.excess is ExcessPolicy.DEMOTE):
            blockers.append(ceiling(c, other))
    if c.reserve > 0:
        return exact(c.tenants[name].deadline) >= reserved_least(c, name, n, max(blockers), wave)
    waves = -(-n // c.slots)
    return exact(c.tenants[name].deadline) >= max(blockers) + waves * wave


def reserved_least(c: Contract, name: str, n: int, block: Fraction, wave: Fraction) -> Fraction:
    """ŝ + the first x where R·n(x − b_f) + (C − R)·n(x − b) reaches N (proofs/README.md §2a), by scanning."""
    mine = c.tenants[name].tier
    lower = [ceiling(c, j) for j, t in c.floored_tenants.items() if t.tier > mine]
    b_f, r = (max(lower) if lower else Fraction(0)), c.reserve

    def runs(y: Fraction) -> int:
        return math.floor(y / wave) + 1 if y >= 0 else 0

    grid = sorted({o + k * wave for o in (b_f, max(block, b_f)) for k in range(n + 1)})
    x = next(x for x in grid if r * runs(x - b_f) + (c.slots - r) * runs(x - max(block, b_f)) >= n)
    return x + wave


def holds(c: Contract, clause: str, tenant: str = "") -> bool:
    enc = Encoding(load_z3(), c)
    goal = {
        "stability": lambda: encode_stability(enc),
        "deadline": lambda: encode_deadline(enc, tenant),
        "envelope": lambda: encode_service_envelope(enc),
        "dr": lambda: encode_dr_soundness(enc),
        "credit": lambda: encode_credit_bound(enc),
    }[clause]()
    return decide(enc, goal).holds


@SETTINGS
@given(contracts())
def test_stability_agrees_with_arithmetic(c: Contract) -> None:
    assert holds(c, "stability") == arithmetic_stability(c)


@SETTINGS
@given(contracts())
def test_deadline_agrees_with_arithmetic(c: Contract) -> None:
    for name in c.floored_tenants:
        assert holds(c, "deadline", name) == arithmetic_deadline(c, name), name


@SETTINGS
@given(contracts(opp_tiers=(0, 1, 2, 3)))
def test_issue_10_deadline_agrees_with_arithmetic_wherever_unfloored_work_ranks(c: Contract) -> None:
    """Unfloored work at a smaller tier fails a floor's deadline; at its tier or behind, it does not."""
    for name in c.floored_tenants:
        assert holds(c, "deadline", name) == arithmetic_deadline(c, name), name


@SETTINGS
@given(contracts(credit="tokens", max_tenants=2))
def test_token_weighted_obligations_agree_with_arithmetic(c: Contract) -> None:
    w_min = exact(c.token_weights.prompt) + exact(c.token_weights.output)
    assert holds(c, "credit") == (w_min > 0)
    if w_min > 0:
        assert holds(c, "stability") == arithmetic_stability(c)
        for name in c.floored_tenants:
            assert holds(c, "deadline", name) == arithmetic_deadline(c, name)


def envelope_contract(s_max: float, base: float, per: float, cap: int, lower: float) -> Contract:
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 4,
            "output_cap": cap,
            "service": {"s_max": s_max, "lower": lower, "upper": {"base": base, "per_token": per}},
            "tenants": {"a": {"floor": 2, "deadline": 3.0}},
        }
    )


@SETTINGS
@given(
    st.integers(20, 120),
    st.integers(0, 40),
    st.integers(0, 30),
    st.integers(1, 64),
    st.integers(0, 20),
)
def test_envelope_and_dr_agree_with_arithmetic(s: int, base: int, per: int, cap: int, low: int) -> None:
    if low > base:
        low = base
    c = envelope_contract(s / 100, base / 100, per / 1000, cap, low / 100)
    top = Fraction(base, 100) + Fraction(per, 1000) * cap
    assert holds(c, "envelope") == (top <= Fraction(s, 100))
    assert holds(c, "dr") == (Fraction(low, 100) <= Fraction(s, 100))


def test_core_names_the_conflicting_fields() -> None:
    c = envelope_contract(0.66, 0.183, 0.0149, 48, 0.1)
    enc = Encoding(load_z3(), c)
    d = decide(enc, encode_service_envelope(enc))
    assert not d.holds
    assert {"service.s_max", "service.upper.base", "service.upper.per_token", "output_cap"} <= set(d.fields)
    assert d.counterexample is not None and 0 <= d.counterexample["output_tokens"] <= 48
