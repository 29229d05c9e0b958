"""The service envelope proved wrong: services above their ceiling, services below L.

* **Above the ceiling** (``service.s_max``, ``service.s_max_opp`` or a tenant's own ``s_max``): a
  completed request whose service (dispatch → completion) exceeded its tenant's ceiling. The
  deadline argument (D ≥ s_max_opp + ⌈B/C⌉·s_max) assumed it could not; the cost is the slot time
  the contract did not account for and the late completions among those requests. Suggested: the
  largest service observed, rounded up to the millisecond (then ``rvguard verify`` again).
* **Below L** (``service.lower``): a completed request served faster than L(R). DR's drops are
  doom-sound only if L(R) ≤ the true service, so every ``doomed`` drop is suspect; the requests
  affected are the drops the recalibrated L would *not* have made (t + L'(R) ≤ D(R)). Suggested: L
  scaled by the smallest observed service / L(R) ratio (a constant L becomes the fastest service,
  rounded down to the millisecond).

Pure. Cost: O(requests).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..contract import Contract
from .findings import EXAMPLES, Finding
from .records import RequestRecord

__all__ = ["above_ceiling", "below_lower"]


def round_up(x: float) -> float:
    """``x`` rounded up to the millisecond (never below ``x``: a float service just past a round
    value keeps its own value, so the suggested ceiling holds every service it was computed from)."""
    return max(math.ceil(x * 1000.0 - 1e-9) / 1000.0, x)


def round_down(x: float) -> float:
    """``x`` rounded down to the millisecond (below a millisecond: to a part in 10⁹)."""
    return x * (1.0 - 1e-9) if x < 0.001 else math.floor(x * 1000.0 + 1e-9) / 1000.0


def _scaled_lower(contract: Contract, factor: float) -> dict[str, float]:
    """L scaled down by ``factor`` (each coefficient rounded down, so L' ≤ factor·L everywhere)."""
    lower = contract.service.lower
    base = round_down(lower.base * factor)
    per_token = math.floor(lower.per_token * factor * 1e9) / 1e9
    return {"service.lower.base": base, "service.lower.per_token": per_token}


def _ceiling_parameter(contract: Contract, tenant: str) -> str:
    spec = contract.tenants[tenant]
    if not spec.floored:
        return "service.s_max_opp"
    return "service.s_max" if spec.s_max is None else f"tenants.{tenant}.s_max"


def above_ceiling(records: Iterable[RequestRecord], contract: Contract) -> list[Finding]:
    """One finding per ceiling parameter that some completed service exceeded."""
    over: dict[str, list[tuple[RequestRecord, float]]] = {}
    for rec in records:
        service = rec.service
        if service is not None and service > rec.ceiling:
            over.setdefault(_ceiling_parameter(contract, rec.tenant), []).append((rec, service))
    out = []
    for parameter, hits in sorted(over.items()):
        worst = max(s for _, s in hits)
        current = hits[0][0].ceiling
        out.append(
            Finding(
                parameter=parameter,
                problem="services above the ceiling the deadline argument assumes",
                occurrences=len(hits),
                affected=len(hits),
                cost={
                    "late": sum(not r.on_time for r, _ in hits),
                    "excess_slot_seconds": sum(s - r.ceiling for r, s in hits),
                },
                current=current,
                observed=worst,
                suggested=round_up(worst),
                suggestion=f"raise {parameter} to {round_up(worst):g} s (the slowest service seen), "
                "then re-run `rvguard verify` on the deadline obligation",
                examples=tuple(r.rid for r, _ in hits[:EXAMPLES]),
                recalibrate={parameter: round_up(worst)},
            )
        )
    return out


def _lower_text(contract: Contract, factor: float) -> str:
    new = _scaled_lower(contract, factor)
    base, per_token = new["service.lower.base"], new["service.lower.per_token"]
    if contract.service.lower.per_token == 0.0:
        return f"set service.lower to {base:g} s (the fastest service seen)"
    return (
        f"scale service.lower by {factor:.4g}: {{base: {base:g}, per_token: {per_token:g}}} "
        "(the smallest observed service / L ratio)"
    )


def below_lower(records: Iterable[RequestRecord], contract: Contract) -> list[Finding]:
    """A finding when some completed service was shorter than its L(R) (module doc)."""
    recs = list(records)
    under = [(r, s) for r in recs if (s := r.service) is not None and s < r.lower]
    if not under:
        return []
    factor = min(s / r.lower for r, s in under)
    lowered = [r for r in recs if r.outcome == "drop" and r.reason == "doomed"]
    unsound = [r for r in lowered if r.ended + r.lower * factor <= r.deadline]
    recal = _scaled_lower(contract, factor)
    if contract.service.lower.per_token == 0.0:
        recal = {"service.lower": recal["service.lower.base"]}
    new = _scaled_lower(contract, factor)
    return [
        Finding(
            parameter="service.lower",
            problem="services shorter than L: DR's doom-sound drops rest on an L that is too high",
            occurrences=len(under),
            affected=len(unsound),
            cost={"doomed_drops": len(lowered), "drops_unsound_under_suggested_L": len(unsound)},
            current=contract.service.lower.base,
            observed=min(s for _, s in under),
            suggested=new["service.lower.base"],
            suggestion=_lower_text(contract, factor),
            examples=tuple(r.rid for r in (unsound or [r for r, _ in under])[:EXAMPLES]),
            recalibrate=recal,
        )
    ]
