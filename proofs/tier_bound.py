"""The multi-tier closing deadline bound over the bounded multi-tier schedule model (proofs/README.md §2).

Claims, each checked with Z3 in `rvguard.verify.tiers` (integer ticks):

1. The issue's contract (C = 1, W = 4, hi tier 0 and lo tier 1, floor 1, s_max 2, s_opp 1): at the
   former bound D_lo = 9 a run misses; the worst lo sojourn within k windows of arrivals (k = 3, 4)
   is 10. The closing bound accepts no deadline of lo there (ρ_a = 1).
2. Five small contracts at the least deadlines `verify` accepts (every floored obligation holding
   together): no run misses under any same-instant order (``ties="any"``), the model has runs, and
   the worst sojourn of each tenant (completions-first) is reported beside its deadline.

Run: python proofs/tier_bound.py   (prints "proved (bounds …)" or a counterexample; exit 0/1)
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from fractions import Fraction

from rvguard.contract import Contract, contract_from_mapping
from rvguard.verify.preconditions import all_hold, verify_contract
from rvguard.verify.synthesis import deadline_bound, synthesize_deadline
from rvguard.verify.tiers import Floored, TierParams, find_tier_schedule

ISSUE = TierParams(slots=1, window=4, s_opp=1, tenants=(Floored("hi", 0, 1, 2), Floored("lo", 1, 1, 2)))
CONTRACTS = [
    TierParams(slots=1, window=8, s_opp=1, tenants=(Floored("hi", 0, 1, 2), Floored("lo", 1, 1, 2))),
    TierParams(slots=1, window=6, s_opp=2, tenants=(Floored("hi", 0, 1, 2), Floored("lo", 1, 1, 2))),
    TierParams(
        slots=1,
        window=6,
        s_opp=1,
        tenants=(Floored("a", 0, 1, 1), Floored("b", 1, 1, 1), Floored("c", 2, 1, 1, windows=2)),
    ),
    TierParams(
        slots=2,
        window=4,
        s_opp=1,
        tenants=(Floored("a", 0, 1, 1), Floored("b", 0, 1, 2), Floored("c", 1, 1, 1, windows=2)),
    ),
    TierParams(
        slots=2, window=3, s_opp=2, reserve=1, tenants=(Floored("hi", 0, 1, 2), Floored("lo", 1, 1, 2))
    ),
]


def contract(p: TierParams, deadlines: dict[str, Fraction]) -> Contract:
    """The model's contract: its floored tenants and an unfloored tenant below them all."""
    tenants: dict[str, object] = {
        t.name: {
            "floor": t.floor,
            "deadline": float(deadlines.get(t.name, 10**6)),
            "tier": t.tier,
            "s_max": t.s_max,
        }
        for t in p.tenants
    }
    tenants["opp"] = {"floor": 0, "deadline": 10.0**6, "tier": max(t.tier for t in p.tenants) + 1}
    return contract_from_mapping(
        {
            "window": float(p.window),
            "slots": p.slots,
            "reserve": p.reserve,
            "service": {"s_max": float(max(t.s_max for t in p.tenants)), "s_max_opp": float(p.s_opp)},
            "tenants": tenants,
        }
    )


def accepted(p: TierParams) -> dict[str, int] | None:
    """The least deadlines at which every floored obligation holds (D ← max(D, bound(D)), all together)."""
    d = {t.name: Fraction(1) for t in p.tenants}
    for _ in range(64):
        c = contract(p, d)
        bounds = {n: deadline_bound(c, n) for n in d}
        if any(b is None for b in bounds.values()):
            return None
        step = {n: max(d[n], b) for n, b in bounds.items() if b is not None}
        if step == d:
            return {n: int(x) for n, x in d.items()} if all(x.denominator == 1 for x in d.values()) else None
        d = step
    return None


def worst(p: TierParams, name: str) -> int:
    """The largest sojourn of ``name`` in the model: raise its deadline until no run misses it."""
    free = replace(p, tenants=tuple(replace(t, deadline=None) for t in p.tenants))
    d = 0
    while (run := find_tier_schedule(free.with_deadlines({name: d}))) is not None:
        d = run.max_sojourn(name)
    return d


def issue() -> bool:
    run = find_tier_schedule(ISSUE.with_deadlines({"lo": 9}))
    if run is None:
        print("no run misses the former bound D_lo = 9")
        return False
    print(f"former bound D_lo = 9 (issue contract): lo misses, sojourn {run.max_sojourn('lo')}")
    for k in (3, 4):
        p = replace(ISSUE, tenants=tuple(replace(t, windows=k) for t in ISSUE.tenants))
        print(f"  worst lo sojourn within {k} windows: {worst(p, 'lo')}")
    lo = synthesize_deadline(contract(ISSUE, {}), "lo").value
    print(f"  least deadline verify accepts for lo: {lo}")
    return lo is None


def main() -> int:
    t0 = time.perf_counter()
    if not issue():
        return 1
    for p in CONTRACTS:
        deadlines = accepted(p)
        if deadlines is None or not all_hold(
            verify_contract(contract(p, {n: Fraction(d) for n, d in deadlines.items()}))
        ):
            print(f"verify accepts no deadlines for {p}")
            return 1
        model = replace(p.with_deadlines(deadlines), ties="any")
        if find_tier_schedule(model, "any") is None:
            print(f"vacuous model (no run at all): {p}")
            return 1
        run = find_tier_schedule(model, "miss")
        if run is not None:
            print(f"counterexample at the accepted deadlines {deadlines}: {p}\n{run.to_json()}")
            return 1
        seen = {t.name: worst(p, t.name) for t in p.tenants}
        shape = ", ".join(f"{t.name} t{t.tier} B{t.floor} s{t.s_max}" for t in p.tenants)
        print(
            f"C={p.slots} R={p.reserve} W={p.window} s_opp={p.s_opp} [{shape}]: D {deadlines}, worst {seen}"
        )
    print(
        f"proved (bounds: 3 windows of arrivals per tenant (2 for the lowest of three), C − R opportunistic "
        f"jobs, services in [1, ceiling], every same-instant order; {len(CONTRACTS)} contracts; "
        f"{time.perf_counter() - t0:.1f} s): no floored request misses the deadlines verify accepts"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
