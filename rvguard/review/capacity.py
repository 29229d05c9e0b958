"""Capacity below B/W proved: windows whose measured capacity fell short of the floors.

The floors assume the node serves Σ B credits per window W (A4). The trace measures its capacity
the way the live assumption watch does (`rvguard.enforce.watch`): in window k, C slots over the
mean service of the requests completed in k, times their mean credit weight, is what the node
could serve in one window (C·W·w̄_k / s̄_k); a window with no completion has no measure. A window
whose capacity is below Σ B is one occurrence. Its cost: the floor-admitted arrivals of that
window not served within it (completed after its end, failed, dropped, or still running when the
trace is past its end), and how many of them also missed their deadline.

Suggested floors: every floor scaled by (worst measured capacity) / Σ B, rounded down (a whole
number with count credits), so the floors fit the worst window the trace saw; the sentence also
gives the mean capacity over the whole trace.

Pure. Cost: O(requests).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..contract import Contract, CreditMode
from .findings import EXAMPLES, Finding
from .records import RequestRecord

__all__ = ["floor_capacity", "window_capacity"]


def window_capacity(records: Iterable[RequestRecord], contract: Contract) -> dict[int, float]:
    """Each window's measured capacity, in credits per window (windows with a completion only)."""
    sums: dict[int, list[float]] = {}  # k -> [services, weights, count]
    for rec in records:
        if (s := rec.service) is not None:
            acc = sums.setdefault(contract.window_index(rec.ended), [0.0, 0.0, 0.0])
            acc[0] += s
            acc[1] += rec.weight
            acc[2] += 1
    c, w = contract.slots, contract.window
    return {k: (c * w * (wt / n) / (s / n) if s > 0 else math.inf) for k, (s, wt, n) in sums.items()}


def _unserved(rec: RequestRecord, contract: Contract, last: float) -> bool:
    """A floor arrival not served within its own window (its window's end already in the trace)."""
    end = contract.window_start(contract.window_index(rec.arrived) + 1)
    if rec.outcome == "complete" and rec.ended <= end:
        return False
    return end <= last


def _floor_value(floor: float, scale: float, contract: Contract) -> float:
    value = floor * scale
    return float(math.floor(value)) if contract.credit is CreditMode.COUNT else round(value, 6)


def floor_capacity(records: Iterable[RequestRecord], contract: Contract, last: float) -> list[Finding]:
    """One finding per floored tenant when some window's measured capacity fell below Σ B."""
    recs = list(records)
    demand = sum(t.floor for t in contract.floored_tenants.values())
    caps = window_capacity(recs, contract)
    short = {k: c for k, c in caps.items() if c < demand}
    if not short or demand == 0:
        return []
    worst = min(short.values())
    finite = [c for c in caps.values() if math.isfinite(c)]
    mean = sum(finite) / len(finite)
    out = []
    for tenant, spec in sorted(contract.floored_tenants.items()):
        mine = [r for r in recs if r.tenant == tenant and r.basis == "floor"]
        hit = [r for r in mine if contract.window_index(r.arrived) in short and _unserved(r, contract, last)]
        suggested: float | None = _floor_value(spec.floor, worst / demand, contract)
        text = (
            f"lower tenants.{tenant}.floor to {suggested:g}: the worst window served {worst:.4g} "
            f"credits (mean {mean:.4g}); or add slots"
        )
        if not suggested:  # a floor of 0 would make the tenant opportunistic: no value to set
            suggested = None
            text = f"no floor fits the worst window ({worst:.4g} credits; mean {mean:.4g}): add slots"
        out.append(
            Finding(
                parameter=f"tenants.{tenant}.floor",
                problem=f"measured capacity below Σ B = {demand:g} per window",
                occurrences=len(short),
                affected=len(hit),
                cost={"late": sum(not r.on_time and r.deadline <= last for r in hit), "windows": len(short)},
                current=spec.floor,
                observed=worst,
                suggested=suggested,
                suggestion=text,
                examples=tuple(r.rid for r in hit[:EXAMPLES]),
                recalibrate={} if suggested is None else {f"tenants.{tenant}.floor": suggested},
            )
        )
    return out
