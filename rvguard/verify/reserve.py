"""The deadline obligation with a reserve: R of the C slots never go to surplus work (DESIGN §10).

Derivation
----------
The decision core (`rvguard.enforce.core`, `rvguard.enforce.ready`) lets a
surplus request (any basis but ``floor``: unfloored tenants' work and demoted
excess) take a slot only while fewer than C − R surplus requests hold one;
floor work may take any of the C slots and passes a blocked surplus head.
Dispatch is otherwise as in proofs/README.md §2: non-preemptive, ranked by
tier then floor before surplus, work-conserving for every request that may
take a slot.

Let q be a floor request of tenant i arriving at t, N the size of its
cohort (q and the floor work ranked at or ahead of it that is in the system
at t or arrives before q starts: the backlog precondition), ŝ the largest
ceiling in the cohort. Suppose no unfloored tenant ranks ahead of i (else see
`rvguard.verify.obligations.unbounded_ahead`). While q waits, every slot is
busy (a free slot would take q), and every slot that frees goes to a cohort
member (it outranks all else, and floor work is never blocked by the
reserve). So at t each slot is

* running a cohort member: it then runs cohort members back to back;
* running surplus work (at most C − R slots, by the reserve): free by
  t + b_s, b_s the largest ceiling of surplus that ranks below q
  (``s_max_opp``, the lower tiers' ceilings, and with ``excess: demote``
  every floored ceiling);
* running floor work of a lower tier (any number of slots: floor work is not
  limited by the reserve): free by t + b_f, b_f the largest ceiling of the
  floored tenants ranked below i (0 when there is none).

The worst case puts as many slots as possible in the slowest group: C − R
slots blocked until t + b, b = max(b_s, b_f) (the reserve-free blocking
term), and the other R until t + b_f. A slot free of blocking from t + o on
starts its m-th cohort member by t + o + (m − 1)·ŝ, so by t + x at least

    starts(x) = R · n(x − b_f) + (C − R) · n(x − b),   n(y) = ⌊y/ŝ⌋ + 1 if y ≥ 0 else 0

cohort members have started; q (at most the N-th) has started once
starts(x) ≥ N, and ends ŝ later. The obligation is therefore

    starts(D − ŝ) ≥ N

(the latest start that still ends by D has seen N starts), and the smallest
deadline is T = ŝ + min{x : starts(x) ≥ N}, attained on the grid
{b_f + jŝ} ∪ {b + jŝ}. The worst case is realisable (q arrives with R
cohort members started at t and C − R surplus jobs just started), so T is
tight; `tests/verify/test_reserve.py` checks both in the bounded schedule
model (`rvguard.verify.schedule` with ``reserve``) and replays its runs
through the real `DecisionCore`.

Special cases: R = 0 gives C · n(D − ŝ − b) ≥ N, i.e. D ≥ b + ⌈N/C⌉·ŝ,
the reserve-free clause; R = C gives D ≥ b_f + ⌈N/C⌉·ŝ (surplus never
blocks: it never runs); with no lower-tier floors (b_f = 0) and N ≤ R, q
starts at once: D ≥ ŝ. starts(x) grows with R, so the reserves meeting a
deadline are all those from a smallest one on (`synthesize_reserve` finds
it with z3's optimiser).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from ..contract import Contract
from .encoding import Encoding, ceiling_field

__all__ = ["encode_reserved_deadline", "floor_blocking_fields", "reserve_bound", "reserved"]


def reserved(enc: Encoding) -> bool:
    """Whether the deadline clause must count the reserve: R > 0, or R is being synthesised."""
    return "reserve" in enc.free or enc.contract.reserve > 0


def floor_blocking_fields(contract: Contract, tenant: str) -> list[str]:
    """Ceiling fields of floor work ranked below ``tenant`` (a higher tier): not limited by the reserve."""
    tier = contract.tenants[tenant].tier
    return sorted(
        {ceiling_field(contract, n) for n, t in contract.tenants.items() if t.floored and t.tier > tier}
    )


def _started(enc: Encoding, name: str, y: Any, wave: Any) -> Any:
    """n(y) = ⌊y/ŝ⌋ + 1 for y ≥ 0, else 0: cohort starts on one slot free of blocking ``y`` ago."""
    z3 = enc.z3
    k = z3.Int(f"waves.{name}_0")
    enc.define(f"waves.{name}", z3.And(k >= 0, z3.Implies(y >= 0, z3.And(k * wave <= y, y < (k + 1) * wave))))
    return z3.If(y >= 0, k + 1, 0)


def encode_reserved_deadline(enc: Encoding, tenant: str, n: Any, block: Any, wave: Any) -> Any:
    """starts(D − ŝ) ≥ N with R reserved slots (module doc); defines ``latest_start``, ``block``,
    ``floor_block`` and ``wave`` of ``tenant`` so that a model shows them."""
    z3 = enc.z3
    r, c = enc.term("reserve"), enc.term("slots")
    fields = floor_blocking_fields(enc.contract, tenant)
    terms = {
        "block": block,
        "floor_block": enc.max_of([enc.term(f) for f in fields]) if fields else z3.RealVal(0),
        "wave": wave,
        "latest_start": enc.term(f"tenants.{tenant}.deadline") - wave,
    }
    for key, term in terms.items():  # shown in a model; the clause uses the terms themselves
        enc.define(f"{key}.{tenant}", z3.Real(f"{key}.{tenant}_0") == term)
    x, t = terms["latest_start"], terms
    reserved_starts = _started(enc, f"reserved.{tenant}", x - t["floor_block"], wave)
    shared_starts = _started(enc, f"shared.{tenant}", x - t["block"], wave)
    return r * reserved_starts + (c - r) * shared_starts >= n


def _runs(y: Fraction, wave: Fraction) -> int:
    return math.floor(y / wave) + 1 if y >= 0 else 0


def reserve_bound(
    n: int, slots: int, reserve: int, wave: Fraction, block: Fraction, floor_block: Fraction
) -> Fraction:
    """T = ŝ + min{x : starts(x) ≥ N}: the smallest deadline the reserved clause accepts (exact).

    A binary search on each slot group's grid; O(log N). ``n ≤ 0`` needs no start: 0.
    """
    if n <= 0:
        return Fraction(0)

    def starts(x: Fraction) -> int:
        return reserve * _runs(x - floor_block, wave) + (slots - reserve) * _runs(x - block, wave)

    best: Fraction | None = None
    for origin, size in ((floor_block, reserve), (block, slots - reserve)):
        if size <= 0:
            continue
        lo, hi = 0, -(-n // size) - 1  # this group alone has started n by its hi-th grid point
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if starts(origin + mid * wave) >= n else (mid + 1, hi)
        x = origin + lo * wave
        best = x if best is None else min(best, x)
    assert best is not None  # slots ≥ 1, so some group is non-empty
    return best + wave
